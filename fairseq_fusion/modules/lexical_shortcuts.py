"""Gated lexical shortcuts (Emelin et al. 2019, "Addressing the Representation Bottleneck in
Neural Machine Translation with Lexical Shortcuts", §2.2 Eq. 5-14, §4.2 variants).

In layer l, the keys and values of an attention sub-layer mix a projection of the
embedding layer E with the usual projection of the layer input H_{l-1}::

    K^SC = W^{K_SC} E        V^SC = W^{V_SC} E                       (Eq. 5-6)
    K    = W^K H_{l-1}       V    = W^V H_{l-1}                      (Eq. 7-8)
    r^K  = sigmoid(K^SC + K + b^K)    r^V = sigmoid(V^SC + V + b^V)  (Eq. 9-10)
    K'   = r^K * K^SC + (1 - r^K) * K   V' likewise                  (Eq. 11-12)

and K', V' replace K, V in multi-head attention. Feature-fusion (Eq. 13-14) projects the
concatenation [E; H_{l-1}] with one matrix W^K of shape 2d x 2d and splits the result into
its halves (K^SC, K); Eq. 9-12 are unchanged.

Readings (see docs/lexical_shortcuts.md):
- E is the *embedding layer* ("layer", default): scaled token embeddings + positions, after
  embedding dropout, i.e. what layer 1 reads (fairseq's ``states[0]``); this is the paper's
  "embedding layer" and what the authors' released code feeds. ``tokens`` takes the scaled
  token embeddings without positions or dropout instead (``--lexical-shortcuts-embed``).
- Projections W^{K_SC}, W^{V_SC} have no bias; each gate has its bias b (zeros at init).
  With fairseq's biased k/v projections this reproduces Table 5's parameter increases
  exactly: 12 x (2d^2 + 2d) = 6,304K (shortcuts), 12 x (6d^2 + 2d) = 18,887K (feature-fusion).
- Feature-fusion's W^K = [[W_sc], [W_e | W_h]] is stored as ``k_sc_proj`` (2d -> d, the K^SC
  half, no bias), ``k_embed_proj`` (d -> d, E's columns of the K half, no bias) and fairseq's
  ``k_proj`` (H's columns of the K half, with fairseq's bias), so q/k/v/out_proj keep their
  names and a 2d x 2d matrix with bias [0; b_k] is what is computed.
- Decoder-to-encoder shortcuts (§4.2) fix E = E^enc (the encoder's embedding layer) and
  H = the memory the decoder layer attends; computed once per sentence (static, cached).
- Non-lexical shortcuts (§4.2, footnote 5): layer n takes the output of layer n-2 instead of
  E; layers 1 and 2 take E (the embedding layer is "layer 0").
"""
import math
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
import torch.nn as nn
from fairseq import utils
from fairseq.modules import MultiheadAttention
from torch import Tensor

from .. import fusion_options
from . import internals
from ..fusion_options import REPLACES, Claim, Flag, OptionGroup
from ..errors import FusionError
from ..seams import LayerContext

# where E comes from: the stack's own embedding layer, or the encoder's (decoder-to-encoder)
SOURCES = ("layer", "tokens")


class ShortcutGate(nn.Module):
    """r = sigmoid(SC + H + b) (Eq. 9-10); its output is the gate, for forward hooks."""

    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, shortcut: Tensor, hidden: Tensor) -> Tensor:
        return torch.sigmoid(shortcut + hidden + self.bias)


