"""A checkpoint is used only with the dictionaries it was trained with (issue 49).

The vocabulary check on load (``guards/vocabulary_sizes.py``) compares the number of embedding rows;
fairseq pads every dictionary to a multiple of 8 symbols, so two dictionaries of one BPE size often have the same
size, and a model given the other one translates into garbage without a word. Every checkpoint fairseq-train saves
with the plugin loaded (any arch, fairseq's own too) records a fingerprint of each of its task's dictionaries: the
sha256 of its symbols in order (fairseq's special symbols and the padding included, the counts not), their number and
the file it was read from, in the checkpoint's ``extra_state`` under ``fusion_dictionaries`` (fairseq's own place for
what a trainer saves beside the model; fairseq ignores keys it does not know, so the checkpoint stays fairseq's).

Compared where a checkpoint meets a task's dictionaries: fairseq-generate, fairseq-interactive, the hub and the tools
(``load_model_ensemble_and_task``, ``entry_checks.py``), and training from one (a resume of ``checkpoint_last.pt``,
``--restore-file``, ``--finetune-from-model``: ``Trainer.load_checkpoint``, ``resume_check.py``, before anything
is loaded or written). Another dictionary of the same size is refused in one line naming the dictionary file; one of
another size is left to the size check, which already names it. A checkpoint without a fingerprint (saved before
this, or by fairseq without the plugin) loads as before, with a one-line note in the log that the check was not
possible.
"""
import hashlib
import logging
import os

from ..errors import FusionError

logger = logging.getLogger(__name__)

KEY = "fusion_dictionaries"  # in a checkpoint's extra_state
SIDES = ("source", "target")


def fingerprint(dictionary):
    """sha256 of the symbols in order (one per line) and their number."""
    symbols = list(dictionary.symbols)
    digest = hashlib.sha256("\n".join(symbols).encode("utf-8", "surrogatepass")).hexdigest()
    return {"sha256": digest, "size": len(symbols)}


def task_dictionary(task, side):
    try:
        return getattr(task, f"{side}_dictionary")
    except (NotImplementedError, AttributeError):
        return None


def dictionary_file(task, side):
    """The dict.LANG.txt a translation task read for ``side``, or None."""
    cfg = getattr(task, "cfg", None) or getattr(task, "args", None)
    data = getattr(cfg, "data", None)
    lang = getattr(cfg, f"{side}_lang", None)
    if not isinstance(data, str) or not lang:
        return None
    return os.path.join(data.split(os.pathsep)[0], f"dict.{lang}.txt")


def task_fingerprints(task):
    """{side: {sha256, size, file}} of the task's dictionaries (sides without one left out)."""
    found = {}
    for side in SIDES:
        dictionary = task_dictionary(task, side)
        if dictionary is not None and hasattr(dictionary, "symbols"):
            path = dictionary_file(task, side)
            found[side] = dict(fingerprint(dictionary), file=path and os.path.abspath(path))
    return found


def saved_fingerprints(state):
    """What a loaded checkpoint state records, or None (saved without the plugin, or before issue 49)."""
    extra = state.get("extra_state") if hasattr(state, "get") else None
    recorded = extra.get(KEY) if hasattr(extra, "get") else None
    return recorded if isinstance(recorded, dict) else None


def check(path, saved, task):
    """Refuse ``task``'s dictionaries when they are not those checkpoint ``path`` was trained with (same size, other
    symbols or order); note in the log when ``saved`` is None (nothing recorded to compare)."""
    if saved is None:
        logger.warning(f"checkpoint {path} records no fingerprint of its dictionaries (saved by fairseq without "
                       "fairseq-fusion, or by an older version): whether this data folder's dictionaries are those it "
                       "was trained with could not be checked, only their sizes")
        return
    for side in SIDES:
        trained, dictionary = saved.get(side), task_dictionary(task, side)
        if not trained or dictionary is None or not hasattr(dictionary, "symbols"):
            continue
        now = fingerprint(dictionary)
        if now["size"] != trained.get("size") or now["sha256"] == trained.get("sha256"):
            continue  # another size: the size check names it (vocabulary_sizes, resume_check)
        given = dictionary_file(task, side) or f"the {side} dictionary of the data folder"
        was = f" ({trained['file']})" if trained.get("file") else ""
        raise FusionError(
            f"{given} is not the {side} dictionary checkpoint {path} was trained with: the same {now['size']} "
            f"entries, but other symbols or another order (sha256 {now['sha256'][:12]} here, "
            f"{str(trained.get('sha256'))[:12]} in the checkpoint), so every token would be read as another word; "
            f"pass the data folder the checkpoint was trained with{was}, or binarize with its dictionaries "
            "(fairseq-preprocess --srcdict/--tgtdict)")


def _recorded_dictionaries(save_checkpoint):
    """Wraps ``Trainer.save_checkpoint``: the task's dictionary fingerprints go into the checkpoint's extra_state."""
    import functools

    @functools.wraps(save_checkpoint)
    def wrapper(self, filename, extra_state):
        found = task_fingerprints(self.task) if getattr(self, "task", None) is not None else {}
        if found:
            extra_state = dict(extra_state, **{KEY: found})
        return save_checkpoint(self, filename, extra_state)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper
