"""Loading fairseq checkpoints safely: a narrow allow-list so they load with torch's
``weights_only=True``, and a check that a checkpoint matches the model's dictionaries.

torch >= 2.6 unpickles checkpoints with ``weights_only=True`` by default; fairseq
checkpoints contain an ``argparse.Namespace`` (legacy ``args`` and ``cfg.model``) and,
when states are broadcast for a distributed resume, omegaconf containers; with ``--eval-bleu``
the saved meters hold numpy arrays (BLEU n-gram counts). We add exactly those classes to torch's
safe globals; nothing switches unsafe loading on globally.
"""
import argparse
import collections
import functools
import typing

import torch

from .errors import FusionError


OMEGACONF_VALUE_NODES = (
    "AnyNode", "StringNode", "IntegerNode", "FloatNode", "BooleanNode", "EnumNode", "PathNode", "BytesNode",
)


def fairseq_checkpoint_globals():
    """The classes a fairseq checkpoint or a broadcast training state may pickle."""
    classes = [argparse.Namespace, collections.defaultdict, typing.Any]
    try:
        from omegaconf import DictConfig, ListConfig, nodes
        from omegaconf.base import ContainerMetadata, Metadata

        classes += [DictConfig, ListConfig, ContainerMetadata, Metadata]
        # omegaconf >= 2.1 records these builtins in a container's metadata (object_type, a list's key_type)
        classes += [dict, list, int]
        # the value nodes this omegaconf has: PathNode and BytesNode came with omegaconf 2.2, and fairseq
        # 0.12.2 pins omegaconf < 2.1
        classes += [getattr(nodes, name) for name in OMEGACONF_VALUE_NODES if hasattr(nodes, name)]
    except ImportError:  # omegaconf comes with fairseq; without it there is nothing to add
        pass
    return classes + numpy_array_globals()


def numpy_array_globals():
    """What pickles a numpy array: ndarray, dtype (and its per-type classes) and the reconstruct function."""
    import numpy as np

    try:
        from numpy._core.multiarray import _reconstruct  # numpy >= 2
    except ImportError:
        from numpy.core.multiarray import _reconstruct
    dtypes = [type(np.dtype(t)) for t in ("int64", "int32", "float64", "float32", "bool")]
    return [_reconstruct, np.ndarray, np.dtype] + dtypes


def allow_fairseq_checkpoint_globals():
    add = getattr(torch.serialization, "add_safe_globals", None)
    if add is not None:  # torch < 2.4 has no weights_only default to satisfy
        add(fairseq_checkpoint_globals())


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