class ShortcutMultiheadAttention(MultiheadAttention):
    """fairseq's MultiheadAttention whose keys/values are gated with a shortcut (Eq. 5-14).

    A ``seams.LayerStateAttention`` (seam a): called by the fusion layers with ``st`` (the layer call's
    ``LayerContext``); E is read from ``st.ctx``.
    ``embed``: "layer" or "tokens" (what E is); ``enc_dec``: E = E^enc (decoder-to-encoder
    attention); ``nonlexical``: layer n reads layer n-2 (§4.2); ``layer_idx``: 0-based.
    """

    wants_layer_state = True

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, self_attention=False,
                 encoder_decoder_attention=False, feature_fusion=False, embed="layer",
                 enc_dec=False, nonlexical=False, layer_idx=0):
        super().__init__(
            embed_dim, num_heads, dropout=dropout, bias=bias, self_attention=self_attention,
            encoder_decoder_attention=encoder_decoder_attention,
        )
        self.feature_fusion = feature_fusion
        self.embed = embed
        self.enc_dec = enc_dec
        self.nonlexical = nonlexical
        self.layer_idx = layer_idx
        sc_in = 2 * embed_dim if feature_fusion else embed_dim
        self.k_sc_proj = nn.Linear(sc_in, embed_dim, bias=False)  # W^{K_SC} (Eq. 5 / 13)
        self.v_sc_proj = nn.Linear(sc_in, embed_dim, bias=False)  # W^{V_SC} (Eq. 6 / 14)
        if feature_fusion:  # E's columns of the hidden half of W^K, W^V (Eq. 13-14)
            self.k_embed_proj = nn.Linear(embed_dim, embed_dim, bias=False)
            self.v_embed_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        else:
            self.k_embed_proj = self.v_embed_proj = None
        self.internals_sink = None  # --fusion-log-internals (internals.py): the mean gates r^K, r^V
        self.internals_name = f"layer{layer_idx}"  # set by attach: the stack and layer
        self.k_gate = ShortcutGate(embed_dim)  # b^K (Eq. 9)
        self.v_gate = ShortcutGate(embed_dim)  # b^V (Eq. 10)
        gain = 1 / math.sqrt(2)  # as fairseq initializes k/v projections
        for proj in (self.k_sc_proj, self.v_sc_proj, self.k_embed_proj, self.v_embed_proj):
            if proj is not None:
                nn.init.xavier_uniform_(proj.weight, gain=gain)

    @classmethod
    def from_attention(cls, base: MultiheadAttention, **kwargs):
        """Replace ``base`` keeping its q/k/v/out_proj parameters (same names, same values)."""
        if base.bias_k is not None or base.add_zero_attn or not base.qkv_same_dim:
            raise FusionError(
                "--lexical-shortcuts: attention with add_bias_kv, add_zero_attn or kdim/vdim != "
                "embed_dim is not supported (shortcuts gate d-dimensional keys/values)"
            )
        new = cls(
            base.embed_dim, base.num_heads, dropout=base.dropout_module.p,
            bias=base.k_proj.bias is not None, self_attention=base.self_attention,
            encoder_decoder_attention=base.encoder_decoder_attention, **kwargs,
        )
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(new, name, getattr(base, name))
        return new.to(base.k_proj.weight)

    def set_beam_size(self, beam_size):
        """Keep one key/value copy per hypothesis: static K'/V' are reordered like fairseq's K/V."""
        self.beam_size = 1

    # --- Eq. 5-14 -------------------------------------------------------------------------

    def shortcut_input(self, st: LayerContext, length: int) -> Tensor:
        """E (T x B x C) of this layer: the embedding layer, E^enc, or layer n-2 (non-lexical)."""
        ctx = st.ctx
        if ctx is None:
            raise RuntimeError("lexical shortcuts need the stack context (st.ctx) from a fusion encoder/decoder")
        if self.enc_dec:
            enc = ctx.encoder_out
            if self.embed == "layer":
                e = enc["encoder_states"][0]
            else:
                e = enc["encoder_embedding"][0].transpose(0, 1)
        elif self.nonlexical and self.layer_idx >= 2:
            e = ctx.states[self.layer_idx - 1]  # output of layer n-2 (1-based n = idx + 1)
        elif self.embed == "layer":
            e = ctx.states[0]
        else:
            e = ctx.embed
        if e.size(0) != length:
            raise RuntimeError(
                f"lexical shortcuts: E has {e.size(0)} positions but the attended keys have {length}; "
                "another technique changed what this attention reads"
            )
        return e

    def gated_key_value(self, embed: Tensor, key: Tensor, value: Tensor, keep: Optional[Tensor] = None):
        """(K', V') of Eq. 11-12 from E and H (T x B x C each).

        Written to keep little for the backward pass (the same values): W^{K_SC} [E; H] of Eq. 13 as
        E W_E^T + H W_H^T on the two column blocks of W^{K_SC} (the 2d-wide [E; H] is never built; E and
        H are kept once, by every product that reads them), and r K_SC + (1 - r) K as K + r (K_SC - K)
        (keeps r and K_SC - K instead of r, 1 - r, K_SC and K). The products that read the same input are
        one product with the weights stacked (E: 2 or 4, H: 2 or 4 where keys and values are the same
        tensor, as in fairseq's self- and encoder attention): fewer, larger kernels, the same values.
        With ``--fusion-log-internals`` the gates' means over the tokens ``keep`` marks (S x B) are recorded."""
        embed = embed.contiguous()  # one copy of a transposed E for all its products, not one per product
        if self.feature_fusion:
            d = embed.size(-1)
            k_w, v_w = self.k_sc_proj.weight, self.v_sc_proj.weight
            # E's products: W^{K_SC}, W^{V_SC} (E's columns, Eq. 13-14) and W^K, W^V (E's columns)
            e_ksc, e_vsc, e_k, e_v = F.linear(embed, torch.cat(
                [k_w[:, :d], v_w[:, :d], self.k_embed_proj.weight, self.v_embed_proj.weight])).chunk(4, dim=-1)
            h_ksc, h_k, h_vsc, h_v = self._stacked(
                key, value, [k_w[:, d:], self.k_proj.weight, v_w[:, d:], self.v_proj.weight],
                [None, self.k_proj.bias, None, self.v_proj.bias])
            k_sc, v_sc, k, v = e_ksc + h_ksc, e_vsc + h_vsc, h_k + e_k, h_v + e_v
        else:
            k_sc, v_sc = F.linear(embed, torch.cat([self.k_sc_proj.weight, self.v_sc_proj.weight])).chunk(2, dim=-1)  # Eq. 5-6
            k, v = self._stacked(key, value, [self.k_proj.weight, self.v_proj.weight],
                                 [self.k_proj.bias, self.v_proj.bias])  # Eq. 7-8
        r_k = self.k_gate(k_sc, k)
        r_v = self.v_gate(v_sc, v)
        if keep is not None:  # --fusion-log-internals, a full forward
            internals.record(self, f"shortcuts/{self.internals_name}_key_gate", internals.masked_mean(r_k.detach(), keep))
            internals.record(self, f"shortcuts/{self.internals_name}_value_gate", internals.masked_mean(r_v.detach(), keep))
        return k + r_k * (k_sc - k), v + r_v * (v_sc - v)  # Eq. 11-12: r SC + (1 - r) H

    @staticmethod
    def _stacked(key: Tensor, value: Tensor, weights: List[Tensor], biases: List[Optional[Tensor]]) -> List[Tensor]:
        """The products of H with ``weights`` (the first half reads the keys, the second the values): one stacked
        product where keys and values are the same tensor, else one per half."""
        def bias_of(ws, bs):
            if all(b is None for b in bs):
                return None
            return torch.cat([b if b is not None else w.new_zeros(w.size(0)) for w, b in zip(ws, bs)])

        if key is value:
            return list(F.linear(key, torch.cat(weights), bias_of(weights, biases)).chunk(len(weights), dim=-1))
        half = len(weights) // 2
        outs = []
        for x, ws, bs in ((key, weights[:half], biases[:half]), (value, weights[half:], biases[half:])):
            outs += list(F.linear(x, torch.cat(ws), bias_of(ws, bs)).chunk(half, dim=-1))
        return outs

    # --- attention with gated keys/values (fairseq's MultiheadAttention otherwise) ---------

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor],
        value: Optional[Tensor],
        key_padding_mask: Optional[Tensor] = None,
        incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
        need_weights: bool = True,
        static_kv: bool = False,
        attn_mask: Optional[Tensor] = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
        st: Optional[LayerContext] = None,
    ):
        if st is None:
            raise RuntimeError("ShortcutMultiheadAttention must be called by a fusion layer (st=...)")
        if need_head_weights:
            need_weights = True
        tgt_len, bsz, embed_dim = query.size()
        key = query if key is None and not static_kv else key
        value = key if value is None else value

        saved_state = self._get_input_buffer(incremental_state) if incremental_state is not None else None
        reuse = static_kv and saved_state is not None and "prev_key" in saved_state

        q = self.q_proj(query) * self.scaling
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        k = v = None
        if not reuse:
            keep = None
            if self.internals_sink is not None and incremental_state is None:  # --fusion-log-internals
                keep = key.new_ones(key.shape[:2], dtype=torch.bool)
                if key_padding_mask is not None and key_padding_mask.dim() > 0:
                    keep = ~key_padding_mask.t().bool()
            k, v = self.gated_key_value(self.shortcut_input(st, key.size(0)), key, value, keep)
            k = k.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)
            v = v.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)

        if saved_state is not None:
            # cache K'/V' as fairseq caches K/V: (bsz, heads, len, head_dim)
            if "prev_key" in saved_state:
                prev_key = saved_state["prev_key"].view(bsz * self.num_heads, -1, self.head_dim)
                prev_value = saved_state["prev_value"].view(bsz * self.num_heads, -1, self.head_dim)
                if reuse:
                    k, v = prev_key, prev_value
                else:
                    k = torch.cat([prev_key, k], dim=1)
                    v = torch.cat([prev_value, v], dim=1)
            key_padding_mask = MultiheadAttention._append_prev_key_padding_mask(
                key_padding_mask=key_padding_mask,
                prev_key_padding_mask=saved_state.get("prev_key_padding_mask"),
                batch_size=bsz,
                src_len=k.size(1),
                static_kv=static_kv,
            )
            saved_state["prev_key"] = k.view(bsz, self.num_heads, -1, self.head_dim)
            saved_state["prev_value"] = v.view(bsz, self.num_heads, -1, self.head_dim)
            saved_state["prev_key_padding_mask"] = key_padding_mask
            self._set_input_buffer(incremental_state, saved_state)
        src_len = k.size(1)

        attn_weights = torch.bmm(q, k.transpose(1, 2))
        if attn_mask is not None:
            attn_weights = attn_weights + attn_mask.unsqueeze(0)
        if key_padding_mask is not None and key_padding_mask.dim() > 0:
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
            attn_weights = attn_weights.masked_fill(
                key_padding_mask.unsqueeze(1).unsqueeze(2).to(torch.bool), float("-inf")
            )
            attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        if before_softmax:
            return attn_weights, v
        attn_weights_float = utils.softmax(attn_weights, dim=-1)
        attn_probs = self.dropout_module(attn_weights_float.type_as(attn_weights))
        attn = torch.bmm(attn_probs, v)
        attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
        attn = self.out_proj(attn)
        weights: Optional[Tensor] = None
        if need_weights:
            weights = attn_weights_float.view(bsz, self.num_heads, tgt_len, src_len).transpose(1, 0)
            if not need_head_weights:
                weights = weights.mean(dim=0)
        return attn, weights


# --- flags ------------------------------------------------------------------------------

SIDES = ("both", "encoder", "decoder")


def validate(args):
    self_attn = bool(args.lexical_shortcuts)
    enc_dec = bool(args.lexical_shortcuts_enc_dec)
    if not (self_attn or enc_dec):  # sub-flags without the technique: fusion_options refuses them
        return
    if enc_dec and getattr(args, "no_cross_attention", False):
        raise FusionError("--lexical-shortcuts-enc-dec needs decoder-to-encoder attention, but --no-cross-attention is set")


def claims(args):
    found = []
    if args.lexical_shortcuts:
        for side in ("encoder", "decoder"):
            if args.lexical_shortcuts_sides in ("both", side):
                found.append(Claim(
                    f"{side}.self_attn", REPLACES, "--lexical-shortcuts" + " (decoder side)" * (side == "decoder"),
                    verb="gates", why="Emelin et al. gate the keys/values",
                    hint="use --lexical-shortcuts-sides encoder or --lexical-shortcuts-enc-dec instead" * (side == "decoder")))
    if args.lexical_shortcuts_enc_dec:
        found.append(Claim("decoder.encoder_attn", REPLACES, "--lexical-shortcuts-enc-dec", verb="gates",
                           why="Emelin et al. gate the keys/values"))
    return found


