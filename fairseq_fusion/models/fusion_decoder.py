"""Decoder of ``fusion_transformer``: fairseq's decoder with seams for the five papers.

Differences from ``TransformerDecoderBase`` (none changes the numbers with options off):
- ``encoder_memory(idx, encoder_out, incremental_state)`` (seam c): the tensor decoder layer
  ``idx`` attends and its padding mask; default: the encoder's top output; defers to
  ``self.encoder_reader.encoder_memory`` when a technique sets it;
- every layer receives ``ctx``, a ``seams.StackContext`` (its sub-layers read it as ``st.ctx``): ``embed`` (scaled target embeddings without
  positions of the current steps, T x B x C), ``states`` (embedding layer + lower layers' outputs),
  ``encoder_out`` (the encoder's dict), ``incremental_state``, ``self_attn_padding_mask``, ``extra``;
- ``combine_layers`` / ``stack_output`` (seam b) as in the encoder (``self.layer_combiner``), both from
  ``layer_stack.LayerStackMixin``;
- ``extra_output_hooks``: callables ``(features, extra, ctx)`` run on the final features
  (B x T x C, after the final LayerNorm) that add keys to ``extra`` (e.g. what an
  ``output_fusion`` reads); in incremental decoding the features are the last step only;
- ``output_fusion`` (seam e): a module with ``get_normalized_probs(net_output, log_probs)``
  that the model defers to; ``None`` keeps fairseq's softmax. Whatever it reads from
  ``extra`` must be last-step only in incremental decoding (fairseq's ensemble slices
  only ``decoder_out[0]``).
- over the full sequence (training) the self-attention padding mask is passed always (branch-free for
  ``--fusion-compile``; all-False masks nothing); under torch.compile the future mask is built per call.
"""
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from fairseq.models.transformer import TransformerDecoderBase
from torch import Tensor

from .attention_kernels import without_cudnn_attention
from .fusion_layers import FusionDecoderLayer, enumerate_layers
from .layer_stack import LayerStackMixin
from ..seams import EncoderReader, LayerCombiner, OutputFusion, StackContext


