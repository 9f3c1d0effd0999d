"""Encoder of ``fusion_transformer``: fairseq's encoder with a layer context and full states.

Differences from ``TransformerEncoderBase`` (none changes the numbers with options off):
- every layer receives ``ctx``, a ``seams.StackContext`` (its sub-layers read it as ``st.ctx``): ``embed`` (scaled token embeddings without
  positions, T x B x C), ``states`` (outputs of the embedding layer and all lower layers),
  ``padding_mask``, ``src_tokens``, ``inputs``;
- ``combine_layers(idx, x, states, ctx)`` (seam b) turns layer ``idx``'s output
  into what the next layer reads; ``stack_output(states, ctx)`` gives the stack's
  output (default: the top). Both defer to ``self.layer_combiner`` when a technique sets it
  (a module with methods of the same names and arguments); both, and how a layer is built,
  come from ``layer_stack.LayerStackMixin``, shared with the decoder;
- the output dict has ``encoder_states`` (embedding layer + every layer, T x B x C) whenever
  ``return_all_hiddens`` (training: the model's forward) or ``self.states_for_decoder`` (set by
  a technique whose decoder reads them; then also in ``forward_torchscript``, i.e. generation:
  exporting them otherwise would cost a reorder per tensor and beam step), and any extra key a
  technique registers in ``self.extra_out_batch_dims``; ``reorder_encoder_out`` reorders every
  key it carries. Encoder-side hooks (``extra_output_hooks``) always see all states in ``ctx``.
- the layers always get the padding mask (fairseq passes None when nothing is padded: a data-dependent branch,
  a graph break under ``--fusion-compile``); an all-False mask masks nothing.
"""
from typing import Callable, Dict, List, Optional

import torch
from fairseq.models.transformer import TransformerEncoderBase
from torch import Tensor

from .attention_kernels import without_cudnn_attention
from .. import host_sync
from .fusion_layers import FusionEncoderLayer, enumerate_layers
from .layer_stack import LayerStackMixin
from ..seams import LayerCombiner, StackContext

# batch dimension of each entry of the encoder output (all entries are lists of tensors)
ENCODER_OUT_BATCH_DIMS = {
    "encoder_out": 1,
    "encoder_padding_mask": 0,
    "encoder_embedding": 0,
    "encoder_states": 1,
    "fc_results": 1,
    "src_tokens": 0,
    "src_lengths": 0,
    "fusion_row_sentence": 0,
}
# which input sentence each row of the encoder output encodes (B,): beam search reorders the output at every
# step, but while each row keeps a row of the same sentence (the batch unchanged, beams permuted) no value
# changes, so ``reorder_encoder_out`` skips the copies (the same reasoning as fairseq's encoder-decoder attention,
# which skips reordering its static keys while the batch size is unchanged; exact here for any order). Only on the
# CPU: on CUDA the check would be a host sync per beam step (``host_sync``)
ROW_SENTENCE = "fusion_row_sentence"


def reorder_tensor_lists(out: Dict[str, List[Tensor]], batch_dims: Dict[str, int], new_order):
    """Index every tensor of ``out`` along its batch dim; a key without a known dim is an error.

    With ``out[ROW_SENTENCE]``, an order under which every row gets a row of the same sentence
    returns ``out`` as it is (its values would not change); only on the CPU, where the check
    (``torch.equal``) costs no host sync."""
    unknown = sorted(set(out) - set(batch_dims))
    if unknown:
        raise KeyError(
            f"encoder output keys {unknown} have no batch dimension registered: add them to "
            "the encoder's extra_out_batch_dims so beam search can reorder them"
        )
    rows = out.get(ROW_SENTENCE)
    if rows is not None and len(rows) == 1 and new_order.numel() == rows[0].numel() and host_sync.host_reads_are_free(new_order):
        if torch.equal(rows[0].index_select(0, new_order), rows[0]):
            return dict(out)
    return {
        key: [t if t is None else t.index_select(batch_dims[key], new_order) for t in tensors]
        for key, tensors in out.items()
    }


class FusionTransformerEncoder(LayerStackMixin, TransformerEncoderBase):
    def __init__(self, cfg, dictionary, embed_tokens):
        self._layers_built = 0
        super().__init__(cfg, dictionary, embed_tokens)
        self.extra_out_batch_dims: Dict[str, int] = {}
        self.layer_combiner: Optional[LayerCombiner] = None  # seam (b)
        # set by a technique whose decoder reads encoder_states: then they are exported (and
        # reordered by beam search) in generation too; otherwise only with return_all_hiddens
        self.states_for_decoder = False
        # callables ``(out, ctx) -> None``, each adding its keys to the output dict ``out`` in place (bound
        # methods or modules of a technique, owned elsewhere: a plain list, so no state-dict keys of its own)
        self.extra_output_hooks: List[Callable[[Dict[str, List[Tensor]], StackContext], None]] = []
        # callables ``(src_tokens, inputs) -> {key: value}`` that compute, from the batch, what sizes tensors from data
        # (a host read); under ``--fusion-compile`` the model runs them eagerly, before the compiled forward, and
        # passes their values as extra inputs (``ctx.inputs``), so the graph has no break there
        self.eager_input_hooks: List[Callable[[Tensor, Dict[str, Tensor]], Dict[str, object]]] = []

    def build_encoder_layer(self, cfg):
        return self.build_fusion_layer(FusionEncoderLayer, cfg)

    def forward(
        self,
        src_tokens,
        src_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
        **extra_inputs,
    ):
        """fairseq's forward; other ``net_input`` keys of a task (e.g. ``src_phrase_lengths``)
        reach the layers as ``ctx.inputs`` (generation passes them too: ``forward_torchscript``)."""
        with without_cudnn_attention(src_tokens):
            return self.forward_scriptable(src_tokens, src_lengths, return_all_hiddens, token_embeddings, extra_inputs)

    def forward_scriptable(
        self,
        src_tokens,
        src_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
        extra_inputs: Optional[Dict[str, Tensor]] = None,
    ):
        encoder_padding_mask = src_tokens.eq(self.padding_idx)
        has_pads = encoder_padding_mask.any()

        x, encoder_embedding = self.forward_embedding(src_tokens, token_embeddings)
        x = x * (1 - encoder_padding_mask.unsqueeze(-1).type_as(x) * has_pads.type_as(x))
        x = x.transpose(0, 1)  # B x T x C -> T x B x C

        # fairseq passes the layers None when no sentence is padded: a data-dependent branch (a graph break under
        # torch.compile, a host sync on CUDA); an all-False mask masks nothing, and the attention's numbers are the same
        layer_mask = encoder_padding_mask
        states = [x]
        ctx = StackContext(embed=encoder_embedding.transpose(0, 1), states=states, padding_mask=layer_mask,
                           src_tokens=src_tokens, inputs=extra_inputs or {})
        for idx, layer in enumerate_layers(self.layers):
            if layer is not None:  # None: dropped by LayerDrop, the identity
                x = layer(x, encoder_padding_mask=layer_mask, ctx=ctx)
            x = self.combine_layers(idx, x, states, ctx)
            states.append(x)
        x = self.stack_output(states, ctx)

        if self.layer_norm is not None:
            x = self.layer_norm(x)

        src_lengths = (
            src_tokens.ne(self.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1).contiguous()
        )
        out = {
            "encoder_out": [x],  # T x B x C
            "encoder_padding_mask": [encoder_padding_mask],  # B x T
            "encoder_embedding": [encoder_embedding],  # B x T x C, scaled, no positions
            "encoder_states": states,  # [embedding layer, layer 1..N], T x B x C
            "fc_results": [],
            "src_tokens": [],
            "src_lengths": [src_lengths],
            ROW_SENTENCE: [torch.arange(src_tokens.size(0), device=src_tokens.device)],
        }
        self.add_extra_outputs(out, ctx)
        if not (return_all_hiddens or self.states_for_decoder):
            out["encoder_states"] = []  # generation: not read by the decoder, not worth reordering
        return out

    def add_extra_outputs(self, out: Dict[str, List[Tensor]], ctx: StackContext):
        """Techniques export more tensors here; each key needs an entry in extra_out_batch_dims."""
        for add in self.extra_output_hooks:
            add(out, ctx)

    @torch.jit.export
    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order):
        dims = dict(ENCODER_OUT_BATCH_DIMS, **self.extra_out_batch_dims)
        return reorder_tensor_lists(encoder_out, dims, new_order)
