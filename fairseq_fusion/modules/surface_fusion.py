"""SurfaceFusion: fuse the source word embeddings into the output distribution.

Liu et al., ICLR 2021, *Understanding and Improving Encoder Layer Fusion in Seq2Seq
Learning*, §4.1, Eq. 3-7.

- r(y_j, x) = MultiHead(query = y_j^M, keys = X^N, values = X_emb): a multi-head attention
  with the top decoder output as query, the encoder output as keys and the encoder word
  embeddings as values;
- r~ = V^T r, with V the model's own pre-softmax output weights (shared, no new parameters);
- Eq. 5: P(y_j | x) = softmax(r~ / tau);
- Eq. 6, hard fusion: log P(y_j) = lambda log P(y_j | y_<j, x) + (1 - lambda) log P(y_j | x);
- Eq. 7, soft fusion: log P(y_j) = log softmax(E(y_j | y_<j, x) + log P(y_j | x)), E the
  vanilla pre-softmax logits.

The fused log-probabilities replace the model's in ``get_normalized_probs`` (seam e), so the
training loss, ``fairseq-generate``, ``fairseq-interactive`` and the hub all use them;
``log_probs=False`` returns their exponential.

Readings chosen here (the paper is silent or ambiguous):

- y_j^M is the decoder's final feature (after the final LayerNorm of a pre-norm decoder and
  ``project_out_dim``), the vector V multiplies; X^N is ``encoder_out["encoder_out"]``;
  X_emb is fairseq's scaled word embeddings sqrt(D) E[x] without positions
  (``encoder_out["encoder_embedding"]``), as in the authors' code (``--sf-no-posedemb``);
- the attention is standard multi-head attention (``SurfaceAttention``) with
  ``--surface-fusion-heads`` heads (default: the decoder's), the model's attention dropout,
  and q/k/v/out projections with biases: 4 D^2 + 4 D parameters when the dimensions agree;
- the paper is silent on gradients and dropout of the surface attention; the named archs follow
  the authors' code: the query and keys are detached (``--surface-fusion-detach``, so the
  surface path trains only the attention's projections and, through the values, the word
  embeddings and V) and X_emb gets the model's ``--dropout`` in training
  (``--surface-fusion-embed-dropout``); both flags false give the earlier reading
  (gradients everywhere, no dropout on X_emb);
- the authors' code passes both the decoder output and r through one new residual FFN before
  V; the paper writes r~ = V^T r, so the named archs do not. ``--surface-fusion-ffn`` adds it
  (fc1/fc2 of --decoder-ffn-embed-dim, the decoder's activation and dropouts): the fused E is
  then V^T FFN(y^M), stored in ``extra`` next to the surface logits, and ``net_output[0]``
  (V^T y^M) is not what the distribution uses;
- hard fusion as written (a weighted geometric mean P^lambda P_s^(1-lambda)) sums to at most 1
  over the vocabulary. By default it is used as is (paper and authors' code);
  ``--surface-fusion-renormalize`` applies a log-softmax over the vocabulary to it;
- tau divides the surface logits in both modes (Eq. 5); defaults: 1 for hard, 5 for soft;
  lambda defaults to 0.9 (WMT En-De/En-Fr); the paper uses 0.8 for small data (Ro-En).
- fairseq's ``--temperature`` in generation divides the vanilla logits E only.
"""
from functools import partial

import math
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from fairseq import utils
from fairseq.incremental_decoding_utils import with_incremental_state
from torch import Tensor, nn

from .. import fusion_options, host_sync
from . import internals
from ..fusion_options import REPLACES, Claim, Flag, OptionGroup, Range
from ..errors import FusionError

LOGITS_KEY = "surface_logits"
VANILLA_KEY = "surface_fusion_vanilla_logits"  # E after the shared FFN (--surface-fusion-ffn)
DEFAULT_TAU = {"hard": 1.0, "soft": 5.0}