class FusionTransformerDecoder(LayerStackMixin, TransformerDecoderBase):
    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        self._layers_built = 0
        super().__init__(
            cfg, dictionary, embed_tokens,
            no_encoder_attn=no_encoder_attn, output_projection=output_projection,
        )
        self.output_fusion: Optional[OutputFusion] = None  # seam (e)
        self.encoder_reader: Optional[EncoderReader] = None  # seam (c)
        self.layer_combiner: Optional[LayerCombiner] = None  # seam (b)
        # callables ``(features B x T x C, extra, ctx) -> None``, each adding its keys to ``extra`` in place
        # (bound methods or partials of a technique, owned elsewhere: a plain list, so no state-dict keys)
        self.extra_output_hooks: List[Callable[[Tensor, Dict[str, Any], StackContext], None]] = []

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        return self.build_fusion_layer(FusionDecoderLayer, cfg, no_encoder_attn)

    def buffered_future_mask(self, tensor):
        """fairseq's future mask; under torch.compile (``--fusion-compile``) built afresh for the length, the same
        values: fairseq's buffer grows with the longest target seen, and each growth, a module attribute rebound,
        would recompile the graph."""
        if not torch.compiler.is_compiling():
            return super().buffered_future_mask(tensor)
        dim = tensor.size(0)
        return torch.triu(torch.full((dim, dim), float("-inf"), device=tensor.device), 1).to(tensor)

    # seam (c): what decoder layer idx reads of the encoder
    def encoder_memory(
        self,
        idx: int,
        encoder_out: Optional[Dict[str, List[Tensor]]],
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]],
    ) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        if self.encoder_reader is not None:
            return self.encoder_reader.encoder_memory(idx, encoder_out, incremental_state)
        enc = padding_mask = None
        if encoder_out is not None and len(encoder_out["encoder_out"]) > 0:
            enc = encoder_out["encoder_out"][0]
        if encoder_out is not None and len(encoder_out["encoder_padding_mask"]) > 0:
            padding_mask = encoder_out["encoder_padding_mask"][0]
        return enc, padding_mask

    def embed(self, prev_output_tokens, incremental_state):
        """fairseq's decoder input: returns (layer-0 input T x B x C, scaled token embeddings T x B x C, the tokens
        embedded B x T: ``prev_output_tokens``, only its last step in incremental decoding, for the padding mask)."""
        positions = None
        if self.embed_positions is not None:
            positions = self.embed_positions(prev_output_tokens, incremental_state=incremental_state)
        if incremental_state is not None:
            prev_output_tokens = prev_output_tokens[:, -1:]
            if positions is not None:
                positions = positions[:, -1:]
        prev_output_tokens = prev_output_tokens.contiguous()
        embed = self.embed_scale * self.embed_tokens(prev_output_tokens)
        x = embed
        if self.quant_noise is not None:
            x = self.quant_noise(x)
        if self.project_in_dim is not None:
            x = self.project_in_dim(x)
            embed = x
        if positions is not None:
            x = x + positions
        if self.layernorm_embedding is not None:
            x = self.layernorm_embedding(x)
        x = self.dropout_module(x)
        return x.transpose(0, 1), embed.transpose(0, 1), prev_output_tokens

    def forward(self, prev_output_tokens, *args, **kwargs):
        """fairseq's forward, without cuDNN's attention on CUDA (``attention_kernels``)."""
        with without_cudnn_attention(prev_output_tokens):
            return super().forward(prev_output_tokens, *args, **kwargs)

    def extract_features_scriptable(
        self,
        prev_output_tokens,
        encoder_out: Optional[Dict[str, List[Tensor]]],
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        full_context_alignment: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
    ):
        if alignment_layer is None:
            alignment_layer = self.num_layers - 1

        x, embed, prev_output_tokens = self.embed(prev_output_tokens, incremental_state)
        self_attn_padding_mask: Optional[Tensor] = None
        if incremental_state is None or self.cross_self_attention or prev_output_tokens.eq(self.padding_idx).any():
            # fairseq's decoder passes None when no target is padded; over the full sequence (training) the mask is
            # passed always, branch-free (no graph break under torch.compile, no host sync on CUDA): an all-False mask
            # masks nothing, the numbers are the same. Incremental decoding keeps fairseq's test.
            self_attn_padding_mask = prev_output_tokens.eq(self.padding_idx)

        attn: Optional[Tensor] = None
        states: List[Tensor] = [x]
        ctx = StackContext(embed=embed, states=states, encoder_out=encoder_out, incremental_state=incremental_state,
                           self_attn_padding_mask=self_attn_padding_mask)
        for idx, layer in enumerate_layers(self.layers):
            if layer is None:  # dropped by LayerDrop: the identity
                x = self.combine_layers(idx, x, states, ctx)
                states.append(x)
                continue
            if incremental_state is None and not full_context_alignment:
                self_attn_mask = self.buffered_future_mask(x)
            else:
                self_attn_mask = None
            enc, enc_padding_mask = self.encoder_memory(idx, encoder_out, incremental_state)
            x, layer_attn, _ = layer(
                x,
                enc,
                enc_padding_mask,
                incremental_state,
                self_attn_mask=self_attn_mask,
                self_attn_padding_mask=self_attn_padding_mask,
                need_attn=bool(idx == alignment_layer),
                need_head_weights=bool(idx == alignment_layer),
                ctx=ctx,
            )
            x = self.combine_layers(idx, x, states, ctx)
            states.append(x)
            if layer_attn is not None and idx == alignment_layer:
                attn = layer_attn.float().to(x)
        x = self.stack_output(states, ctx)

        if attn is not None:
            if alignment_heads is not None:
                attn = attn[:alignment_heads]
            attn = attn.mean(dim=0)  # average over heads

        if self.layer_norm is not None:
            x = self.layer_norm(x)
        x = x.transpose(0, 1)  # T x B x C -> B x T x C
        if self.project_out_dim is not None:
            x = self.project_out_dim(x)

        extra = {"attn": [attn], "inner_states": states}
        extra.update(ctx.extra)
        for add in self.extra_output_hooks:
            add(x, extra, ctx)
        return x, extra
