"""A checkpoint file that can be read, or one line naming it: missing, a folder, empty, truncated at any length,
corrupt, or not a file ``torch.save`` wrote. Used by fairseq's loaders (``entry_checks``), the hub
(``hub_checks``) and the tools that read checkpoints (fusion-average-checkpoints, fusion-convert-checkpoint).

Whether the file is at fault is read from the file itself with Python's ``zipfile`` (``damage``), not from the
wording of what torch raised: torch's zip reader fails on a truncated file with an error that depends on where it
was cut (``RuntimeError``, or ``OSError: [Errno 22] Invalid argument``). An error from a whole file is a real bug
and keeps its traceback, unless torch's message says the file is foreign (``_READ_MESSAGES``).
"""
import os
import pickle
import zipfile

from ..errors import FusionError

ZIP_MAGIC = b"PK"  # torch.save's format since torch 1.6: a zip archive
PICKLE_MAGIC = b"\x80"  # torch's legacy format: a pickle stream

# what torch.load raises on a foreign file whose container is whole (a pickle of something else, another zip)
_READ_ERRORS = (EOFError, pickle.UnpicklingError, zipfile.BadZipFile, UnicodeDecodeError)
_READ_MESSAGES = ("PytorchStreamReader", "zip archive", "central directory", "unexpected EOF", "invalid load key")


def is_local(path):
    return isinstance(path, str) and "://" not in path


def check_checkpoint_file(path):
    """A checkpoint path that exists and is not empty (a local file)."""
    if not is_local(path):
        return
    if not os.path.exists(path):
        raise FusionError(f"checkpoint {path}: no such file")
    if os.path.isdir(path):
        raise FusionError(f"checkpoint {path}: is a directory, expected a checkpoint file such as "
                          f"{os.path.join(path, 'checkpoint_best.pt')}")
    if os.path.getsize(path) == 0:
        raise FusionError(f"checkpoint {path}: the file is empty (0 bytes): an interrupted copy or save")


def damage(path):
    """What is wrong with the container of the file at ``path`` (a zip archive with torch's records, or a legacy
    pickle), or None if it looks whole. Tensor bytes are not checked: torch loads a file with flipped bytes there."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(ZIP_MAGIC))
    except OSError:
        return None  # unreadable for another reason (permissions): what torch raised says which
    if head.startswith(PICKLE_MAGIC):
        return None
    if not head.startswith(ZIP_MAGIC):
        return "neither a zip archive nor a pickle, so not a file torch.save wrote"
    try:
        with zipfile.ZipFile(path) as archive:
            names = {name.split("/", 1)[-1] for name in archive.namelist()}
    except (zipfile.BadZipFile, OSError) as e:
        return f"a zip archive without its end (central directory): cut short ({e})"
    missing = [name for name in ("data.pkl", "version") if name not in names and f".data/{name}" not in names]
    if missing:
        return f"a zip archive without torch's {' and '.join(missing)}"
    return None


def _foreign(error):
    """torch's own reason when ``error`` says a whole file is no checkpoint, else None (a real bug)."""
    reason = (str(error).splitlines() or [type(error).__name__])[0].split(". ")[0]
    if isinstance(error, _READ_ERRORS) or (isinstance(error, RuntimeError) and any(m in str(error) for m in _READ_MESSAGES)):
        return reason
    return None


def read_checkpoint(load, path, *args, **kwargs):
    """``load(path, ...)`` (torch.load, fairseq's load_checkpoint_to_cpu) of a checkpoint file, refusing in one line a
    missing, empty, truncated, corrupt or foreign file."""
    check_checkpoint_file(path)
    try:
        return load(path, *args, **kwargs)
    except Exception as e:
        reason = (damage(path) or _foreign(e)) if is_local(path) and os.path.isfile(path) else None
        if reason is None:
            raise
        raise FusionError(f"checkpoint {path}: cannot be read ({os.path.getsize(path)} bytes; truncated, or not a "
                          f"fairseq checkpoint: {reason})") from e