@with_incremental_state
class SurfaceAttention(nn.Module):
    """Multi-head dot-product attention (Vaswani et al. 2017) whose values differ from its keys.

    (fairseq's ``MultiheadAttention`` in encoder-decoder mode projects the *keys* as values.)
    Query B x T x Cq; keys S x B x Ck; values S x B x Cv; output B x T x Cq. The projected
    keys and values depend on the source only: in incremental decoding they are computed at
    the first step and cached in ``incremental_state`` (reordered with the beams).
    """

    def __init__(self, embed_dim, num_heads, kdim, vdim, dropout=0.0):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.dropout = dropout
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(kdim, embed_dim)
        self.v_proj = nn.Linear(vdim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        for proj in (self.q_proj, self.k_proj, self.v_proj):  # as fairseq's MultiheadAttention
            nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2))
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.constant_(self.out_proj.bias, 0.0)

    def split_heads(self, x):  # B x L x C -> B x H x L x hd
        return x.view(x.size(0), x.size(1), self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query, key, value, key_padding_mask=None, incremental_state=None, rows=None):
        """``rows``: the input sentence of each batch row (the encoder output's ``fusion_row_sentence``); kept
        with the cached keys/values so that a beam reorder within sentences skips copying them (on the CPU)."""
        cached = self.get_incremental_state(incremental_state, "kv") if incremental_state is not None else None
        if cached is not None:
            k, v, key_padding_mask = cached["k"], cached["v"], cached["mask"]
        else:
            k = self.split_heads(self.k_proj(key).transpose(0, 1))
            v = self.split_heads(self.v_proj(value).transpose(0, 1))
            if incremental_state is not None:
                self.set_incremental_state(incremental_state, "kv", {"k": k, "v": v, "mask": key_padding_mask, "rows": rows})
        q = self.split_heads(self.q_proj(query))
        if not self.training or self.dropout == 0.0:  # torch's fused kernel (the same softmax(q k^T / sqrt(hd)) v)
            keep = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :].to(torch.bool)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        else:
            scores = torch.matmul(q * self.scaling, k.transpose(2, 3))  # B x H x T x S
            if key_padding_mask is not None:
                scores = scores.masked_fill(key_padding_mask[:, None, None, :].to(torch.bool), float("-inf"))
            probs = F.dropout(torch.softmax(scores.float(), dim=-1).type_as(scores), p=self.dropout, training=self.training)
            out = torch.matmul(probs, v)
        return self.out_proj(out.transpose(1, 2).reshape(query.size(0), query.size(1), -1))

    def reorder_incremental_state(self, incremental_state: Dict[str, Dict[str, Optional[Tensor]]], new_order: Tensor):
        cached = self.get_incremental_state(incremental_state, "kv")
        if cached is not None:
            rows = cached.get("rows")
            if (rows is not None and rows.numel() == new_order.numel() and host_sync.host_reads_are_free(rows)
                    and torch.equal(rows.index_select(0, new_order), rows)):
                return incremental_state  # beams permuted within their sentences: the cached values stay the same
            cached = {name: None if t is None else t.index_select(0, new_order) for name, t in cached.items()}
            self.set_incremental_state(incremental_state, "kv", cached)
        return incremental_state


