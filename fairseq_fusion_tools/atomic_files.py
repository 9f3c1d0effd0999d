"""Result files are never left half-written, and one command at a time writes an ``--out``.

Every writer goes through ``replacing(path)``: the content goes to a temporary file in the same
folder, which replaces ``path`` (``os.replace``, atomic) only once it is complete; on an error
or Ctrl-C the old file stays as it was and the temporary one is removed. ``claim(lock_path)``
creates an exclusive lock file holding this process' id, removed at exit; a second command
that finds it held by a running process is refused with one line, a lock left by a process that
no longer runs is taken over with a warning.
"""
import atexit
import json
import os
import socket
import sys
import tempfile
from contextlib import contextmanager

from fairseq_fusion.errors import fail


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
        os.replace(tmp, path)
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
_HELD = set()


def _holder(lock_path):
    """(pid, host) written in a lock file; (None, None) when it cannot be read (being written)."""
    try:
        with open(lock_path) as f:
            pid, _, host = f.read().strip().partition(" ")
        return int(pid), host
    except (OSError, ValueError):
        return None, None


def _running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def release(lock_path):
    """Remove a lock this process holds (``claim`` has it done at exit)."""
    lock_path = os.path.abspath(lock_path)
    if _holder(lock_path)[0] == os.getpid():
        os.remove(lock_path)
    _HELD.discard(lock_path)


def claim(lock_path, what):
    """Hold ``lock_path`` (created exclusively, with this pid) until the process exits.

    ``what`` names the output for the refusal, e.g. ``--out results/x``."""
    lock_path = os.path.abspath(lock_path)
    if lock_path in _HELD:
        return
    os.makedirs(os.path.dirname(lock_path), exist_ok=True)
    here = socket.gethostname()
    for _ in range(10):
        try:
            fd = os.open(lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pid, host = _holder(lock_path)
            if pid is None or host != here or (_running(pid) and pid != os.getpid()):
                who = f"pid {pid}" + (f" on {host}" if host and host != here else "") if pid else "another process"
                fail(f"{what} is in use by another command ({who}; lock file {lock_path}): wait until it has finished, "
                     f"or write elsewhere (if no such command runs any more, remove the lock file)")
            _take_over(lock_path, pid)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()} {here}\n")
        _HELD.add(lock_path)
        atexit.register(release, lock_path)
        return
    fail(f"{what}: could not create the lock file {lock_path} (other commands keep taking it)")


def _take_over(lock_path, pid):
    """Remove a lock whose process ``pid`` no longer runs; moved aside first, so that a lock another
    command has just created in its place is put back rather than removed."""
    aside = f"{lock_path}.stale.{os.getpid()}"
    try:
        os.rename(lock_path, aside)
    except FileNotFoundError:  # another command took it over first
        return
    if _holder(aside)[0] != pid:  # not the stale lock any more: put it back
        try:
            os.link(aside, lock_path)
        except FileExistsError:
            pass
        os.remove(aside)
        return
    os.remove(aside)
    print(f"fairseq-fusion: warning: took over the lock {lock_path}: the command that held it (pid {pid}) no longer runs",
          file=sys.stderr)
