"""Progress bars only on a terminal: a command's stderr redirected to a file or a pipe (a log) gets no bar, no
carriage return, no escape code; on a terminal (a pseudo-terminal here) the bar is drawn. One mechanism:
`fairseq_fusion_tools.progress.progress`, the only user of tqdm in the tools."""
import ast
import fcntl
import os
import pty
import struct
import termios
import subprocess
import sys

from conftest import REPO, run_cli

SHOW = "from fairseq_fusion_tools.progress import progress\nfor _ in progress(range(3), desc='counting'): pass\n"


def run_with_stderr(stderr_fd):
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-c", SHOW], stderr=stderr_fd, stdout=subprocess.DEVNULL, env=env, cwd=REPO,
                          timeout=60)


def test_bar_on_a_terminal_only(tmp_path):
    main, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # 80 columns (a new pty has 0)
    try:
        run_with_stderr(terminal)
        os.close(terminal)
        shown = b""
        try:
            while chunk := os.read(main, 4096):
                shown += chunk
        except OSError:  # the terminal's other end is closed: all read
            pass
    finally:
        os.close(main)
    assert b"counting: 100%" in shown and b"\r" in shown, shown
    with open(tmp_path / "log", "wb") as log:
        run_with_stderr(log)
    assert (tmp_path / "log").read_bytes() == b""


def test_analysis_log_has_no_bar(tiny_checkpoint, multi30k_slice, tmp_path):
    """The user's report (fusion-information-probe, the same through every analysis' batch loop): escape codes and
    carriage returns in a redirected log. fusion-embedding-similarity's stderr is a pipe here."""
    proc = run_cli(["fusion-embedding-similarity", "--path", tiny_checkpoint, "--data", multi30k_slice, "--split", "test",
                    "--out", str(tmp_path / "sim"), "--cpu"])
    assert os.path.exists(tmp_path / "sim.png")
    for stream in (proc.stdout, proc.stderr):
        assert "\r" not in stream and "\x1b" not in stream and "it/s" not in stream and "%|" not in stream, stream[-2000:]


def test_every_bar_goes_through_progress():
    """No module of the tools imports tqdm itself: only progress.py, so every command's bar follows one rule."""
    importers = []
    for root, _, files in os.walk(os.path.join(REPO, "fairseq_fusion_tools")):
        for name in files:
            path = os.path.join(root, name)
            if not name.endswith(".py") or path.endswith(os.path.join("fairseq_fusion_tools", "progress.py")):
                continue
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                if any(n == "tqdm" or n.startswith("tqdm.") for n in names):
                    importers.append(os.path.relpath(path, REPO))
    assert not importers, f"tqdm imported outside fairseq_fusion_tools/progress.py: {importers}"