class SurfaceFusion(nn.Module):
    """Surface attention (§4.1) + the fusion of Eq. 6 / Eq. 7 (seam e, a ``seams.OutputFusion``)."""

    def __init__(self, query_dim, key_dim, value_dim, heads, mode="hard", lam=0.9, tau=None,
                 renormalize=False, attention_dropout=0.0, detach=False, embed_dropout=0.0,
                 ffn_dim=None, activation_fn="relu", activation_dropout=0.0, dropout=0.0):
        super().__init__()
        if mode not in DEFAULT_TAU:
            raise FusionError(f"--surface-fusion: expected hard or soft, got {mode!r}")
        self.mode = mode
        self.lam = lam
        self.tau = DEFAULT_TAU[mode] if tau is None else tau
        self.renormalize = renormalize
        self.detach = detach  # no gradient through the query (decoder) and keys (encoder)
        self.embed_dropout = embed_dropout  # dropout on the values X_emb (training only)
        self.attn = SurfaceAttention(query_dim, heads, key_dim, value_dim, dropout=attention_dropout)
        self.internals_sink = None  # --fusion-log-internals (internals.py): KL of the fused from the decoder's output
        self.ffn_dim = ffn_dim
        if ffn_dim:  # authors' code (sf_ffn): one residual FFN for the decoder output and r
            self.fc1, self.fc2 = nn.Linear(query_dim, ffn_dim), nn.Linear(ffn_dim, query_dim)
            for fc in (self.fc1, self.fc2):  # as fairseq's Linear
                nn.init.xavier_uniform_(fc.weight)
                nn.init.constant_(fc.bias, 0.0)
            self.activation_fn = utils.get_activation_fn(activation_fn)
            self.activation_dropout, self.dropout = activation_dropout, dropout

    def ffn(self, x):
        """x + dropout(fc2(dropout(act(fc1(x)))))."""
        h = F.dropout(self.activation_fn(self.fc1(x)), p=self.activation_dropout, training=self.training)
        return x + F.dropout(self.fc2(h), p=self.dropout, training=self.training)

    def surface_representation(self, features, encoder_out, incremental_state=None):
        """r(y_j, x): B x T x C from the decoder features (B x T x C) and the encoder output."""
        if encoder_out is None:
            raise FusionError("--surface-fusion needs the encoder output (a source sentence)")
        keys = encoder_out["encoder_out"][0]  # S x B x C
        values = encoder_out["encoder_embedding"][0].transpose(0, 1)  # S x B x C
        values = F.dropout(values, p=self.embed_dropout, training=self.training)
        if self.detach:
            features, keys = features.detach(), keys.detach()
        padding_mask = None
        if len(encoder_out["encoder_padding_mask"]) > 0:
            padding_mask = encoder_out["encoder_padding_mask"][0]
        rows = encoder_out.get("fusion_row_sentence")
        return self.attn(features, keys, values, padding_mask, incremental_state, rows[0] if rows else None)

    def add_surface_logits(self, decoder, features, extra, ctx):
        """Decoder hook: extra[LOGITS_KEY] = V^T r (B x T x |V|), last step only when incremental."""
        r = self.surface_representation(features, ctx.encoder_out, ctx.incremental_state)
        if self.ffn_dim:  # the fused E is V^T FFN(y^M), not the decoder's own logits
            r = self.ffn(r)
            extra[VANILLA_KEY] = decoder.output_layer(self.ffn(features))
        extra[LOGITS_KEY] = decoder.output_layer(r)
        if self.internals_sink is not None and ctx.incremental_state is None:
            self.record_internals(decoder, features, extra, ctx)

    def record_internals(self, decoder, features, extra, ctx):
        """How far fusion moves the output: KL(P_fused || P_decoder) in nats (P_fused renormalized), mean over the
        target tokens of the batch's first sentence (one sentence: a small share of one output projection)."""
        with torch.no_grad():
            own = extra[VANILLA_KEY][:1] if VANILLA_KEY in extra else decoder.output_layer(features[:1])
            fused = F.log_softmax(self.fuse(own, extra[LOGITS_KEY][:1]), dim=-1)
            kl = (fused.exp() * (fused - F.log_softmax(own.float(), dim=-1))).sum(-1)  # 1 x T
            pad = ctx.self_attn_padding_mask
            keep = None if pad is None else ~pad[:1]
            internals.record(self, "surface_fusion/kl_fused_decoder", internals.masked_mean(kl, keep))

    def fuse(self, logits, surface_logits):
        """Eq. 5-7 on pre-softmax logits E and r~ (... x |V|); returns log-probabilities."""
        log_p_surface = F.log_softmax(surface_logits.float() / self.tau, dim=-1)  # Eq. 5
        if self.mode == "soft":  # Eq. 7
            return F.log_softmax(logits.float() + log_p_surface, dim=-1)
        fused = self.lam * F.log_softmax(logits.float(), dim=-1) + (1 - self.lam) * log_p_surface  # Eq. 6
        return F.log_softmax(fused, dim=-1) if self.renormalize else fused

    def get_normalized_probs(self, net_output, log_probs):
        extra = net_output[1]
        if extra is None or LOGITS_KEY not in extra:
            raise KeyError(f"--surface-fusion: the decoder output has no '{LOGITS_KEY}' "
                           "(was it produced by this model's decoder?)")
        fused = self.fuse(extra.get(VANILLA_KEY, net_output[0]), extra[LOGITS_KEY])
        return fused if log_probs else fused.exp()


def parameter_count(query_dim, key_dim, value_dim):
    """Parameters SurfaceFusion adds: q, k, v, out projections with biases (V is shared)."""
    return (query_dim + 1) * query_dim + (key_dim + 1) * query_dim + (value_dim + 1) * query_dim + (query_dim + 1) * query_dim


