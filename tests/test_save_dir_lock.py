"""One --save-dir, one training (save_dir_lock.py, issue 49 item 2): a training holds a kernel lock on
SAVE_DIR/training.lock from before it writes anything until it ends; a second one into the folder (fairseq-train,
fairseq-hydra-train, every rank of a DDP run) refuses in one line naming the holder and leaves the folder as it was; a
killed holder frees it; --no-save runs take no lock. A refused DDP rank ended, now and then, in SIGABRT after its
line: a command-line run destroys its process group at exit (compat/process_group_exit.py)."""
import json
import os
import re
import signal
import subprocess
import sys

import pytest
from filelock import FileLock
from torch.multiprocessing.spawn import ProcessRaisedException

from conftest import BIN, REPO, run_cli
from conftest import tiny_train_args as tiny_train
from fairseq_fusion.errors import PREFIX, FusionError
from fairseq_fusion.guards import command_mains
from test_distributed_resume import free_port
from test_refusals import USER_DIR, one_line_refusal
from test_resume_check import saved_updates, snapshot


def hold(folder, pid=12345, command="fairseq-train data-bin --save-dir ck"):
    """The lock of ``folder`` held from this test, with the sidecar a training writes (another process's pid)."""
    os.makedirs(folder, exist_ok=True)
    lock = FileLock(os.path.join(folder, "training.lock"))
    lock.acquire(timeout=0)
    with open(os.path.join(folder, "training.lock.json"), "w", encoding="utf-8") as f:
        json.dump({"pid": pid, "host": "node7", "started": "2026-11-28 09:00:00 UTC", "command": command}, f)
    return lock


def is_free(folder):
    lock = FileLock(os.path.join(folder, "training.lock"))
    try:
        lock.acquire(timeout=0)
    except TimeoutError:
        return False
    lock.release()
    return True


def test_a_second_training_into_a_held_folder_is_one_line_and_touches_nothing(multi30k_slice, tiny_checkpoint, tmp_path):
    import shutil

    folder = str(tmp_path / "ck")
    shutil.copytree(os.path.dirname(tiny_checkpoint), folder)
    lock = hold(folder)
    before = snapshot(folder)
    proc = run_cli(tiny_train(multi30k_slice, folder, "transformer_surface_fusion", max_update=3), check=False)
    one_line_refusal(proc, f"--save-dir {folder} is in use by another training (pid 12345 on host node7, started "
                           "2026-11-28 09:00:00 UTC: fairseq-train data-bin --save-dir ck; "
                           f"lock file {folder}/training.lock)", "another --save-dir")
    assert snapshot(folder) == before
    lock.release()
    os.remove(os.path.join(folder, "training.lock.json"))
    run_cli(tiny_train(multi30k_slice, folder, "transformer_surface_fusion", max_update=3))  # free: it resumes
    assert saved_updates(os.path.join(folder, "checkpoint_last.pt")) == 3
    assert is_free(folder) and not os.path.exists(os.path.join(folder, "training.lock.json"))  # freed as main returned


def test_a_killed_holder_frees_the_folder(multi30k_slice, tmp_path):
    """A real process holds the lock (what is tested: the kernel frees it when the process is killed)."""
    folder = str(tmp_path / "ck")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom fairseq_fusion.guards import save_dir_lock\n"
         "save_dir_lock.acquire(sys.argv[1])\nprint('held', flush=True)\ntime.sleep(600)", folder],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])))
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = run_cli(tiny_train(multi30k_slice, folder, "fusion_transformer"), check=False)
        one_line_refusal(proc, f"--save-dir {folder} is in use by another training (pid {holder.pid} on host ")
        assert sorted(os.listdir(folder)) == ["training.lock", "training.lock.json"]
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert is_free(folder)
    run_cli(tiny_train(multi30k_slice, folder, "fusion_transformer"))
    assert saved_updates(os.path.join(folder, "checkpoint_last.pt")) == 2


def test_no_save_takes_no_lock(multi30k_slice, tmp_path):
    folder = str(tmp_path / "ck")
    lock = hold(folder)
    try:
        run_cli(tiny_train(multi30k_slice, folder, "fusion_transformer", "--no-save"))
    finally:
        lock.release()


