"""Loading fairseq checkpoints safely: a narrow allow-list so they load with torch's ``weights_only=True``.

torch >= 2.6 unpickles checkpoints with ``weights_only=True`` by default; fairseq
checkpoints contain an ``argparse.Namespace`` (legacy ``args`` and ``cfg.model``) and,
when states are broadcast for a distributed resume, omegaconf containers; with ``--eval-bleu``
the saved meters hold numpy arrays (BLEU n-gram counts). We add exactly those classes to torch's
safe globals; nothing switches unsafe loading on globally.
"""
import argparse
import collections
import typing

import torch



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
