"""Result files are never left half-written, and one command at a time writes an ``--out``.

Every writer goes through ``replacing(path)``: the content goes to a temporary file in the same
folder, which replaces ``path`` (``os.replace``, atomic) only once it is complete; on an error
or Ctrl-C the old file stays as it was and the temporary one is removed; the content is flushed to disk
(``fsync``) before the rename, so a crash leaves the old file or the new one, never an empty one.
No input of the running command line is replaced (``path_roles.check_replacing``).
``claim(lock_path)`` takes a kernel lock on ``lock_path`` (``fairseq_fusion/file_locks.py``) until the process exits; a
second command that finds it held is refused with one line; a process that dies in any way frees it. The lock file
stays when the lock is freed, empty and free, as every lock file of ``file_locks.py`` does (removing it would let two
commands hold the lock at once).
"""
import atexit
import json
import os
import tempfile
from contextlib import contextmanager

from fairseq_fusion_tools import path_roles
from fairseq_fusion_tools.user_files import fail


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replacing(path):
    """Yield a temporary path beside ``path`` (same extension, so matplotlib and numpy infer the
    format); when the block ends without error it replaces ``path``, else it is removed. An input of the running
    fusion-* command line is never replaced (``path_roles.check_replacing``: one line, before the block runs)."""
    path_roles.check_replacing(path)
    path = os.path.realpath(path)  # a symlinked result is written through, not replaced by a file
    folder, name = os.path.split(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part" + os.path.splitext(name)[1])
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; results get the usual permissions
        _fsync(tmp)
        os.replace(tmp, path)
        _fsync(folder)  # the rename itself
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


@contextmanager
def open_replacing(path, mode="w", encoding=None):
    """``open`` whose file replaces ``path`` only when the block completes (text: utf-8 unless given)."""
    if "b" not in mode and encoding is None:
        encoding = "utf-8"
    with replacing(path) as tmp:
        with open(tmp, mode, encoding=encoding) as f:
            yield f


def write_text(path, text):
    with open_replacing(path) as f:
        f.write(text)


def write_lines(path, lines):
    with open_replacing(path) as f:
        for line in lines:
            f.write(line + "\n")


def write_json(path, data, **dump_kwargs):
    dump_kwargs.setdefault("indent", 2)
    with open_replacing(path) as f:
        json.dump(data, f, **dump_kwargs)


def save_figure(fig, path, **savefig_kwargs):
    """``fig.savefig(path)`` through a temporary file (the format from ``path``'s extension)."""
    savefig_kwargs.setdefault("format", os.path.splitext(path)[1][1:] or None)
    with replacing(path) as tmp:
        fig.savefig(tmp, **savefig_kwargs)


# ------------------------------------------------------------------------------------------ locks
_CLAIMED = set()  # absolute lock paths this process claimed (fairseq_fusion/file_locks.py holds the locks)


def release(lock_path):
    """Free a lock this process claimed (``claim`` has it done at exit); its file stays, empty and free."""
    lock_path = os.path.abspath(lock_path)
    if lock_path not in _CLAIMED:
        return
    from fairseq_fusion import file_locks  # here, as in claim: the plugin package imports torch, writers need none

    _CLAIMED.remove(lock_path)
    file_locks.free(lock_path)


def release_all():
    """Free every lock this process claimed: a command run in-process (its ``main`` called from Python) has ended."""
    for lock_path in list(_CLAIMED):
        release(lock_path)


def claim(lock_path, what):
    """Hold ``lock_path`` until the process exits: a kernel lock (``fairseq_fusion/file_locks.py``), so it is free
    again when its process ends in any way, SIGKILL and out-of-memory kills included; its (empty) file stays.

    ``what`` names the output for the refusal, e.g. ``--out results/x``."""
    from fairseq_fusion import file_locks

    lock_path = os.path.abspath(lock_path)
    if not file_locks.take(lock_path):
        fail(f"{what} is in use by another command (lock file {lock_path}): wait until it has finished, or write "
             "elsewhere")
    if lock_path not in _CLAIMED:
        _CLAIMED.add(lock_path)
        atexit.register(release, lock_path)
