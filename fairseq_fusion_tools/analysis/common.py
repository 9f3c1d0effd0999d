"""Shared plumbing of the analysis commands: their options, load a checkpoint, iterate a split, capture states.

Writing the results (OUT.json, OUT.png, the lock on --out) and the figures' shared parts are in
``fairseq_fusion_tools/outputs.py``, shared with the scorers. torch is imported where it is used.
"""
import argparse
import functools
import os
import sys
from contextlib import contextmanager
from typing import Dict, Iterable, List, Optional

import numpy as np

from ..progress import progress
from ..user_files import fail


def add_checkpoint_args(parser, several_paths=False, required=True, weights_only=False, path_help=None,
                        data_help="Binarized data directory with the dictionaries (default: the checkpoint's).",
                        out_help="Output prefix: writes OUT.png and OUT.json."):
    """The options of every analysis that loads a checkpoint: --path, --data, --out, --cpu, --model-overrides."""
    if several_paths:
        parser.add_argument("--path", required=required, nargs="+", help=path_help or "Checkpoint files (.pt), one or more.")
    else:
        parser.add_argument("--path", required=required, help=path_help or "Checkpoint file (.pt).")
    parser.add_argument("--data", default=None, help=data_help)
    parser.add_argument("--out", required=True, help=out_help)
    parser.add_argument("--cpu", action="store_true", help="Stay on CPU (this analysis reads the weights only and always "
                        "runs on CPU)." if weights_only else "Stay on CPU even if CUDA is available.")
    parser.add_argument("--model-overrides", default="{}", help="Python dict of model arg overrides.")
    return parser


def add_split_args(parser, split="test", max_tokens=4000):
    """The options of an analysis that reads a binarized split: --split, --max-tokens, --sentences."""
    parser.add_argument("--split", default=split, help="Binarized split to read (default: %(default)s).")
    parser.add_argument("--max-tokens", type=int, default=max_tokens, help="Tokens per batch (default: %(default)s).")
    return add_sentences_arg(parser, "Read only the first N sentences of --split (default: all).")


class DeprecatedName(argparse.Action):
    """An option's old name: sets the new option's value and says on stderr, once, to use the new name."""

    def __init__(self, option_strings, dest, new_name, **kwargs):
        self.new_name = new_name
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: warning: {option_string} is deprecated: it is {self.new_name} (a number of sentences "
              f"to read, not a batch size as in fairseq-generate)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_sentences_arg(parser, help):
    """``--sentences N``: how many sentences an analysis reads (a sample size; fairseq-generate's --max-sentences is
    a batch size). ``--max-sentences``, its old name, still works with a warning; giving both is refused."""
    names = parser.add_mutually_exclusive_group()
    names.add_argument("--sentences", type=int, default=None, metavar="N", help=help)
    names.add_argument("--max-sentences", dest="sentences", type=int, metavar="N", action=DeprecatedName,
                       new_name="--sentences", help="Deprecated name of --sentences.")
    return parser


def add_common_args(parser, split="test", several_paths=False):
    """The shared options of an analysis that loads a checkpoint and reads a binarized split."""
    add_checkpoint_args(parser, several_paths, data_help="Binarized data directory (default: the checkpoint's).")
    return add_split_args(parser, split)


class MissingTechnique(ValueError):
    """The checkpoint lacks the technique an analysis reads; the command names its --path (``technique_of``)."""


@contextmanager
def technique_of(path, prog):
    """Turn a ``MissingTechnique`` raised in the block into one line naming the checkpoint ``path``."""
    from fairseq_fusion.errors import FusionError

    try:
        yield
    except MissingTechnique as e:
        raise FusionError(f"{prog}: --path {path}: {e}") from None


def no_grad(fn):
    """``@torch.no_grad()`` with torch imported at the first call (the module of ``fn`` loads without torch); a
    generator function keeps torch's handling (gradients off only while it runs)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        import torch

        return torch.no_grad()(fn)(*args, **kwargs)
    return call


def load_model(path, data=None, overrides=None, cpu=False):
    """(model in eval mode, task, cfg) from a checkpoint; ``data`` replaces the checkpoint's data dir."""
    import torch
    from fairseq import checkpoint_utils

    import fairseq_fusion  # noqa: F401  (registers the models and allow-lists checkpoint classes)

    from fairseq_fusion.errors import FusionError

    if not os.path.exists(path):
        raise FusionError(f"--path {path}: no such checkpoint file")
    arg_overrides = dict(overrides or {})
    if data is not None:
        if not os.path.isdir(data):
            raise FusionError(f"--data {data}: {'a file' if os.path.exists(data) else 'no such folder'}; expected the "
                              "folder of the binarized data (fusion-prepare-text --destdir)")
        arg_overrides["data"] = data
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides=arg_overrides)
    model = models[0].eval()
    if torch.cuda.is_available() and not cpu:
        model.cuda()
    return model, task, cfg


def check_split(task, split, flag="--split"):
    """Refuse, in one line, a split the task's data folder lacks (fairseq's FileNotFoundError names neither the flag
    nor the splits there are); only translation's file layout is checked (SPLIT.SRC-TGT.SRC.idx)."""
    from fairseq_fusion.errors import FusionError

    data, src, tgt = (getattr(task.cfg, k, None) for k in ("data", "source_lang", "target_lang"))
    if not (isinstance(data, str) and src and tgt and os.path.isdir(data)):
        return
    found = sorted({n.split(".")[0] for n in os.listdir(data) if n.endswith((f".{src}-{tgt}.{src}.idx", f".{tgt}-{src}.{src}.idx"))})
    if found and split not in found:
        raise FusionError(f"{flag} {split}: no such split in {data}; it has {', '.join(found)}")


