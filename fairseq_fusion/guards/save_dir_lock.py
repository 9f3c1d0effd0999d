"""One ``--save-dir``, one training (issue 49).

Two fairseq-train runs into one folder (fairseq's default ``checkpoints``, for one) overwrite each other's
``checkpoint_last.pt`` and ``checkpoint_best.pt``, or one dies in fairseq's checkpoint cleanup with a
``FileNotFoundError`` traceback. A training holds a lock on its save folder from before it writes anything (before
fairseq's ``verify_checkpoint_directory``) until it ends: a kernel lock (``file_locks.py``: ``filelock``, ``flock``) on
``SAVE_DIR/training.lock``, which the kernel frees when the process ends in any way, SIGKILL and out-of-memory kills
included, so a killed training never leaves a folder locked. ``SAVE_DIR/training.lock.json`` says who holds it (pid,
host, start time, command), for the refusal of a second training, which is one line naming the holder, before it has
touched anything of the folder.

The lock file stays in the folder when the training ends (empty; an unlocked file is free), as every lock file of
``file_locks.py`` does: removing it would let a training that opened it just before lock an unlinked file while the
next one locks a new file of the same name (two holders). The sidecar is removed when the training ends (``main``
returns, or at exit); a killed training's stays until the next one overwrites it, and is read only while the lock is
held.

Where: in ``fairseq_cli.train.main``, which fairseq-train and fairseq-hydra-train run (and the tools that start them:
fusion-compare, fusion-gpu-check's DDP runs), at its call of ``add_defaults(cfg)``: right after it has loaded the
plugin (fairseq-hydra-train loads it only there) and before ``verify_checkpoint_directory``, its first write. The
lock is taken in rank 0's process (the only rank that saves) and freed when ``main`` returns (a training called
in-process) or the process ends. With several ranks the verdict is broadcast, so every rank refuses with rank 0
instead of waiting for it in the first collective. ``--no-save`` runs write no checkpoint and take no lock; a save
folder that is no local path (``s3://``, ...) takes none either.
"""
import atexit
import datetime
import functools
import json
import os
import re
import socket
import sys

from .. import file_locks
from ..errors import PREFIX, FusionError

LOCK_NAME = "training.lock"
HOLDER_NAME = LOCK_NAME + ".json"
_HELD = set()  # absolute lock paths of the save folders this process holds (file_locks holds the locks)
_HELD_AT_EXIT = []


def lock_path(save_dir):
    return os.path.join(os.path.abspath(save_dir), LOCK_NAME)


def holder(save_dir):
    """Who holds (or last held) the folder, as the sidecar says, or None."""
    try:
        with open(os.path.join(os.path.abspath(save_dir), HOLDER_NAME), encoding="utf-8") as f:
            found = json.load(f)
        return found if isinstance(found, dict) else None
    except (OSError, ValueError):
        return None


def describe(found):
    command = str(found.get("command", ""))
    command = command if len(command) <= 160 else command[:157] + "..."
    return (f"pid {found.get('pid')} on host {found.get('host')}, started {found.get('started')}"
            + (f": {command}" if command else ""))


def refusal(save_dir):
    found = holder(save_dir)
    who = describe(found) + "; " if found else ""
    return (f"--save-dir {save_dir} is in use by another training ({who}lock file {lock_path(save_dir)}): its "
            "checkpoints would be overwritten; wait until it has finished (or stop it), or train into another "
            "--save-dir")


def _write_holder(save_dir):
    record = {"pid": os.getpid(), "host": socket.gethostname(),
              "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
              "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]) if sys.argv else ""}
    path = os.path.join(os.path.abspath(save_dir), HOLDER_NAME)
    tmp = f"{path}.{os.getpid()}.part"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f)
        f.write("\n")
    os.replace(tmp, path)


def acquire(save_dir):
    """Lock ``save_dir`` for this process (creating the folder), or refuse in one line naming the holder."""
    import errno

    from .command_paths import check_output_folder

    path = lock_path(save_dir)
    if path in _HELD:
        return
    check_output_folder(save_dir, "--save-dir")
    try:
        taken = file_locks.take(path)
        if taken:
            _write_holder(save_dir)
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        file_locks.free(path)  # taken, but the sidecar could not be written
        raise FusionError(f"--save-dir {save_dir}: cannot write in it ({e.strerror}); expected a folder this user can "
                          "write in") from None
    if not taken:
        raise FusionError(refusal(save_dir))
    _HELD.add(path)
    if not _HELD_AT_EXIT:
        atexit.register(release_all)  # the process ends without main returning (fairseq-hydra-train, a spawned rank)
        _HELD_AT_EXIT.append(True)


