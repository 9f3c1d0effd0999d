"""Encoder and decoder layers of ``fusion_transformer``: fairseq's layers as a sub-layer plan.

Each layer is fairseq's ``TransformerEncoderLayerBase`` / ``TransformerDecoderLayerBase``
(same parameters, same names) whose ``forward`` runs an ordered list of sub-layer blocks,
``self.plan``. A block is a method ``<name>_block(x, st)``, listed under its plan name in the layer's
table ``self.blocks`` (built in ``__init__``): ``x`` is T x B x C and ``st`` the ``seams.LayerContext``
shared by the blocks of one layer call (masks, incremental state, the stack context ``st.ctx`` (a
``seams.StackContext``) from the encoder/decoder, attention weights to return in ``st.attn``, and
``st.layer``, the layer itself).

Extension points used by the technique modules (installed at build time, never by
editing this file):
- ``plan`` (seam d): order and presence of sub-layers. A name runs ``self.blocks[name]`` (the
  method ``<name>_block``) or, if there is none, the module ``self.extra_sublayers[name]`` called as
  ``module(x, st)`` (``st.layer`` is this layer);
- the attention modules ``self_attn`` / ``encoder_attn`` (seam a): a technique replaces one with a
  subclass of fairseq's ``MultiheadAttention``; one that sets ``wants_layer_state = True`` is also
  called with ``st=st`` (so it can gate its projected keys/values, e.g. lexical shortcuts);
- ``st.ctx`` (``seams.StackContext``): the stack's embeddings and the outputs of all lower layers.
With nothing changed, ``forward`` computes exactly what fairseq's layer computes.
"""
from typing import Any, Callable, Dict, List, Optional, Union

import torch
from fairseq.modules import MultiheadAttention
from fairseq.modules.transformer_layer import (
    TransformerDecoderLayerBase,
    TransformerEncoderLayerBase,
)
from torch import Tensor, nn
from ..seams import LayerContext, LayerStateAttention, StackContext, SubLayer


def enumerate_layers(layers):
    """``(index, layer)`` for every layer of a stack; ``layer`` is None where fairseq's LayerDrop
    (``--encoder-layerdrop``/``--decoder-layerdrop``) skips it in this training step. A dropped
    layer is the identity: its input becomes its output under its own index, so techniques that
    read or weigh layers by index (``ctx.states``, layer combiners) keep their structure."""
    kept = {id(m) for m in layers}  # iterating a LayerDropModuleList samples which layers run
    return [(i, m if id(m) in kept else None) for i, m in enumerate(nn.ModuleList.__iter__(layers))]


class SubLayerPlanMixin:
    """Runs ``self.plan``; validates block names once, at build time.

    ``self.blocks`` (set by each layer class before its first ``set_plan``): plan name -> the layer's
    method ``(x, st) -> x`` that runs it; names not in it run ``self.extra_sublayers[name]``."""

    blocks: Dict[str, Callable[[Tensor, LayerContext], Tensor]]
    # seam (d): None, or an nn.ModuleDict of the sub-layers techniques add (typed by what it holds)
    extra_sublayers: Optional[Dict[str, SubLayer]]
    # seam (a): fairseq's attention or a technique's that wants ``st``; None where a technique removed it (decoder)
    self_attn: Optional[Union[MultiheadAttention, LayerStateAttention]]

    def set_plan(self, plan):
        extra = getattr(self, "extra_sublayers", None) or {}
        missing = [name for name in plan if name not in self.blocks and name not in extra]
        if missing:
            raise ValueError(
                f"{type(self).__name__}: unknown sub-layer(s) {missing}; "
                f"expected {sorted(self.blocks)} or an extra sub-layer, got plan {list(plan)}"
            )
        self.plan = tuple(plan)

    def run_plan(self, x: Tensor, st: LayerContext) -> Tensor:
        for name in self.plan:
            block = self.blocks.get(name)
            x = block(x, st) if block is not None else self.extra_sublayers[name](x, st)
        return x

    def attention_kwargs(self, attn: Union[MultiheadAttention, LayerStateAttention],
                         st: LayerContext) -> Dict[str, Any]:
        return {"st": st} if getattr(attn, "wants_layer_state", False) else {}

    def add_norm(self, x, residual, layer_norm):
        """Post-norm residual: dropout -> add -> LayerNorm (pre-norm: LN is applied before)."""
        x = self.dropout_module(x)
        x = self.residual_connection(x, residual)
        if not self.normalize_before:
            x = layer_norm(x)
        return x


class FusionEncoderLayer(SubLayerPlanMixin, TransformerEncoderLayerBase):
    """fairseq's encoder layer with plan ``("self_attn", "ffn")``."""

    def __init__(self, cfg, layer_idx=0):
        super().__init__(cfg)
        self.layer_idx = layer_idx
        self.extra_sublayers = None  # nn.ModuleDict when a technique adds sub-layers
        self.blocks = {"self_attn": self.self_attn_block, "ffn": self.ffn_block}
        self.set_plan(("self_attn", "ffn"))

    def self_attn_block(self, x, st):
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        x, _ = self.self_attn(
            query=x,
            key=x,
            value=x,
            key_padding_mask=st.self_attn_padding_mask,
            need_weights=False,
            attn_mask=st.self_attn_mask,
            **self.attention_kwargs(self.self_attn, st),
        )
        return self.add_norm(x, residual, self.self_attn_layer_norm)

    def ffn_block(self, x, st):
        residual = x
        if self.normalize_before:
            x = self.final_layer_norm(x)
        x = self.activation_fn(self.fc1(x))
        x = self.activation_dropout_module(x)
        x = self.fc2(x)
        return self.add_norm(x, residual, self.final_layer_norm)

    def forward(
        self,
        x,
        encoder_padding_mask: Optional[Tensor],
        attn_mask: Optional[Tensor] = None,
        ctx: Optional[StackContext] = None,
    ):
        if attn_mask is not None:
            attn_mask = attn_mask.masked_fill(
                attn_mask.to(torch.bool), -1e8 if x.dtype == torch.float32 else -1e4
            )
        st = LayerContext(layer=self, ctx=ctx, self_attn_padding_mask=encoder_padding_mask, self_attn_mask=attn_mask)
        return self.run_plan(x, st)