def iterate_batches(task, split, max_tokens=4000, max_sentences=None, model=None, desc=None,
                    shuffle_seed=None, max_batches=None, sample_seed=None):
    """Batches of ``split`` (moved to the model's device), with a progress bar.

    ``max_sentences`` keeps the first sentences of the split, or a random sample of that
    many when ``sample_seed`` is given (batches then come in a random order too). Batches
    come in length order unless ``shuffle_seed`` is given (then in a random order fixed by
    the seed, e.g. to train on a sample); ``max_batches`` stops early.
    """
    import torch
    from fairseq import utils

    if split not in task.datasets:  # a dataset set up by the caller (or loaded before) is used as is
        check_split(task, split)
        task.load_dataset(split)
    dataset = task.dataset(split)
    order = dataset.ordered_indices()
    if max_sentences is not None and sample_seed is not None:
        g = torch.Generator().manual_seed(sample_seed)
        chosen = torch.randperm(len(dataset), generator=g)[:max_sentences].numpy()
        order = order[np.isin(order, chosen)]
        shuffle_seed = sample_seed if shuffle_seed is None else shuffle_seed
    elif max_sentences is not None:
        order = order[order < max_sentences]
    try:
        batch_sampler = dataset.batch_by_size(order, max_tokens=max_tokens)
    except AssertionError as e:  # fairseq's: a sentence longer than max_tokens
        from fairseq_fusion.guards.entry_checks import MAX_TOKENS_ASSERTION, too_many_tokens

        if not str(e).startswith(MAX_TOKENS_ASSERTION):
            raise
        raise too_many_tokens(task, dataset, max_tokens, indices=order,
                              why="every sentence read must fit in one batch") from None
    if shuffle_seed is not None:
        perm = torch.randperm(len(batch_sampler), generator=torch.Generator().manual_seed(shuffle_seed))
        batch_sampler = [batch_sampler[i] for i in perm.tolist()]
    if max_batches is not None:
        batch_sampler = batch_sampler[:max_batches]
    device = next(model.parameters()).device if model is not None else torch.device("cpu")
    for batch in progress(batch_sampler, desc=desc or split):
        sample = dataset.collater([dataset[i] for i in batch])
        if not sample:
            continue
        yield utils.move_to_cuda(sample) if device.type == "cuda" else sample


@contextmanager
def capture(model, names: Iterable[str], output_index: int = 0):
    """Record the outputs of the named sub-modules during forward passes.

    Yields a dict name -> list of outputs (one per call, detached). Outputs that are tuples
    keep their element ``output_index`` (default the first: fairseq layers return (x, attn,
    ...); 1 gives an attention module's weights, None when it computed none).
    """
    modules = dict(model.named_modules())
    missing = [n for n in names if n not in modules]
    if missing:
        raise KeyError(f"no module named {missing} in the model; some names: {list(modules)[:20]}")
    records: Dict[str, List[torch.Tensor]] = {n: [] for n in names}
    handles = []
    for name in names:
        def hook(_module, _inp, out, name=name):
            out = out[output_index] if isinstance(out, (tuple, list)) else out
            records[name].append(out.detach() if out is not None else None)
        handles.append(modules[name].register_forward_hook(hook))
    try:
        yield records
    finally:
        for h in handles:
            h.remove()


@contextmanager
def capture_blocks(model, names: Iterable[str]):
    """Record the outputs of sub-layer plan blocks (seam d), e.g. ``decoder.layers.0.self_attn``
    for the entry ``self_attn`` of ``decoder.layers.0.blocks``; like ``capture`` (dict name -> list of outputs)."""
    modules = dict(model.named_modules())
    records: Dict[str, List[torch.Tensor]] = {n: [] for n in names}
    wrapped = []
    for name in names:
        layer_name, _, block = name.rpartition(".")
        layer = modules.get(layer_name)
        if layer is None or block not in getattr(layer, "blocks", {}):
            plan = getattr(layer, "plan", None)
            raise KeyError(f"no sub-layer block {name!r} in the model (layer {layer_name!r} plan: {plan})")
        method = layer.blocks[block]

        def recorder(x, st, method=method, name=name):
            out = method(x, st)
            records[name].append(out.detach())
            return out

        layer.blocks[block] = recorder
        wrapped.append((layer, block, method))
    try:
        yield records
    finally:
        for layer, block, method in reversed(wrapped):
            layer.blocks[block] = method




def checkpoint_labels(paths, labels, prog):
    """The names of ``paths`` in a figure: ``--labels`` split at commas (one a checkpoint), else the paths; each with
    the update count its checkpoint was saved at (``with_updates``)."""
    names = labels.split(",") if labels else list(paths)
    if len(names) != len(paths):
        fail(f"{prog}: --labels has {len(names)} names for {len(paths)} checkpoints")
    return [with_updates(name, path) for name, path in zip(names, paths)]


def updates_of(path):
    """The update count a fairseq checkpoint was saved at (its optimizer history), or None where it has none; read
    memory-mapped, so only the history is loaded."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", mmap=True, weights_only=False)
        return int(state["optimizer_history"][-1]["num_updates"])
    except (OSError, RuntimeError, KeyError, IndexError, TypeError, ValueError):
        return None


def with_updates(label, path):
    """A checkpoint's name in a legend: its label and the update count it was saved at (``checkpoint_last`` says
    nothing of how far training got)."""
    n = updates_of(path)
    return label if n is None else f"{label} ({n} updates)"
