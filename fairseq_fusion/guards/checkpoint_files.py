"""A checkpoint file that can be read, or one line naming it: missing, a folder, empty, truncated at any length,
corrupt, or not a file ``torch.save`` wrote; for fairseq's loaders also a torch file that is not a fairseq
checkpoint (a bare ``state_dict``, a tensor: no ``model`` and ``cfg``/``args``). Used by fairseq's loaders (``entry_checks``), the hub
(``hub_checks``) and the tools that read checkpoints (fusion-average-checkpoints, fusion-convert-checkpoint).

Whether the file is at fault is read from the file itself with Python's ``zipfile`` (``damage``), not from the
wording of what torch raised: torch's zip reader fails on a truncated file with an error that depends on where it
was cut (``RuntimeError``, or ``OSError: [Errno 22] Invalid argument``). An error from a whole file is a real bug
and keeps its traceback, unless torch's message says the file is foreign (``_READ_MESSAGES``).
"""
import os
import pickle
import zipfile

from ..errors import FusionError, few

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


FAIRSEQ_KEYS = "a dict with 'model' (the weights) and 'cfg' or 'args' (the settings), as fairseq-train saves"


def is_fairseq_state(state):
    return isinstance(state, dict) and "model" in state and (state.get("cfg") is not None
                                                             or state.get("args") is not None)


def _what_it_holds(state):
    if not isinstance(state, dict):
        return f"it holds a {type(state).__name__}"
    keys = [str(k) for k in state]
    if keys and all(hasattr(v, "shape") for v in state.values()):
        return f"it holds {len(keys)} tensors ({few(keys, 2)}): a bare state_dict, without fairseq's settings"
    return f"it holds a dict of {few(keys) or 'nothing'}"


def foreign_state(path, state=None):
    """The one line for a whole file torch reads that is no fairseq checkpoint (``state``: what fairseq's loader
    returned; None: read again with ``weights_only``), or None where it is one or cannot be read that way."""
    if state is None:
        import torch

        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception:  # noqa: BLE001 - not readable without fairseq's classes: what fairseq raised says more
            return None
    if is_fairseq_state(state):
        return None
    return FusionError(f"checkpoint {path}: a file torch.save wrote, but not a fairseq checkpoint: "
                       f"{_what_it_holds(state)}; expected {FAIRSEQ_KEYS}")


def read_checkpoint(load, path, *args, fairseq=False, **kwargs):
    """``load(path, ...)`` (torch.load, fairseq's load_checkpoint_to_cpu) of a checkpoint file, refusing in one line a
    missing, empty, truncated, corrupt or foreign file; ``fairseq``: also a whole torch file that is no fairseq
    checkpoint (fairseq's loader ends in ``KeyError: 'best_loss'`` or a tensor's ``RuntimeError``)."""
    check_checkpoint_file(path)
    try:
        state = load(path, *args, **kwargs)
    except Exception as e:
        whole = is_local(path) and os.path.isfile(path)
        reason = (damage(path) or _foreign(e)) if whole else None
        if reason is None:
            refusal = foreign_state(path) if fairseq and whole and isinstance(e, (KeyError, RuntimeError, TypeError,
                                                                                      AttributeError)) else None
            if refusal is None:
                raise
            raise refusal from None
        raise FusionError(f"checkpoint {path}: cannot be read ({os.path.getsize(path)} bytes; truncated, or not a "
                          f"fairseq checkpoint: {reason})") from e
    refusal = foreign_state(path, state) if fairseq and is_local(path) else None
    if refusal is not None:
        raise refusal
    return state
