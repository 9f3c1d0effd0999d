"""``torch.jit.script`` of a ``fusion_transformer``: fairseq's transformer export, or a one-line refusal.

With every technique off the model *is* fairseq's transformer (same modules, parameters and outputs), and that is
what TorchScript compiles: ``FusionTransformerModel.__prepare_scriptable__`` (called by ``torch.jit.script`` on the
model, also inside a ``SequenceGenerator``) returns ``fairseq_view(model)``, a shallow copy of the module tree whose
fusion classes are their fairseq bases (``FusionEncoderLayer`` -> ``TransformerEncoderLayerBase``, ...): the same
parameter and buffer objects, fairseq's scriptable ``forward``s. The seams are not compiled: their Python code
(the ``seams.py`` dataclasses, whose generated ``__init__`` torch 2.13's TorchScript fails on, the sub-layer
plan's table of bound methods, ``**`` net inputs, hook lists) is what the techniques plug into, and with every flag off
each seam is the identity of fairseq's code.

A model with a technique attached (any arch but the plain presets) is refused before TorchScript starts, naming the
technique's flags: its seams run Python that TorchScript cannot compile; it runs eagerly (fairseq-generate,
fairseq-interactive, the hub), or with its forward compiled by ``torch.compile``.
"""
from typing import Dict, List

from fairseq.models.transformer import (
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
)
from fairseq.modules import MultiheadAttention
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase, TransformerEncoderLayerBase
from torch import nn

from .. import fusion_options
from ..errors import FusionError
from .fusion_decoder import FusionTransformerDecoder
from .fusion_encoder import FusionTransformerEncoder
from .fusion_layers import FusionDecoderLayer, FusionEncoderLayer

PLANS = {FusionEncoderLayer: [("self_attn", "ffn")],
         FusionDecoderLayer: [("self_attn", "encoder_attn", "ffn"), ("self_attn", "ffn")]}


def technique_parts(model) -> List[str]:
    """What makes ``model`` more than fairseq's transformer, as ``module: what`` lines; empty when it is plain."""
    parts = []
    for name, m in model.named_modules():
        where = name or "model"
        if name and type(m) not in FAIRSEQ_CLASSES and type(m).__module__.split(".")[0] not in ("fairseq", "torch"):
            parts.append(f"{where}: {type(m).__name__}")  # a technique's module (fairseq_fusion.modules, a test's toy)
        if isinstance(m, (FusionTransformerEncoder, FusionTransformerDecoder)):
            if m.layer_combiner is not None:
                parts.append(f"{where}.layer_combiner")
            if m.extra_output_hooks:
                parts.append(f"{where}.extra_output_hooks")
        if isinstance(m, FusionTransformerEncoder) and (m.states_for_decoder or m.extra_out_batch_dims):
            parts.append(f"{where}: extra encoder output")
        if isinstance(m, FusionTransformerDecoder) and (m.encoder_reader is not None or m.output_fusion is not None):
            parts.append(f"{where}: encoder_reader / output_fusion")
        if isinstance(m, (FusionEncoderLayer, FusionDecoderLayer)):
            if m.extra_sublayers or tuple(m.plan) not in PLANS[type(m)]:
                parts.append(f"{where}.plan {tuple(m.plan)}")
            for attn in ("self_attn", "encoder_attn"):
                module = getattr(m, attn, None)
                if module is not None and type(module) is not MultiheadAttention:
                    parts.append(f"{where}.{attn}: {type(module).__name__}")
    return parts


def techniques_on(args) -> List[str]:
    """The registry's switches that ``args`` turns on, as a user writes them (``--layer-aggregation dense``)."""
    on = []
    for group in fusion_options.GROUPS:
        for flag in group.flags:
            value = getattr(args, flag.name, None)
            if flag.switch and value not in (None, flag.default, False):
                on.append(fusion_options.option_name(flag.name) + ("" if value is True else f" {value}"))
    return on


def check_scriptable(model):
    """Refuse, in one line, a model whose techniques TorchScript cannot compile (see the module's docstring)."""
    parts = technique_parts(model)
    if not parts:
        return
    args = getattr(model, "args", None)
    arch = getattr(args, "arch", None) or "fusion_transformer"
    flags = techniques_on(args) if args is not None else []
    what = " ".join(flags) if flags else f"a technique ({parts[0]})"
    raise FusionError(
        f"torch.jit.script: {arch} with {what} does not script: its technique runs Python code TorchScript cannot "
        "compile, and only fusion_transformer with every technique off scripts (as fairseq's transformer); run it "
        "eagerly (fairseq-generate, fairseq-interactive, the hub) or compile its forward with torch.compile"
    )


# each fusion class and the fairseq class whose forward it computes with every seam the identity
FAIRSEQ_CLASSES = {
    FusionTransformerEncoder: TransformerEncoderBase,
    FusionTransformerDecoder: TransformerDecoderBase,
    FusionEncoderLayer: TransformerEncoderLayerBase,
    FusionDecoderLayer: TransformerDecoderLayerBase,
}


def fairseq_view(model):
    """A shallow copy of ``model``'s module tree as fairseq's transformer classes, sharing every parameter and buffer
    (``model`` itself is left as it is: ``torch.jit.script`` replaces the children of what it prepares in place)."""
    classes: Dict[type, type] = {**FAIRSEQ_CLASSES, type(model): TransformerModel}  # the model: FusionTransformerModel
    copies: Dict[int, nn.Module] = {}

    def view(module: nn.Module) -> nn.Module:
        if id(module) in copies:
            return copies[id(module)]
        copy = object.__new__(classes.get(type(module), type(module)))
        copy.__dict__ = dict(module.__dict__)
        copy.__dict__.pop("blocks", None)  # the plan's table of bound methods (of ``module``)
        # --checkpoint-activations' per-layer forward (layer_checkpoint.py): in inference it is the layer's own
        for patched in ("forward", "precheckpoint_forward"):
            copy.__dict__.pop(patched, None)
        copies[id(module)] = copy
        copy._modules = {name: None if child is None else view(child) for name, child in module._modules.items()}
        return copy

    return view(model)
