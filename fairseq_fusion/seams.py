"""The seams of ``fusion_transformer`` as types: what a technique implements to plug in.

ARCHITECTURE.md ("The seams") says where each is called; ``fusion_options.SEAMS`` names what a technique
claims. With no technique installed every seam is the identity of fairseq's transformer. The core's attributes and
calls that hold a technique's object are annotated with these Protocols (structural: a technique subclasses none);
each Protocol's signature is how the core calls it (``tests/test_seams.py`` checks the techniques against it).
"""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol, Tuple, runtime_checkable

from torch import Tensor, nn


@dataclass
class StackContext:
    """What every layer of one encoder or decoder call can read (``st.ctx`` in a layer call).

    Built once per call by the encoder/decoder and shared by all its layers; fields a side does
    not have stay None.
    """
    embed: Optional[Tensor]  # scaled token embeddings without positions, T x B x C (decoder: the current steps')
    states: List[Tensor]  # the embedding layer's output, then every lower layer's output (T x B x C), growing
    # encoder
    padding_mask: Optional[Tensor] = None  # B x T, None when the batch has no padding
    src_tokens: Optional[Tensor] = None  # B x T
    inputs: Dict[str, Tensor] = field(default_factory=dict)  # the task's other net_input keys (src_phrase_lengths)
    # decoder
    encoder_out: Optional[Dict[str, List[Tensor]]] = None
    incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None
    self_attn_padding_mask: Optional[Tensor] = None
    extra: Dict[str, Any] = field(default_factory=dict)  # merged into the decoder's ``extra`` output
    # what a technique computes once per call for its layers, under its own key (e.g. the phrase segmentation)
    cache: Dict[str, Any] = field(default_factory=dict)


@dataclass
class LayerContext:
    """The state of one layer call (``st``), shared by the blocks of its sub-layer plan.

    Built by ``FusionEncoderLayer.forward`` / ``FusionDecoderLayer.forward``; a sub-layer (seam d) gets
    it as ``module(x, st)``, an attention with ``wants_layer_state`` (seam a) as ``st=st``. Fields a
    side does not have stay None (the encoder has no incremental state, no encoder memory, no attention
    weights to return).
    """
    layer: Optional[nn.Module]  # the layer running the plan (its norms, ``layer_idx``, ``normalize_before``)
    ctx: Optional[StackContext]  # the encoder/decoder call's context; None when a layer is called alone
    # both sides: the self-attention's masks
    self_attn_padding_mask: Optional[Tensor] = None  # B x T, True at padding (encoder: fairseq's encoder_padding_mask)
    self_attn_mask: Optional[Tensor] = None  # T x T additive mask (decoder: the future mask; encoder: fairseq's attn_mask, usually None)
    # decoder
    incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None  # fairseq's cache, per module
    encoder_memory: Optional[Tensor] = None  # S x B x C, what this layer's encoder attention reads (seam c)
    encoder_padding_mask: Optional[Tensor] = None  # B x S, the padding of ``encoder_memory``
    need_attn: bool = False  # return the encoder attention's weights (also True when need_head_weights)
    need_head_weights: bool = False  # ... per head rather than averaged
    attn: Optional[Tensor] = None  # written by the encoder-attention block: the weights the layer returns


@runtime_checkable
class SubLayer(Protocol):
    """(d) a sub-layer a technique adds to a layer's plan (``layer.extra_sublayers[name]``).

    ``st`` is the layer call's ``LayerContext``: its masks, ``incremental_state``, ``ctx`` (the
    ``StackContext``) and ``layer`` (the layer running the plan)."""

    def __call__(self, x: Tensor, st: LayerContext) -> Tensor: ...


@runtime_checkable
class LayerStateAttention(Protocol):
    """(a) an attention module replacing ``self_attn`` / ``encoder_attn`` (a fairseq ``MultiheadAttention``
    subclass) that is called with the layer call's ``LayerContext`` as well, ``st=st``.

    The layer's blocks pass every argument by keyword: ``key_padding_mask`` and ``need_weights`` always, the
    self-attention blocks ``attn_mask`` (the decoder's also ``incremental_state``), the encoder-attention block
    ``incremental_state``, ``static_kv`` and ``need_head_weights``."""

    wants_layer_state: bool

    def __call__(self, query: Tensor, key: Optional[Tensor], value: Optional[Tensor], *,
                 key_padding_mask: Optional[Tensor] = None,
                 incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
                 need_weights: bool = True, static_kv: bool = False, attn_mask: Optional[Tensor] = None,
                 need_head_weights: bool = False, st: LayerContext) -> Tuple[Tensor, Optional[Tensor]]: ...


@runtime_checkable
class LayerCombiner(Protocol):
    """(b) ``encoder.layer_combiner`` / ``decoder.layer_combiner``: what layer ``idx``'s output passes on to the
    next layer, and the stack's output."""

    def combine_layers(self, idx: int, x: Tensor, states: List[Tensor], ctx: StackContext) -> Tensor: ...

    def stack_output(self, states: List[Tensor], ctx: StackContext) -> Tensor: ...


@runtime_checkable
class EncoderReader(Protocol):
    """(c) ``decoder.encoder_reader``: what decoder layer ``idx`` attends, and its padding mask."""

    def encoder_memory(self, idx: int, encoder_out: Optional[Dict[str, List[Tensor]]],
                       incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]]
                       ) -> Tuple[Optional[Tensor], Optional[Tensor]]: ...


@runtime_checkable
class OutputFusion(Protocol):
    """(e) ``decoder.output_fusion``: the model's output distribution from the decoder's ``(features or logits,
    extra)``, log-probabilities or probabilities."""

    def get_normalized_probs(self, net_output: Tuple[Tensor, Optional[Dict[str, Any]]], log_probs: bool) -> Tensor: ...
