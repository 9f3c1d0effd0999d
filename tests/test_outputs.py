"""Result files are written atomically (a temporary file, fsynced, then os.replace) and an --out is written by one
command at a time (a kernel lock on OUT.lock): fairseq_fusion_tools/atomic_files.py and the analysis commands' use of
it."""
import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import run_cli

from fairseq_fusion_tools import atomic_files


def test_a_failed_write_leaves_the_old_file(tmp_path):
    """json.dump fails midway (an object it cannot encode after some keys are written); a text write and a
    figure raise in the middle: the old files are as they were and no temporary file is left."""
    path = tmp_path / "OUT.json"
    path.write_text('{"old": true}\n')
    with pytest.raises(TypeError):
        atomic_files.write_json(str(path), {"a": list(range(1000)), "b": object()})
    assert path.read_text() == '{"old": true}\n'
    with pytest.raises(RuntimeError):
        with atomic_files.open_replacing(str(tmp_path / "OUT.md")) as f:
            f.write("half of a table")
            raise RuntimeError("interrupted")
    assert not (tmp_path / "OUT.md").exists()

    from matplotlib.artist import Artist

    from fairseq_fusion_tools.outputs import new_figure

    class CtrlC(Artist):  # drawn after matplotlib has started writing the SVG file
        def draw(self, renderer):
            raise KeyboardInterrupt()

    (tmp_path / "OUT.svg").write_text("old figure")
    fig, ax = new_figure()
    ax.plot([1, 2], [3, 4])
    ax.add_artist(CtrlC())
    with pytest.raises(KeyboardInterrupt):
        atomic_files.save_figure(fig, str(tmp_path / "OUT.svg"))
    assert (tmp_path / "OUT.svg").read_text() == "old figure"
    assert sorted(os.listdir(tmp_path)) == ["OUT.json", "OUT.svg"]


def test_a_complete_write_replaces_with_the_usual_permissions(tmp_path):
    from fairseq_fusion_tools.outputs import new_figure, write_outputs

    fig, ax = new_figure()
    ax.plot([1, 2], [3, 4])
    paths = write_outputs(str(tmp_path / "sub" / "OUT"), {"x": [1, 2]}, fig)
    assert json.loads(open(paths[0]).read()) == {"x": [1, 2]}
    assert open(paths[1], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    umask = os.umask(0)
    os.umask(umask)
    assert all(os.stat(p).st_mode & 0o777 == 0o666 & ~umask for p in paths)  # not mkstemp's private 0600
    assert sorted(os.listdir(tmp_path / "sub")) == ["OUT.json", "OUT.png"]


HOLD = """import sys, time
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire(timeout=30)  # a lock never freed: a failure, not a hang
print("held", flush=True)
time.sleep(60)
"""


def _holder(path):
    """Another process holding the kernel lock on ``path`` (as another fusion command would)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_held_lock_refuses_and_a_killed_holder_frees_it(tmp_path):
    from fairseq_fusion_tools.outputs import locked

    class Args:
        out = str(tmp_path / "OUT")

    lock = tmp_path / "OUT.lock"
    holder = _holder(lock)
    try:
        with pytest.raises(SystemExit) as e:
            locked(Args())
        assert str(e.value) == (f"fairseq-fusion: error: --out {Args.out} is in use by another command (lock file "
                                f"{lock}): wait until it has finished, or write elsewhere")
    finally:
        holder.send_signal(signal.SIGKILL)  # killed as the kernel's OOM killer would: no exit handler runs
        holder.wait()
    locked(Args())  # the kernel freed it
    locked(Args())  # this process holds it already
    atomic_files.release(str(lock))
    holder = _holder(lock)  # released: another process can take it
    holder.kill()
    holder.wait()


def test_a_write_is_flushed_to_disk_before_the_rename(tmp_path, monkeypatch):
    """fsync of the finished temporary file, then the rename, then the folder: a crash after the rename cannot leave
    an empty file."""
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 real_fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append(("replace", b)), real_replace(a, b)))
    atomic_files.write_text(str(tmp_path / "OUT.md"), "table\n")
    (kind1, tmp), (kind2, dest), (kind3, folder) = calls
    assert (kind1, kind2, kind3) == ("fsync", "replace", "fsync")
    assert os.path.basename(tmp).startswith(".OUT.md.") and dest == str(tmp_path / "OUT.md") and folder == str(tmp_path)
    assert (tmp_path / "OUT.md").read_text() == "table\n"


def test_an_analysis_command_refuses_a_held_out_and_frees_it_at_exit(tmp_path, monkeypatch):
    """fusion-bleu-by-length (no checkpoint): refused while another process holds OUT.lock, before writing
    anything; run alone it writes OUT.json/OUT.png and frees its lock when it exits (the file stays, empty and free:
    fairseq_fusion/file_locks.py)."""
    from fairseq_fusion_tools.cli import bleu_by_length as bleu_by_length_cli

    for name, lines in (("src", ["a b c", "d e f g"]), ("ref", ["A b c .", "D e f g ."]), ("hyp", ["A b c .", "D e g ."])):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    out = str(tmp_path / "res" / "OUT")
    argv = ["fusion-bleu-by-length", "--src", str(tmp_path / "src"), "--ref", str(tmp_path / "ref"),
            "--sys", f"mine={tmp_path / 'hyp'}", "--out", out]
    os.makedirs(tmp_path / "res")
    holder = _holder(tmp_path / "res" / "OUT.lock")
    monkeypatch.setattr(sys, "argv", argv)
    try:
        with pytest.raises(SystemExit, match=f"--out {out} is in use by another command"):
            bleu_by_length_cli.cli_main()
        assert os.listdir(tmp_path / "res") == ["OUT.lock"]
    finally:
        holder.kill()
        holder.wait()
    run_cli(argv, process=True)  # what its exit does
    # the killed holder's lock file taken over and freed at exit: no other file but the results
    assert sorted(os.listdir(tmp_path / "res")) == ["OUT.json", "OUT.lock", "OUT.png"]
    holder = _holder(tmp_path / "res" / "OUT.lock")  # and is free: the command released it at exit
    holder.kill()
    holder.wait()


def test_a_failed_analysis_frees_its_lock(tmp_path):
    """A command that claimed its --out and then failed (here: files it cannot read) frees the lock, as a successful
    one does; its file stays, empty and free (fairseq_fusion/file_locks.py), and nothing else is left."""
    (tmp_path / "res").mkdir()
    argv = ["fusion-bleu-by-length", "--src", str(tmp_path / "missing"), "--ref", str(tmp_path / "missing"),
            "--sys", f"mine={tmp_path / 'missing'}", "--out"]
    for process in (False, True):  # released by the in-process runner, and by the process's exit
        for out in (tmp_path / "res" / "OUT", tmp_path / "new" / "deeper" / "OUT"):
            proc = run_cli(argv + [str(out)], check=False, process=process)
            assert proc.returncode == 1 and "no such file" in proc.stderr, proc.stderr[-2000:]
        for folder in (tmp_path / "res", tmp_path / "new" / "deeper"):
            assert os.listdir(folder) == ["OUT.lock"]
            holder = _holder(folder / "OUT.lock")  # free: another process takes it
            holder.kill()
            holder.wait()
