"""``--fusion-log-internals``: what each technique does inside the network, as fairseq metrics under ``fusion/``.

A technique module that has figures to report declares ``internals_sink = None``; with the flag on, ``attach`` points
every such module of the model at one dict, the model's ``fusion_internals``. During a full forward (training or
validation, not incremental decoding) a module writes its figures there with ``record`` (0-d tensors, detached, on
the model's device: no host sync, no autograd graph, no parameter or buffer). After each forward the model's eager
``forward`` adds them to its totals (``collect``: per figure the sum of its values and the number of forwards,
outside a ``--fusion-compile`` graph) and empties the dict.

fairseq's ``Trainer`` takes the totals into the logging outputs of the update or validation batch (``take``, in
``compat/trainer_figures.py``) before it reduces them across ranks as it reduces ``loss`` (summed by
``all_reduce_dict`` for a criterion whose outputs can be summed, gathered by ``all_gather_list`` otherwise); then,
before fairseq opens its per-update aggregator, ``log_means`` hands each figure's mean over every rank's forwards to
``fairseq.logging.metrics.log_scalar``. fairseq's meters keep a device-side sum, so a value is read (``.item()``)
only when fairseq reads its log-interval or validation averages: the console, ``--log-format json``,
``--tensorboard-logdir`` and ``--wandb-project`` show them as they show ``loss``, one weight per update (per batch
at validation). One exception: a training update under LayerDrop (a layer a rank skips records nothing, so the
ranks' figures differ in number and could not be summed in one buffer) logs rank 0's own figures, as fairseq prints
rank 0's meters; its validation figures are reduced.
"""
from typing import Dict, Optional

import torch
from fairseq.logging import metrics
from torch import Tensor

from .. import fusion_options
from ..fusion_options import Flag, OptionGroup

PREFIX = "fusion/"
COUNT_PREFIX = "fusion_count/"  # a figure's number of forwards in a logging output (its sum is under PREFIX)
PRIORITY = 1000  # after fairseq's own figures in the console line
ROUND = 6  # digits in the logs (a KL of 0.0067 keeps its figures)


def wants(module, full_forward: bool = True) -> bool:
    """Whether ``module`` records figures now (the flag on, and a full forward rather than a decoding step)."""
    return module.internals_sink is not None and full_forward


def record(module, name: str, value: Tensor):
    """Store one figure of this forward (``value``: a 0-d tensor; the last write of a forward wins)."""
    module.internals_sink[name] = value.detach().float()


def masked_mean(value: Tensor, keep: Optional[Tensor]) -> Tensor:
    """Mean of ``value`` (T x B x C or T x B) over the positions ``keep`` (T x B, True = a token) marks."""
    if keep is None:
        return value.float().mean()
    weight = keep.to(torch.float32)
    if value.dim() == 3:
        return (value.float().mean(-1) * weight).sum() / weight.sum().clamp(min=1)
    return (value.float() * weight).sum() / weight.sum().clamp(min=1)


def entropy(probs: Tensor, dim: int = -1) -> Tensor:
    """Entropy in nats of distributions along ``dim`` (0 log 0 = 0)."""
    probs = probs.float()
    return -(probs * torch.log(probs.clamp(min=1e-12))).sum(dim)


def exploitation(weights) -> Tensor:
    """Dou et al. 2018's Eq. 11 for one aggregation node: each input's share of the L1 mass of its weights W_j."""
    mass = torch.stack([w.detach().float().abs().sum() for w in weights])
    return mass / mass.sum()


def collect(model):
    """After a forward: add the figures it recorded to the model's totals (sum, forwards) and empty the sink."""
    sink, totals = model.fusion_internals, model.fusion_internals_totals
    for name, value in sink.items():
        total, count = totals.get(name, (0, 0))
        totals[name] = (value + total, count + 1)
    sink.clear()


def take(model) -> Dict[str, object]:
    """The figures collected since the last call, as logging-output entries (``fusion/NAME``: the sum of the values,
    a device tensor; ``fusion_count/NAME``: the number of forwards), and forget them; {} without the flag."""
    totals = getattr(model, "fusion_internals_totals", None)
    if not totals:
        return {}
    entries = {}
    for name, (total, count) in totals.items():
        entries[PREFIX + name] = total
        entries[COUNT_PREFIX + name] = count
    totals.clear()
    return entries


def means(logging_outputs) -> Dict[str, Tensor]:
    """Each figure's mean over the forwards the logging outputs hold (one per micro-batch, or one reduced across
    ranks); no host sync (a count reduced across ranks is a device tensor: at least 1 there)."""
    sums, counts = {}, {}
    for log in logging_outputs:
        for key, value in log.items():
            if key.startswith(PREFIX):
                sums[key[len(PREFIX):]] = sums.get(key[len(PREFIX):], 0) + value
            elif key.startswith(COUNT_PREFIX):
                counts[key[len(COUNT_PREFIX):]] = counts.get(key[len(COUNT_PREFIX):], 0) + value
    found = {}
    for name, total in sums.items():
        count = counts.get(name, 0)
        if torch.is_tensor(count):
            found[name] = total / count.clamp(min=1)
        elif count > 0:
            found[name] = total / count
    return found


def log_means(logging_outputs):
    """Hand the figures' means to fairseq's meters (every active aggregator), one weight per call."""
    for name, value in means(logging_outputs).items():
        metrics.log_scalar(PREFIX + name, value, weight=1, priority=PRIORITY, round=ROUND)


def without_figures(logging_outputs):
    """The logging outputs without the figures' entries (what fairseq's criterion and task reduce)."""
    return [{k: v for k, v in log.items() if not k.startswith((PREFIX, COUNT_PREFIX))} for log in logging_outputs]


def varies_across_ranks(model) -> bool:
    """Whether this forward's figures may differ in number across ranks: LayerDrop in a training forward."""
    return bool(getattr(model, "fusion_internals_layerdrop", False)) and model.training


def attach(model, args):
    if not args.fusion_log_internals:
        return
    from fairseq.modules import LayerDropModuleList

    sink: Dict[str, Tensor] = {}
    model.fusion_internals = sink  # plain attributes: not in the state dict
    model.fusion_internals_totals = {}
    model.fusion_internals_layerdrop = any(isinstance(m, LayerDropModuleList) for m in model.modules())
    for module in model.modules():
        if "internals_sink" in module.__dict__:
            module.internals_sink = sink


fusion_options.register(
    OptionGroup(
        title="training logs",
        name="log_internals",
        flags=[
            Flag("fusion_log_internals", False,
                 "log what each technique does inside the network (gates, layer weights, entropies, KL) as "
                 "fairseq metrics under fusion/ at each --log-interval and validation (console, JSON, TensorBoard, "
                 "W&B); changes no loss or parameter", type=bool, switch=True, per_layer=False),
        ],
        attach=attach,
    )
)
