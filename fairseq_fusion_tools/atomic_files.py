"""Result files are never left half-written, and one command at a time writes an ``--out``.

Every writer goes through ``replacing(path)``: the content goes to a temporary file in the same
folder, which replaces ``path`` (``os.replace``, atomic) only once it is complete; on an error
or Ctrl-C the old file stays as it was and the temporary one is removed; the content is flushed to disk
(``fsync``) before the rename, so a crash leaves the old file or the new one, never an empty one.
``claim(lock_path)`` takes a kernel lock on ``lock_path`` (``filelock``) until the process exits; a second
command that finds it held is refused with one line; a process that dies in any way frees it. The lock file is
removed when the lock is released (at exit, after a failure too), while still held, so a command that opened it
meanwhile finds its file gone and takes the new one (filelock checks that the file it locked still has a name); only
a process killed without exit handlers (SIGKILL, out of memory) leaves the empty file, which the next command takes.
"""
import atexit
import json
import os
import tempfile
import time
from contextlib import contextmanager

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
    format); when the block ends without error it replaces ``path``, else it is removed."""
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
_HELD = {}


def _identity(path):
    st = os.stat(path)
    return st.st_dev, st.st_ino


def release(lock_path):
    """Free a lock this process holds (``claim`` has it done at exit), removing its file first if it is still the
    file this process locked."""
    held = _HELD.pop(os.path.abspath(lock_path), None)
    if held is None:
        return
    lock, identity, made = held
    try:
        if _identity(lock.lock_file) == identity:
            os.unlink(lock.lock_file)
    except OSError:  # already gone, or not removable here: it stays, empty and free
        pass
    lock.release()
    for folder in made:  # the folders claim made for the lock, deepest first, where nothing was written in them
        try:
            os.rmdir(folder)
        except OSError:
            break


def release_all():
    """Free every lock this process holds: a command run in-process (its ``main`` called from Python) has ended."""
    for lock_path in list(_HELD):
        release(lock_path)


def claim(lock_path, what):
    """Hold ``lock_path`` until the process exits: a lock taken with the kernel (``filelock``), so it is free again
    when its process ends in any way, SIGKILL and out-of-memory kills included. ``release`` removes the (empty) lock
    file, and the folders made for it where the command wrote nothing (a failure); only a process killed without exit
    handlers leaves them.

    ``what`` names the output for the refusal, e.g. ``--out results/x``."""
    import logging

    from filelock import FileLock, Timeout

    logging.getLogger("filelock").setLevel(logging.WARNING)  # its per-lock notes (fairseq sets the root to DEBUG)
    lock_path = os.path.abspath(lock_path)
    if lock_path in _HELD:
        return
    made, folder = [], os.path.dirname(lock_path)
    while not os.path.exists(folder):
        made.append(folder)
        folder = os.path.dirname(folder)
    os.makedirs(os.path.dirname(lock_path), exist_ok=True)
    lock = FileLock(lock_path)
    for attempt in range(3):  # a holder that removes its file as this one opens it: the next attempt takes the new one
        try:
            lock.acquire(timeout=0)
            break
        except Timeout:
            time.sleep(0.05)
    else:
        fail(f"{what} is in use by another command (lock file {lock_path}): wait until it has finished, or write "
             "elsewhere")
    _HELD[lock_path] = (lock, _identity(lock_path), made)
    atexit.register(release, lock_path)
