"""torch's process group destroyed when a command-line run ends.

fairseq never calls ``torch.distributed.destroy_process_group``: a DDP rank (fairseq-train with
``--distributed-world-size`` > 1, fairseq-hydra-train, fusion-gpu-check's DDP runs) ends with the group up. With gloo,
the interpreter's teardown then destroys its worker threads' objects while they still run, and the rank dies in
``std::terminate`` ("terminate called without an active exception", SIGABRT, exit status 134 or -6) after its last
line: a finished training, or a refusal's one line (``save_dir_lock.py``), reports a crash (pytorch/pytorch#190489; 2
and 9 of 30-40 two-rank runs on this 2-core host, torch 2.13 CPU). An exit handler destroys the group while the
interpreter is still whole, as torch's documentation asks of every program ("Shutdown"). Only in a command-line run
(``command_line.py``): a program of one's own owns its process group. Ctrl-C's exit (``os._exit``) skips it, as it
skips the teardown.
"""
import atexit
import sys

_REGISTERED = []


def destroy():
    """Destroy the default process group where one is up; an exit is never turned into a traceback by it."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return
    try:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - a peer already gone: the process ends anyway, its status is its own
        pass


def destroy_at_exit():
    """A command-line run's change: ``destroy`` registered to run at exit, once."""
    if _REGISTERED:
        return False
    atexit.register(destroy)
    _REGISTERED.append(True)
    return True
