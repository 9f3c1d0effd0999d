"""A program of the user's own that imports the plugin keeps its process as it set it up: the plugin's process-wide
settings belong to the command-line runs (fairseq_fusion/command_line.py), and a program asks for them with one call.
Fresh interpreters: what is tested is the state a program's own process is left in."""
import json
import os
import signal
import subprocess
import sys

import pytest

from cli_runner import BIN, expect, expect_success
from conftest import REPO
from fairseq_fusion.compat import quiet

CORES = len(os.sched_getaffinity(0))


def python(args, cwd, **env):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("FUSION_", "OMP_", "MKL_"))}
    environ["PYTHONPATH"] = REPO
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, env=dict(environ, **env))


@pytest.mark.skipif(CORES < 2, reason="one core: the thread count cannot be seen to change")
def test_a_program_that_uses_the_hub_keeps_its_threads_hooks_warnings_and_cudnn(tiny_checkpoint, multi30k_slice,
                                                                                tmp_path):
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # a busy core: the fitting would act
    try:
        proc = python([os.path.join(REPO, "tests", "user_program_probe.py"), tiny_checkpoint, multi30k_slice], tmp_path)
    finally:
        burner.kill()
        burner.wait()
    expect_success(proc)
    found = json.loads(proc.stdout.splitlines()[-1])
    before, after = found["before"], found["after"]
    assert before["threads"] == 2
    # the warning filters: what torch's and fairseq's own lazy imports add (sympy, scipy) may come, the plugin's none
    filters_before = before.pop("filters")
    added = [f for f in after.pop("filters") if f not in filters_before]
    assert not [f for f in added if f in {message for _, message, _ in quiet.WARNINGS}], added
    assert after == before
    assert isinstance(found["translation"], str)
    assert "fairseq-fusion: warning" not in proc.stderr and "torch uses" not in proc.stderr


def test_ctrl_c_in_a_users_train_py_runs_its_exit_handlers(tmp_path):
    """A script of the user's own named train.py: Ctrl-C is Python's KeyboardInterrupt, its atexit handlers run, and
    nothing speaks of checkpoints it never had."""
    marker = tmp_path / "atexit-ran"
    script = tmp_path / "train.py"
    script.write_text("import atexit, os, signal, pathlib\n"
                      f"atexit.register(lambda: pathlib.Path({str(marker)!r}).write_text('yes'))\n"
                      "import fairseq_fusion\n"
                      "os.kill(os.getpid(), signal.SIGINT)\n"
                      "import time; time.sleep(30)\n")
    proc = python([str(script)], tmp_path)
    expect(proc, proc.returncode == -signal.SIGINT, "Python's own end of a KeyboardInterrupt (killed by SIGINT)")
    assert marker.read_text() == "yes"
    assert "KeyboardInterrupt" in proc.stderr and "checkpoint" not in proc.stderr


def test_a_refusal_in_a_program_is_an_exception_with_a_one_line_message(tmp_path):
    proc = python(["-c", "import fairseq_fusion\nfrom fairseq_fusion.models.fusion_transformer import "
                   "FusionTransformerModel\nFusionTransformerModel.from_pretrained('no-such-folder')"], tmp_path)
    expect(proc, proc.returncode == 1 and "Traceback" in proc.stderr, "Python's traceback, as for any library")
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("fairseq_fusion.errors.FusionError: fairseq-fusion: error: from_pretrained: no-such-folder")


def test_one_call_gives_a_program_the_command_line_settings(tmp_path):
    code = ("import sys, warnings, fairseq_fusion.command_line as c\nhook = sys.excepthook\nchanged = c.configure()\n"
            "print(hook is not sys.excepthook, 'sys.excepthook' in changed, 'warnings.showwarning' in changed, "
            "c.configure() == changed, c.configured())")
    proc = python(["-c", code], tmp_path)
    expect_success(proc)
    assert proc.stdout.split() == ["True"] * 5


def test_a_fairseq_command_is_a_command_line_run(tmp_path):
    """fairseq-train --user-dir: the plugin's refusal is one line (its excepthook), in the command's own process."""
    proc = subprocess.run([os.path.join(BIN, "fairseq-train"), str(tmp_path / "no-data"), "--user-dir",
                           os.path.join(REPO, "fairseq_fusion"), "--arch", "fusion_transformer", "--optimizer", "adam",
                           "--max-tokens", "100",
                           "--cpu"], cwd=tmp_path, capture_output=True, text=True)
    expect(proc, proc.returncode == 1 and "Traceback" not in proc.stderr, "one line, exit status 1")
    assert proc.stderr.strip().splitlines()[-1].startswith("fairseq-fusion: error: data folder")