def test_hydra_train_into_a_held_folder_is_one_line(multi30k_slice, tmp_path):
    folder = str(tmp_path / "ck")
    lock = hold(folder)
    try:
        proc = subprocess.run(
            [os.path.join(BIN, "fairseq-hydra-train"), "--config-dir", os.path.join(REPO, "recipes", "hydra"),
             "--config-name", "transformer_surface_fusion", f"task.data={multi30k_slice}", "task.source_lang=en",
             "task.target_lang=de", f"common.user_dir={USER_DIR}", "common.cpu=true", "common.fp16=false",
             "distributed_training.distributed_world_size=1", "dataset.max_tokens=1500", "optimization.max_update=2",
             f"checkpoint.save_dir={folder}", f"hydra.run.dir={tmp_path}/run"],
            capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    finally:
        lock.release()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
    assert lines and f"--save-dir {folder} is in use by another training (pid 12345" in lines[0], proc.stderr[-3000:]
    assert sorted(os.listdir(folder)) == ["training.lock", "training.lock.json"]


def test_hydra_train_without_a_batch_size_is_one_line(multi30k_slice, tmp_path):
    """fairseq-hydra-train runs call_main before it loads the plugin: the refusal comes where the plugin is loaded,
    before the save folder is locked or written."""
    folder = str(tmp_path / "ck")
    proc = subprocess.run(
        [os.path.join(BIN, "fairseq-hydra-train"), "--config-dir", os.path.join(REPO, "recipes", "hydra"),
         "--config-name", "transformer_surface_fusion", f"task.data={multi30k_slice}", "task.source_lang=en",
         "task.target_lang=de", f"common.user_dir={USER_DIR}", "common.cpu=true", "common.fp16=false",
         "distributed_training.distributed_world_size=1", "dataset.max_tokens=null", "dataset.batch_size=null",
         "optimization.max_update=2", f"checkpoint.save_dir={folder}", f"hydra.run.dir={tmp_path}/run"],
        capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "AssertionError" not in proc.stderr, \
        proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
    assert lines and "no batch size: give --max-tokens N" in lines[0], proc.stderr[-3000:]
    assert not os.path.exists(folder)


def test_every_rank_of_a_ddp_training_refuses_with_rank_0(multi30k_slice, tmp_path):
    """Rank 0 holds the lock (or is refused); rank 1 gets its verdict instead of waiting for it."""
    folder = str(tmp_path / "ck")
    lock = hold(folder)
    port = free_port()
    procs = []
    try:
        for rank in range(2):
            args = tiny_train(multi30k_slice, folder, "fusion_transformer") + [
                "--distributed-world-size", "2", "--distributed-rank", str(rank), "--distributed-backend", "gloo",
                "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-no-spawn", "--device-id", "0"]
            procs.append(subprocess.Popen([os.path.join(BIN, args[0])] + args[1:], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS="1")))
        errs = [p.communicate(timeout=300)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        lock.release()
    for p, err in zip(procs, errs):
        assert p.returncode == 1 and "Traceback" not in err, err[-3000:]
        last = re.sub(r"^\[rank\d\]: ", "", err.strip().splitlines()[-1])  # torch's prefix of a rank's stderr lines
        assert last.startswith(f"{PREFIX}--save-dir {folder} is in use by another training (pid 12345"), err[-3000:]


EXIT_PROBE = """
import atexit, sys
import torch.distributed as dist
# registered first, so it runs after every handler registered later (the last registered runs first)
atexit.register(lambda: print("group up at exit:", dist.is_initialized(), flush=True))
if sys.argv[2] == "command-line run":
    import fairseq_fusion.command_line
    fairseq_fusion.command_line.configure()
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], world_size=1, rank=0)
"""


@pytest.mark.parametrize("run, up_at_exit", [("command-line run", False), ("own program", True)])
def test_a_command_line_run_destroys_its_process_group_at_exit(tmp_path, run, up_at_exit):
    """fairseq leaves a DDP rank's process group up; gloo's threads then end the rank in std::terminate (SIGABRT)
    after its last line, at random (a refused rank above, 2 of 30 bare two-rank runs). A command-line run destroys
    the group while the interpreter is whole; a program of one's own keeps its group as it made it."""
    proc = subprocess.run([sys.executable, "-c", EXIT_PROBE, str(tmp_path / "init"), run], capture_output=True,
                          text=True, cwd=REPO, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == f"group up at exit: {up_at_exit}"


def test_a_refusal_in_a_spawned_rank_is_its_one_line():
    """torch.multiprocessing.spawn (one process per GPU) hands the parent the rank's traceback as text."""
    from fairseq_fusion.guards import save_dir_lock

    line = f"{PREFIX}--save-dir ck is in use by another training (lock file ck/training.lock): wait"
    text = ("\n\n-- Process 0 terminated with the following error:\nTraceback (most recent call last):\n  File \"x.py\", "
            f"line 1, in main\n    lock_for(cfg)\nfairseq_fusion.errors.FusionError: {line}\n")

    def call_main(cfg, main, **kwargs):
        raise ProcessRaisedException(text, 0, 4242)

    with pytest.raises(FusionError) as e:
        command_mains.checked_call_main(call_main)(None, None)
    assert str(e.value) == line

    def crash(cfg, main, **kwargs):
        raise ProcessRaisedException(text.replace("fairseq_fusion.errors.FusionError", "RuntimeError"), 0, 4242)

    with pytest.raises(ProcessRaisedException):  # a real bug keeps spawn's traceback
        command_mains.checked_call_main(crash)(None, None)
