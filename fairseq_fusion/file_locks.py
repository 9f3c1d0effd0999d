"""Kernel file locks (``filelock``, ``flock``) that a process takes without waiting and holds until it frees them or
ends: the kernel frees a lock when its process ends in any way, SIGKILL and out-of-memory kills included. The one place
that takes, holds and frees them: a training's ``--save-dir`` (``guards/save_dir_lock.py``) and a tool's ``--out``
(``fairseq_fusion_tools/atomic_files.py``).

The lock file is never removed, only unlocked (an empty unlocked file is free): removing it would let a process that
opened it just before lock the unlinked file while the next one locks a new file of the same name, two holders.
filelock keeps its file for that reason; its check of a locked file's link count misses it on NFS, where a removed
file still open is renamed, not unlinked.
"""
import logging
import os

_HELD = {}  # absolute lock path -> the FileLock this process holds on it


def holds(path):
    """Whether this process holds the lock on ``path``."""
    return os.path.abspath(path) in _HELD


def take(path):
    """Lock ``path`` for this process, without waiting (its folder and the empty file made where missing): True when
    this process holds it now (taken, or held already), False when another process holds it. OSError where the file
    cannot be made or opened."""
    path = os.path.abspath(path)
    if path in _HELD:
        return True
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lock = _new_lock(path)
    if not _try(lock):
        return False
    _HELD[path] = lock
    return True


def held_elsewhere(path):
    """Whether another process holds the lock on ``path``; a path without a file is free, and none is made."""
    path = os.path.abspath(path)
    if path in _HELD or not os.path.exists(path):
        return False
    lock = _new_lock(path)
    if not _try(lock):
        return True
    lock.release()
    return False


def free(path):
    """Unlock ``path`` where this process holds it; the file stays, empty and free."""
    lock = _HELD.pop(os.path.abspath(path), None)
    if lock is not None:
        lock.release()


def _new_lock(path):
    from filelock import FileLock

    logging.getLogger("filelock").setLevel(logging.WARNING)  # its per-lock notes (fairseq sets the root to DEBUG)
    return FileLock(path)


def _try(lock):
    """Acquire ``lock`` if it is free now: whether it was."""
    from filelock import Timeout

    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    return True