def _release(path):
    """Free a lock this process holds on ``path`` (an absolute lock path), its sidecar removed first."""
    if path not in _HELD:
        return
    _HELD.remove(path)
    try:
        os.remove(os.path.join(os.path.dirname(path), HOLDER_NAME))
    except OSError:
        pass
    file_locks.free(path)  # its file stays in the folder (file_locks.py)


def check_free(save_dir):
    """Refuse in one line when a training holds ``save_dir``: for a tool that starts fairseq-train into it, before it
    writes there itself (fusion-compare's command.json and train.log)."""
    if file_locks.held_elsewhere(lock_path(save_dir)):
        raise FusionError(refusal(save_dir))


def release(save_dir):
    _release(lock_path(save_dir))


def release_all():
    for path in list(_HELD):
        _release(path)


def needs_lock(cfg):
    from .checkpoint_files import is_local

    save_dir = cfg.checkpoint.save_dir
    return not cfg.checkpoint.no_save and bool(save_dir) and is_local(save_dir)


def _broadcast(message):
    """Rank 0's verdict (None or the refusal) to every rank, where a process group is up."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch comes with fairseq
        return message
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return message
    box = [message]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def lock_for(cfg):
    """Rank 0 of a training that saves locks its ``--save-dir``; with several ranks, each gets rank 0's verdict and
    refuses with it (instead of waiting for rank 0 in the first collective)."""
    from fairseq.distributed import utils as distributed_utils

    message = None
    if needs_lock(cfg) and distributed_utils.is_master(cfg.distributed_training):
        try:
            acquire(cfg.checkpoint.save_dir)
        except FusionError as e:
            message = str(e)
    if cfg.distributed_training.distributed_world_size > 1:
        message = _broadcast(message)
    if message is not None:
        raise FusionError(message.replace(PREFIX, ""))


def _locking_defaults(add_defaults):
    """fairseq-train's ``main`` (fairseq-hydra-train's too) calls ``add_defaults(cfg)`` right after loading the plugin
    (``--user-dir``) and before it writes anything (``verify_checkpoint_directory``): the first call with the whole
    config in a rank, where the plugin is loaded (fairseq-hydra-train loads it only there). A missing batch size is
    refused there first, in one line (fairseq asserts it just after), and so is any option outside its domain
    (``option_checks.check_config``: fairseq-hydra-train's configuration is first whole here; fairseq-train's
    options were checked as they were parsed)."""
    @functools.wraps(add_defaults)
    def wrapper(cfg, *args, **kwargs):
        from . import option_checks
        from .entry_checks import check_batch_size

        result = add_defaults(cfg, *args, **kwargs)
        check_batch_size(cfg)
        option_checks.check_config(cfg)
        lock_for(cfg)
        return result

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _released_after(main):
    @functools.wraps(main)
    def wrapper(cfg, *args, **kwargs):
        held = set(_HELD)
        try:
            return main(cfg, *args, **kwargs)
        finally:  # a training called in-process (tests, a notebook) frees its folder when it returns
            for path in set(_HELD) - held:
                _release(path)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def patch_train(module):
    """``fairseq_cli.train``: ``add_defaults`` takes the lock, ``main`` frees it when it returns."""
    if not getattr(module.add_defaults, "patched_by_fairseq_fusion", False):
        module.add_defaults = _locking_defaults(module.add_defaults)
    if not getattr(module.main, "patched_by_fairseq_fusion", False):
        module.main = _released_after(module.main)


_SPAWNED_REFUSAL = re.compile(r"^\S*FusionError: (" + re.escape(PREFIX) + r".*)$", re.MULTILINE)


def spawned_refusal(error):
    """A refusal raised in a rank that ``torch.multiprocessing.spawn`` started (one process per GPU), as its one line
    rather than the rank's traceback wrapped in spawn's; None for any other error."""
    found = _SPAWNED_REFUSAL.findall(str(error)) if type(error).__name__ == "ProcessRaisedException" else []
    return FusionError(found[-1]) if found else None