def _install(layer, name, tag, **kwargs):
    base = getattr(layer, name, None)
    if base is None or name not in layer.plan:
        raise FusionError(
            f"--lexical-shortcuts: layer {layer.layer_idx} has no '{name}' sub-layer "
            f"(plan {list(layer.plan)}); another option removed it"
        )
    attention = ShortcutMultiheadAttention.from_attention(base, layer_idx=layer.layer_idx, **kwargs)
    attention.internals_name = f"{tag}{layer.layer_idx}"  # e.g. enc0, dec5, encdec5
    setattr(layer, name, attention)


def attach(model, args):
    common = dict(
        feature_fusion=bool(args.lexical_shortcuts_feature_fusion),
        embed=args.lexical_shortcuts_embed,
    )
    if args.lexical_shortcuts:
        sides = args.lexical_shortcuts_sides
        stacks = [model.encoder] * (sides in ("both", "encoder")) + [model.decoder] * (sides in ("both", "decoder"))
        for stack in stacks:
            for layer in stack.layers:
                _install(layer, "self_attn", "enc" if stack is model.encoder else "dec", nonlexical=bool(args.lexical_shortcuts_nonlexical), **common)
    if args.lexical_shortcuts_enc_dec:
        model.encoder.states_for_decoder = True  # E^enc = encoder_states[0], also in generation
        for layer in model.decoder.layers:
            _install(layer, "encoder_attn", "encdec", enc_dec=True, **common)


