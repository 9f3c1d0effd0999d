"""``--fusion-log-internals``: what each technique does inside the network, as fairseq metrics under ``fusion/``.

A technique module that has figures to report declares ``internals_sink = None``; with the flag on, ``attach`` points
every such module of the model at one dict, the model's ``fusion_internals``. During a full forward (training or
validation, not incremental decoding) a module writes its figures there with ``record`` (0-d tensors, detached, on
the model's device: no host sync, no autograd graph, no parameter or buffer). The model's eager ``forward`` hands
them to ``fairseq.logging.metrics.log_scalar`` after each forward (outside a ``--fusion-compile`` graph) and empties
the dict. fairseq's meters keep a device-side sum, so a value is read (``.item()``) only when fairseq reads its
log-interval or validation averages: the console, ``--log-format json``, ``--tensorboard-logdir`` and
``--wandb-project`` show them as they show ``loss``.

Figures are per process: under DDP each rank logs its own, and fairseq prints rank 0's (the model's forward runs
before fairseq's ``logging_outputs`` are reduced across ranks, so these are not).
"""
from typing import Dict, Optional

import torch
from fairseq.logging import metrics
from torch import Tensor

from .. import fusion_options
from ..fusion_options import Flag, OptionGroup

PREFIX = "fusion/"
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


def log_recorded(sink: Dict[str, Tensor]):
    """Hand this forward's figures to fairseq's meters (every active aggregator) and empty the sink."""
    for name, value in sink.items():
        metrics.log_scalar(PREFIX + name, value, weight=1, priority=PRIORITY, round=ROUND)
    sink.clear()


def attach(model, args):
    if not args.fusion_log_internals:
        return
    sink: Dict[str, Tensor] = {}
    model.fusion_internals = sink  # a plain attribute: not in the state dict
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
