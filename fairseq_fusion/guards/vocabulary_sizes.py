"""A checkpoint trained with other dictionaries is refused in one line naming the dictionary, for every model.

fairseq's ``load_state_dict`` would end in torch's size-mismatch traceback; this check runs first (a change in
``global_changes.py``: the plugin's models' ``load_state_dict``, every model's in a command-line run). Dictionaries of the same size but other words are ``dictionary_check``'s.
"""
import functools
import os

from ..errors import FusionError

# encoder/decoder -> the dict.LANG.txt the last task set up read (entry_checks' setup_task check records them)
TASK_DICTIONARY_FILES = {}


def record_dictionary_files(task):
    """The dictionaries ``task`` read, for the message of a checkpoint of another size."""
    cfg = getattr(task, "cfg", None) or getattr(task, "args", None)
    data, src, tgt = (getattr(cfg, k, None) for k in ("data", "source_lang", "target_lang"))
    if not isinstance(data, str) or src is None or tgt is None:
        return
    folder = data.split(os.pathsep)[0]
    TASK_DICTIONARY_FILES.update(encoder=os.path.join(folder, f"dict.{src}.txt"),
                                 decoder=os.path.join(folder, f"dict.{tgt}.txt"))


def check_vocabulary_sizes(model, state_dict):
    """Refuse a checkpoint trained with other dictionaries, saying which and how they differ."""
    files = TASK_DICTIONARY_FILES
    for side in ("encoder", "decoder"):
        key = f"{side}.embed_tokens.weight"
        if key not in state_dict:
            continue
        embed = getattr(getattr(model, side, None), "embed_tokens", None)
        if embed is None or not hasattr(embed, "weight"):
            continue
        expected = embed.weight.shape
        found = state_dict[key].shape
        if found != expected:
            lang = "source" if side == "encoder" else "target"
            dict_file = files.get(side) or f"the {lang} dict.*.txt of the data directory"
            raise FusionError(
                f"checkpoint does not match this model's {lang} dictionary: {key} has {found[0]} entries "
                f"(shape {tuple(found)}) in the checkpoint but {dict_file} gives {expected[0]} "
                f"(shape {tuple(expected)}). Pass the data directory the checkpoint was trained with, or "
                "binarize with its dictionaries (fairseq-preprocess --srcdict/--tgtdict)."
            )


def _sizes_checked_first(load_state_dict):
    """Every model's ``load_state_dict`` (fairseq's ``transformer`` and ``fusion_transformer`` alike): a checkpoint of
    another dictionary size is one line naming the dictionary, before torch's size-mismatch traceback."""
    @functools.wraps(load_state_dict)
    def wrapper(self, state_dict, *args, **kwargs):
        check_vocabulary_sizes(self, state_dict)
        return load_state_dict(self, state_dict, *args, **kwargs)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper
