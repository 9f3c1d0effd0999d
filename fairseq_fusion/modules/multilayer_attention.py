"""Multi-layer attention (Dou et al., 2018, "Exploiting Deep Representations for Neural Machine
Translation", §3.1.2, Eq. 8, Fig. 3).

The self-attention of layer l attends layers l-1, ..., l-k with separate attentions and AGG
combines them:  C^l_{-i} = ATT(Q^l, K^{l-i}, V^{l-i}),  C^l = AGG(C^l_{-1}, ..., C^l_{-k}),
and C^l replaces ATT(...) in Eq. 1 (encoder) and Eq. 2 (decoder self-attention); the
encoder-decoder attention is unchanged. Installed through seam (a): ``layer.self_attn`` is
replaced by ``MultiLayerSelfAttention``, which keeps the original attention's q/k/v/out
projections (same names, same values: it computes C^l_{-1}).

Readings (defaults reproduce Table 1 exactly: +33.60M for k=2, +37.79M for k=3 at base size):
- "separate attention model" per attended layer, ``--multilayer-attention-projections``:
  ``separate`` (default) = C^l_{-i}, i >= 2, is a full multi-head attention of its own (query,
  key, value and output projections, 4d^2 + 4d) whose query is this layer's input, as
  C^l_{-1}'s; ``shared-query`` = Eq. 8's one symbol Q^l taken literally: layer l-i adds only
  its key and value projections (2d^2 + 2d) and shares C^l_{-1}'s query and output projections.
- which layers attend several layers, ``--multilayer-attention-layers``: ``above-k`` (default)
  = only layers l > k, each attending the k backbone layers l-1..l-k (the embedding layer is
  not attended; layers 1..k keep plain self-attention); ``all`` = every layer l >= 2 attends
  min(k, l) states, the embedding layer counting as layer 0 (with k = 2, layer 2 attends
  layers 1 and 0). With --layer-aggregation hierarchical the state at depth 2i is the
  aggregation node Ĥ^i that the backbone reads.
- AGG is the aggregation function of §3.1.1 (Eq. 7 generalized to k inputs, see
  ``layer_aggregation.Aggregation``) with the stack's FFN size, ``--aggregation-function`` and
  ``--aggregation-residual`` ("top" = C^l_{-1}).
- Pre-norm stacks: a lower layer's keys/values go through this layer's
  ``self_attn_layer_norm``, as the query does.
- Parameter counts at base size (both stacks): separate + above-k = 2 (L - k) ((k-1)(4d^2+4d)
  + AGG_k) = +33.60M / +37.79M (Table 1: +33.6M / +37.8M); shared-query + all = +36.7M / +49.3M.
Incremental decoding: the keys/values of the earlier target positions of every attended
lower layer are cached in ``incremental_state`` under this module's key ``lower_layers``
(with their padding mask, None while no step had padding) and reordered in ``reorder_incremental_state``.
"""
import logging
import math
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.modules import MultiheadAttention
from torch import Tensor, nn

from .. import fusion_options
from ..fusion_options import EXTENDS, REMOVES, REPLACES, Claim, Flag, OptionGroup, Range
from .layer_aggregation import Aggregation, sides
from ..errors import FusionError
from ..seams import LayerContext

logger = logging.getLogger(__name__)

SIDES = ("both", "encoder", "decoder")
PROJECTIONS = ("separate", "shared-query")
LAYERS = ("above-k", "all")
LOWER_CACHE = "lower_layers"  # incremental_state key of the lower layers' keys/values


class MultiLayerSelfAttention(MultiheadAttention):
    """Self-attention of layer ``layer_idx`` (0-based) over the ``num_attended`` layers below (Eq. 8); a
    ``seams.LayerStateAttention`` (seam a).

    C^l_{-1} is fairseq's self-attention (this module's q/k/v/out projections); C^l_{-i},
    i >= 2, reads keys/values projected from layer l-i by its own ``lower_k_proj[i-2]`` /
    ``lower_v_proj[i-2]``, and its query and output projections are its own
    ``lower_q_proj[i-2]`` / ``lower_out_proj[i-2]`` (``separate=True``) or C^l_{-1}'s
    (``separate=False``: the shared query Q^l of Eq. 8).
    """

    wants_layer_state = True

    def __init__(self, embed_dim, num_heads, num_attended, ffn_dim, dropout=0.0, bias=True,
                 layer_idx=0, agg_function="sigmoid", agg_residual="all", agg_dropout=0.0,
                 separate=True):
        super().__init__(embed_dim, num_heads, dropout=dropout, bias=bias, self_attention=True)
        if num_attended < 2 or num_attended > layer_idx + 1:
            raise FusionError(
                f"--multilayer-attention: layer {layer_idx + 1} can attend 2..{layer_idx + 1} layers, "
                f"got {num_attended}"
            )
        self.layer_idx = layer_idx
        self.lower_k_proj = nn.ModuleList(nn.Linear(embed_dim, embed_dim, bias=bias) for _ in range(num_attended - 1))
        self.lower_v_proj = nn.ModuleList(nn.Linear(embed_dim, embed_dim, bias=bias) for _ in range(num_attended - 1))
        self.separate = separate
        if separate:  # own query and output projections of each C^l_{-i}, i >= 2
            self.lower_q_proj = nn.ModuleList(nn.Linear(embed_dim, embed_dim, bias=bias) for _ in range(num_attended - 1))
            self.lower_out_proj = nn.ModuleList(nn.Linear(embed_dim, embed_dim, bias=bias) for _ in range(num_attended - 1))
            for proj in self.lower_out_proj:  # as fairseq's out_proj
                nn.init.xavier_uniform_(proj.weight)
                if proj.bias is not None:
                    nn.init.zeros_(proj.bias)
        qkv = list(self.lower_k_proj) + list(self.lower_v_proj) + (list(self.lower_q_proj) if separate else [])
        for proj in qkv:  # as fairseq's q/k/v_proj
            nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2))
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)
        self.agg = Aggregation(
            num_attended, embed_dim, ffn_dim, function=agg_function, residual=agg_residual,
            top=0, dropout=agg_dropout, num_heads=num_heads,
            input_names=[f"C_{{-{i}}}" for i in range(1, num_attended + 1)],
            name=f"C^{layer_idx + 1}",
        )

    @classmethod
    def from_attention(cls, base: MultiheadAttention, **kwargs):
        """Replace ``base`` keeping its q/k/v/out_proj modules (same names, same values)."""
        if type(base) is not MultiheadAttention or not base.self_attention:
            raise FusionError(
                f"--multilayer-attention replaces fairseq's self-attention, but this layer's self_attn "
                f"is {type(base).__name__} (replaced by another option)"
            )
        if base.bias_k is not None or base.add_zero_attn:
            raise FusionError("--multilayer-attention: self-attention with add_bias_kv/add_zero_attn is not supported")
        new = cls(base.embed_dim, base.num_heads, dropout=base.dropout_module.p,
                  bias=base.k_proj.bias is not None, **kwargs)
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(new, name, getattr(base, name))
        return new.to(base.k_proj.weight)

    def lower_state(self, st: LayerContext, i):
        """H^{l-i} (T x B x C) as this layer's attention reads it."""
        ctx = st.ctx
        if ctx is None:
            raise RuntimeError("MultiLayerSelfAttention needs the stack's layer states (st.ctx.states)")
        h = ctx.states[self.layer_idx + 1 - i]
        layer = st.layer
        return layer.self_attn_layer_norm(h) if layer.normalize_before else h

    def lower_keys_values(self, st: LayerContext, key_padding_mask, incremental_state):
        """[(K^{l-i}, V^{l-i})] for i = 2..k (S x B x C) and their padding mask (B x S or None),
        with the earlier target positions' keys/values from the cache when decoding incrementally."""
        kvs = []
        for i, (k_proj, v_proj) in enumerate(zip(self.lower_k_proj, self.lower_v_proj), start=2):
            lower = self.lower_state(st, i)
            kvs.append((k_proj(lower), v_proj(lower)))
        if incremental_state is None:
            return kvs, key_padding_mask
        tgt_len, bsz = kvs[0][0].shape[:2]
        cache = self.get_incremental_state(incremental_state, LOWER_CACHE)
        earlier_mask = None if cache is None else cache["padding_mask"]
        # the decoder passes a mask only for steps with padding: while none had any, there is no mask (decided
        # without reading it, which would be a host sync per layer and step on CUDA)
        if key_padding_mask is not None or earlier_mask is not None:
            if key_padding_mask is None:
                key_padding_mask = kvs[0][0].new_zeros(bsz, tgt_len, dtype=torch.bool)
            key_padding_mask = key_padding_mask.bool()
            if cache is not None:
                if earlier_mask is None:
                    earlier_mask = key_padding_mask.new_zeros(bsz, cache["k0"].size(0))
                key_padding_mask = torch.cat([earlier_mask, key_padding_mask], 1)
        if cache is not None:
            kvs = [(torch.cat([cache[f"k{j}"], k], 0), torch.cat([cache[f"v{j}"], v], 0)) for j, (k, v) in enumerate(kvs)]
        new_cache: Dict[str, Optional[Tensor]] = {"padding_mask": key_padding_mask}
        for j, (k, v) in enumerate(kvs):
            new_cache[f"k{j}"], new_cache[f"v{j}"] = k, v
        self.set_incremental_state(incremental_state, LOWER_CACHE, new_cache)
        return kvs, key_padding_mask

    def attend(self, q, k, v, key_padding_mask, attn_mask, out_proj=None):
        """Scaled dot-product attention of fairseq's MultiheadAttention (q already scaled) +
        ``out_proj`` (default: this module's)."""
        tgt_len, bsz, dim = q.shape
        src_len, heads, head_dim = k.size(0), self.num_heads, self.head_dim
        if not (self.training and self.dropout_module.p > 0):  # torch's fused kernel, same softmax(q k^T + mask) v
            mask = None if attn_mask is None else attn_mask.to(q.dtype)
            if key_padding_mask is not None:
                pad = torch.zeros(bsz, 1, 1, src_len, dtype=q.dtype, device=q.device).masked_fill(
                    key_padding_mask.view(bsz, 1, 1, src_len).bool(), float("-inf"))
                mask = pad if mask is None else mask + pad
            split = lambda t, n: t.contiguous().view(n, bsz, heads, head_dim).permute(1, 2, 0, 3)  # noqa: E731
            out = F.scaled_dot_product_attention(split(q, tgt_len), split(k, src_len), split(v, src_len),
                                                 attn_mask=mask, scale=1.0)  # q is scaled already
            out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, dim)
            return (self.out_proj if out_proj is None else out_proj)(out)
        q = q.contiguous().view(tgt_len, bsz * heads, head_dim).transpose(0, 1)
        k = k.contiguous().view(src_len, bsz * heads, head_dim).transpose(0, 1)
        v = v.contiguous().view(src_len, bsz * heads, head_dim).transpose(0, 1)
        weights = torch.bmm(q, k.transpose(1, 2))  # (B*H) x T x S
        if attn_mask is not None:
            weights = weights + attn_mask.unsqueeze(0)
        if key_padding_mask is not None:
            weights = weights.view(bsz, heads, tgt_len, src_len)
            weights = weights.masked_fill(key_padding_mask.view(bsz, 1, 1, src_len).bool(), float("-inf"))
            weights = weights.view(bsz * heads, tgt_len, src_len)
        probs = self.dropout_module(utils.softmax(weights, dim=-1).type_as(weights))
        out = torch.bmm(probs, v).transpose(0, 1).contiguous().view(tgt_len, bsz, dim)
        return (self.out_proj if out_proj is None else out_proj)(out)

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None,
                need_weights=True, static_kv=False, attn_mask=None, before_softmax=False,
                need_head_weights=False, st: Optional[LayerContext] = None):
        if st is None:
            raise RuntimeError("MultiLayerSelfAttention is called by the fusion layers with st (seam a)")
        own, _ = super().forward(query, key, value, key_padding_mask=key_padding_mask,
                                 incremental_state=incremental_state, need_weights=False,
                                 attn_mask=attn_mask)
        outs: List[Tensor] = [own]  # C^l_{-1}
        kvs, lower_mask = self.lower_keys_values(st, key_padding_mask, incremental_state)
        if self.separate:  # C^l_{-i}, i = 2..k, each a separate attention (own query and output)
            for (k, v), q_proj, out_proj in zip(kvs, self.lower_q_proj, self.lower_out_proj):
                outs.append(self.attend(q_proj(query) * self.scaling, k, v, lower_mask, attn_mask, out_proj))
        else:
            q = self.q_proj(query) * self.scaling  # Q^l, shared by all attended layers (Eq. 8)
            for k, v in kvs:  # C^l_{-i}, i = 2..k
                outs.append(self.attend(q, k, v, lower_mask, attn_mask))
        return self.agg(outs), None

    def reorder_incremental_state(self, incremental_state, new_order):
        super().reorder_incremental_state(incremental_state, new_order)
        cache = self.get_incremental_state(incremental_state, LOWER_CACHE)
        if cache is not None:
            for key, t in cache.items():
                if t is not None:
                    cache[key] = t.index_select(0 if key == "padding_mask" else 1, new_order)
            self.set_incremental_state(incremental_state, LOWER_CACHE, cache)
        return incremental_state


def validate(args):
    k = args.multilayer_attention  # the flags' choices and ranges: fusion_options.check_values
    if not k:
        return
    if args.multilayer_attention_layers == "above-k":
        for side in sides(args.multilayer_attention_in):
            if getattr(args, f"{side}_layers") <= k:
                logger.warning(
                    f"--multilayer-attention {k} --multilayer-attention-layers above-k: no {side} layer is above "
                    f"k (--{side}-layers {getattr(args, f'{side}_layers')}), the {side} keeps plain self-attention"
                )


def claims(args):
    if not args.multilayer_attention:
        return []
    return [Claim(f"{side}.self_attn", REPLACES, "--multilayer-attention", verb="changes",
                  why="Eq. 8 attends lower layers", hint="use --multilayer-attention-in encoder" * (side == "decoder"))
            for side in sides(args.multilayer_attention_in)]


def attach(model, args):
    k = args.multilayer_attention
    if not k:
        return
    for side in sides(args.multilayer_attention_in):
        for layer in getattr(model, side).layers:
            if args.multilayer_attention_layers == "all":
                attended = min(k, layer.layer_idx + 1)  # layer 1 attends only the embedding layer
            else:
                attended = k if layer.layer_idx + 1 > k else 0  # above-k: layers 1..k keep plain self-attention
            if attended < 2:
                continue
            if getattr(layer, "self_attn", None) is None or "self_attn" not in layer.plan:
                raise FusionError(
                    f"--multilayer-attention: {side} layer {layer.layer_idx + 1} has no self-attention "
                    f"(plan {list(layer.plan)}); another option removed it"
                )
            layer.self_attn = MultiLayerSelfAttention.from_attention(
                layer.self_attn, num_attended=attended, ffn_dim=getattr(args, f"{side}_ffn_embed_dim"),
                layer_idx=layer.layer_idx, agg_function=args.aggregation_function,
                agg_residual=args.aggregation_residual, agg_dropout=args.dropout,
                separate=args.multilayer_attention_projections == "separate",
            )
            tag = "enc" if side == "encoder" else "dec"
            layer.self_attn.agg.internals_name = f"multilayer_attention/{tag}{layer.layer_idx}"  # --fusion-log-internals


fusion_options.register(
    OptionGroup(
        title="multi-layer attention (Dou et al. 2018)",
        name="multilayer_attention",
        flags=[
            Flag("multilayer_attention", 0,
                 "K >= 2: self-attention of layer l attends layers l-1..l-K, combined by AGG "
                 "(Dou et al. 2018, Eq. 8); 0 = off", type=int,
                 bounds=Range(2, integer=True, what="a number of attended layers"), switch=True),
            Flag("multilayer_attention_in", "both",
                 "which stacks' self-attention attends multiple layers", type=str, choices=list(SIDES),
                 requires=["multilayer_attention"]),
            Flag("multilayer_attention_projections", "separate",
                 "each attended lower layer gets a separate full attention (separate, default: Table 1's "
                 "counts) or only its own key/value projections, sharing the query and output projections "
                 "(shared-query: Eq. 8's single Q^l)", type=str, choices=list(PROJECTIONS),
                 requires=["multilayer_attention"], legacy="shared-query"),
            Flag("multilayer_attention_layers", "above-k",
                 "which layers attend several layers: those above k, each attending k backbone layers "
                 "(above-k, default: Table 1's counts), or every layer from 2 on, attending min(k, l) states "
                 "with the embedding layer as layer 0 (all)", type=str, choices=list(LAYERS),
                 requires=["multilayer_attention"], legacy="all"),
        ],
        validate=validate,
        claims=claims,
        attach=attach,
    )
)