fusion_options.register(
    OptionGroup(
        title="lexical shortcuts (Emelin et al. 2019)",
        name="lexical_shortcuts",
        flags=[
            Flag("lexical_shortcuts", False,
                 "gated shortcuts from the embedding layer into every self-attention (Eq. 5-12)", type=bool, switch=True),
            Flag("lexical_shortcuts_sides", "both",
                 "which stacks' self-attention gets shortcuts (Fig. 5 ablation)", type=str, choices=list(SIDES),
                 requires=["lexical_shortcuts"]),
            Flag("lexical_shortcuts_enc_dec", False,
                 "shortcuts into decoder-to-encoder attention with E = E^enc (§4.2, Table 4); "
                 "alone, or with --lexical-shortcuts in addition to self-attention", type=bool, switch=True),
            Flag("lexical_shortcuts_feature_fusion", False,
                 "feature-fusion: one projection of [E; H_(l-1)] split in halves (Eq. 13-14)", type=bool,
                 requires=["lexical_shortcuts", "lexical_shortcuts_enc_dec"]),
            Flag("lexical_shortcuts_nonlexical", False,
                 "non-lexical shortcuts: layer n reads layer n-2, layers 1-2 the embeddings (§4.2)", type=bool,
                 requires=["lexical_shortcuts"]),
            Flag("lexical_shortcuts_embed", "layer",
                 "what E is: 'layer' = embedding layer output (scaled embeddings + positions, after "
                 "dropout; the authors' code), 'tokens' = scaled token embeddings only", type=str,
                 choices=list(SOURCES), requires=["lexical_shortcuts", "lexical_shortcuts_enc_dec"]),
        ],
        validate=validate,
        claims=claims,
        attach=attach,
    )
)
