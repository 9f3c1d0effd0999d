"""A checkpoint trained with other dictionaries is refused in one line naming the dictionary, for every model.

fairseq's ``load_state_dict`` would end in torch's size-mismatch traceback; this check runs first (a change in
``compat/global_changes.py``: every model's ``load_state_dict``, fairseq's ``transformer`` and ``fusion_transformer``
alike). Dictionaries of the same size but other words are ``dictionary_check``'s.
"""
import functools

from ..errors import FusionError


def check_vocabulary_sizes(model, state_dict):
    """Refuse a checkpoint trained with other dictionaries, saying which and how they differ."""
    files = getattr(model, "dictionary_files", None) or {}
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