class FusionDecoderLayer(SubLayerPlanMixin, TransformerDecoderLayerBase):
    """fairseq's decoder layer with plan ``("self_attn", "encoder_attn", "ffn")``."""

    encoder_attn: Optional[Union[MultiheadAttention, LayerStateAttention]]  # seam (a); None without cross-attention

    def __init__(self, cfg, no_encoder_attn=False, layer_idx=0):
        super().__init__(cfg, no_encoder_attn)
        self.layer_idx = layer_idx
        self.extra_sublayers = None  # nn.ModuleDict when a technique adds sub-layers
        self.blocks = {
            "self_attn": self.self_attn_block,
            "encoder_attn": self.encoder_attn_block,
            "ffn": self.ffn_block,
        }
        plan = ("self_attn", "ffn") if no_encoder_attn else ("self_attn", "encoder_attn", "ffn")
        self.set_plan(plan)

    def self_attn_block(self, x, st):
        residual = x
        if self.normalize_before:
            x = self.self_attn_layer_norm(x)
        y, padding_mask, attn_mask = self.self_attn_keys(x, st)
        x, _ = self.self_attn(
            query=x,
            key=y,
            value=y,
            key_padding_mask=padding_mask,
            incremental_state=st.incremental_state,
            need_weights=False,
            attn_mask=attn_mask,
            **self.attention_kwargs(self.self_attn, st),
        )
        if self.c_attn is not None:
            tgt_len, bsz = x.size(0), x.size(1)
            x = x.view(tgt_len, bsz, self.nh, self.head_dim)
            x = torch.einsum("tbhd,h->tbhd", x, self.c_attn)
            x = x.reshape(tgt_len, bsz, self.embed_dim)
        if self.attn_ln is not None:
            x = self.attn_ln(x)
        return self.add_norm(x, residual, self.self_attn_layer_norm)

    def self_attn_keys(self, x, st):
        """The self-attention's keys/values with their padding and future masks: ``x``, or under
        ``--cross-self-attention`` the encoder memory before ``x`` (fairseq's layer; in incremental decoding
        only at the first step, whose keys the attention's cache keeps)."""
        padding_mask, attn_mask = st.self_attn_padding_mask, st.self_attn_mask
        if not self.cross_self_attention:
            return x, padding_mask, attn_mask
        cache = self.self_attn._get_input_buffer(st.incremental_state)
        if st.incremental_state is not None and "prev_key" in cache:
            return x, padding_mask, attn_mask
        memory, memory_padding = st.encoder_memory, st.encoder_padding_mask
        if attn_mask is not None:
            attn_mask = torch.cat((x.new_zeros(x.size(0), memory.size(0)), attn_mask), dim=1)
        if padding_mask is not None:
            if memory_padding is None:
                memory_padding = padding_mask.new_zeros(memory.size(1), memory.size(0))
            padding_mask = torch.cat((memory_padding, padding_mask), dim=1)
        return torch.cat((memory, x), dim=0), padding_mask, attn_mask

    def encoder_attn_block(self, x, st):
        if self.encoder_attn is None or st.encoder_memory is None:
            return x
        residual = x
        if self.normalize_before:
            x = self.encoder_attn_layer_norm(x)
        x, attn = self.encoder_attn(
            query=x,
            key=st.encoder_memory,
            value=st.encoder_memory,
            key_padding_mask=st.encoder_padding_mask,
            incremental_state=st.incremental_state,
            static_kv=True,
            need_weights=st.need_attn or (not self.training and self.need_attn),
            need_head_weights=st.need_head_weights,
            **self.attention_kwargs(self.encoder_attn, st),
        )
        st.attn = attn
        return self.add_norm(x, residual, self.encoder_attn_layer_norm)

    def ffn_block(self, x, st):
        residual = x
        if self.normalize_before:
            x = self.final_layer_norm(x)
        x = self.activation_fn(self.fc1(x))
        x = self.activation_dropout_module(x)
        if self.ffn_layernorm is not None:
            x = self.ffn_layernorm(x)
        x = self.fc2(x)
        if self.w_resid is not None:
            residual = torch.mul(self.w_resid, residual)
        return self.add_norm(x, residual, self.final_layer_norm)

    def forward(
        self,
        x,
        encoder_out: Optional[Tensor] = None,
        encoder_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        prev_self_attn_state: Optional[List[Tensor]] = None,
        prev_attn_state: Optional[List[Tensor]] = None,
        self_attn_mask: Optional[Tensor] = None,
        self_attn_padding_mask: Optional[Tensor] = None,
        need_attn: bool = False,
        need_head_weights: bool = False,
        ctx: Optional[StackContext] = None,
    ):
        if prev_self_attn_state is not None or prev_attn_state is not None:
            raise NotImplementedError("fusion_transformer layers keep state in incremental_state only")
        st = LayerContext(
            layer=self,
            ctx=ctx,
            self_attn_padding_mask=self_attn_padding_mask,
            self_attn_mask=self_attn_mask,
            incremental_state=incremental_state,
            encoder_memory=encoder_out,
            encoder_padding_mask=encoder_padding_mask,
            need_attn=need_attn or need_head_weights,
            need_head_weights=need_head_weights,
        )
        x = self.run_plan(x, st)
        return x, st.attn, None