def validate(args):
    # the flags' choices and ranges: fusion_options.check_values
    if args.surface_fusion == "none":
        return
    if getattr(args, "adaptive_softmax_cutoff", None):
        raise FusionError("--surface-fusion projects with the full output matrix; "
                         "it does not work with --adaptive-softmax-cutoff")
    heads = args.surface_fusion_heads or args.decoder_attention_heads
    dim = getattr(args, "decoder_output_dim", None) or args.decoder_embed_dim
    if dim % heads != 0:
        raise FusionError(f"--surface-fusion-heads {heads} must divide the decoder output dimension {dim}")


def claims(args):
    mode = args.surface_fusion
    return [] if mode == "none" else [Claim("decoder.output_fusion", REPLACES, f"--surface-fusion {mode}")]


def attach(model, args):
    if args.surface_fusion == "none":
        return
    decoder = model.decoder
    query_dim = decoder.output_embed_dim
    fusion = SurfaceFusion(
        query_dim, args.encoder_embed_dim, model.encoder.embed_tokens.embedding_dim,
        heads=args.surface_fusion_heads or args.decoder_attention_heads,
        mode=args.surface_fusion, lam=args.surface_fusion_lambda, tau=args.surface_fusion_tau,
        renormalize=bool(args.surface_fusion_renormalize), attention_dropout=args.attention_dropout,
        detach=bool(args.surface_fusion_detach),
        embed_dropout=args.dropout if args.surface_fusion_embed_dropout else 0.0,
        ffn_dim=args.decoder_ffn_embed_dim if args.surface_fusion_ffn else None,
        activation_fn=getattr(args, "activation_fn", "relu") or "relu",
        activation_dropout=getattr(args, "activation_dropout", 0.0) or getattr(args, "relu_dropout", 0.0) or 0.0,
        dropout=args.dropout,
    )
    decoder.output_fusion = fusion
    decoder.extra_output_hooks.append(partial(fusion.add_surface_logits, decoder))


fusion_options.register(
    OptionGroup(
        title="SurfaceFusion (Liu et al. 2021, §4.1)",
        name="surface_fusion",
        flags=[
            Flag("surface_fusion", "none",
                 "fuse P(y|x) from an attention over the source word embeddings into the output: "
                 "'hard' (Eq. 6) or 'soft' (Eq. 7)", type=str, choices=["none", "hard", "soft"], switch=True),
            Flag("surface_fusion_lambda", 0.9,
                 "hard fusion weight lambda of log P(y|y<j,x) (paper: 0.9; 0.8 for small data)", type=float,
                 bounds=Range(0, 1, what="a weight"), requires=[("surface_fusion", ("hard",))]),
            Flag("surface_fusion_tau", None,
                 "softmax temperature tau of P(y|x) (Eq. 5); default 1 for hard, 5 for soft", type=float,
                 bounds=Range(0, low_open=True, what="a temperature"), requires=["surface_fusion"]),
            Flag("surface_fusion_heads", None,
                 "heads of the surface attention (default: --decoder-attention-heads)", type=int,
                 bounds=Range(1, integer=True, what="a number of heads"), requires=["surface_fusion"]),
            Flag("surface_fusion_renormalize", False,
                 "renormalize hard fusion over the vocabulary (log-softmax of Eq. 6); "
                 "the paper uses Eq. 6 as is", type=bool,
                 requires=[("surface_fusion", ("hard",))]),
            Flag("surface_fusion_detach", False,
                 "detach the surface attention's query (decoder output) and keys (encoder output) from "
                 "the graph, as the authors' code; the attention's own parameters still learn "
                 "(named archs: true)", type=bool, requires=["surface_fusion"]),
            Flag("surface_fusion_embed_dropout", False,
                 "apply --dropout to the surface attention's values X_emb in training, as the authors' "
                 "code (named archs: true)", type=bool, requires=["surface_fusion"]),
            Flag("surface_fusion_ffn", False,
                 "pass the decoder output and r through one new residual FFN (--decoder-ffn-embed-dim) "
                 "before V, as the authors' code; the paper writes r~ = V^T r (named archs: false)",
                 type=bool, requires=["surface_fusion"]),
        ],
        validate=validate,
        claims=claims,
        attach=attach,
    )
)
