"""Source phrase representations in the Transformer (Xu et al. 2020, ACL, §3).

- ``PhraseRepresentation``: Eq. 2-5. R_all = F_glance(R_t1..R_tm) (mean or max-over-time);
  s_i = W2 sigmoid(W1 [R_ti | R_all] + b1) (+ b2, which the softmax ignores: left out);
  p_i = softmax_i(s_i) over the phrase's own tokens (padding excluded); R_phrase = sum_i p_i R_ti. Without ``attentive`` (Table 2,
  "+Mean" / "+Max") the phrase representation is R_all itself. W1 maps 2d -> d (the paper
  gives no width; "one linear transformation and a vector", W2 is d -> 1).
- ``PhraseAttentiveCombination``: Eq. 7-8. out_phrase = Attn_MH(x, R_phrase);
  out = W4 sigmoid(W3 [x | out_phrase] + b3) + b4, with a residual connection and layer
  normalization around it. Eq. 7's text calls x the keys and the phrases the queries and
  values, but Eq. 8 concatenates x and out_phrase per token, so there must be one output
  per token: x is the query and the phrases are keys and values (as implemented). The
  garbled activation of Eq. 8 is read as the sigmoid of Eq. 3; W3 maps 2d -> d.
- Transparent attention (Eq. 6): decoder layer j reads sum_{i=0..d} softmax(w^j)_i R^i_phrase
  over the phrase representations of the embedding layer (i = 0) and the d encoder layers'
  outputs; without it, only the last encoder layer's (R^d).

Encoder layer k (0-based) generates R^k from its input and runs "phrase_attn" before
self-attention; its R^k, and R^d generated from the encoder's output, go to the decoder
in the encoder output ("phrase_reps", P x B x C each; "phrase_padding_mask", B x P).
Decoder layers run self-attention -> "phrase_attn" -> encoder attention -> FFN.
"""
import math

import torch
import torch.nn.functional as F
from fairseq.modules import LayerNorm, MultiheadAttention
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor, nn

from .phrase_segmentation import PhraseSegmenter, Segmentation
from . import internals
from ..errors import FusionError
from ..seams import LayerContext

PHRASE_REPS = "phrase_reps"
PHRASE_PADDING_MASK = "phrase_padding_mask"
COMBINERS = ("residue", "narrow")


class PhraseRepresentation(nn.Module):
    """Eq. 2-5: one vector per phrase from the vectors of its tokens (P x B x C)."""

    def __init__(self, embed_dim: int, glance: str = "max", attentive: bool = True):
        super().__init__()
        if glance not in ("mean", "max"):
            raise FusionError(f"--phrase-glance: expected 'mean' or 'max', got {glance!r}")
        self.glance = glance
        self.attentive = attentive
        if attentive:
            self.w1 = nn.Linear(2 * embed_dim, embed_dim)
            # Eq. 3's b2 is left out: Eq. 4's softmax over i ignores a constant added to every s_i,
            # so b2 could never change (its gradient is exactly zero); the authors' LD encoder scores with
            # ``ATTNCombiner``, whose Scorer has a bias that is never added in practice (docs/phrase_representations.md)
            self.w2 = nn.Linear(embed_dim, 1, bias=False)

    def upgrade_state_dict_named(self, state_dict, name):
        """Checkpoints that still have b2: drop it (it did not change any output)."""
        state_dict.pop(f"{name}.w2.bias" if name else "w2.bias", None)

    def forward(self, x: Tensor, seg: Segmentation) -> Tensor:
        """x: T x B x C token vectors -> P x B x C phrase vectors (zeros for empty phrase slots)."""
        xb = x.transpose(0, 1)
        bsz = xb.size(0)
        tokens = xb[torch.arange(bsz, device=x.device).view(bsz, 1, 1), seg.index]  # B x P x M x C
        mask = seg.token_mask.unsqueeze(-1)
        if self.glance == "mean":  # Eq. 2, element-wise mean
            summary = (tokens * mask).sum(dim=2) / mask.sum(dim=2).clamp(min=1).type_as(x)
        else:  # Eq. 2, max-over-time
            summary = tokens.masked_fill(~mask, torch.finfo(x.dtype).min).amax(dim=2)
            # an empty phrase slot (batch padding) has no token, so its max is finfo.min, which
            # W1 of Eq. 3 turns into +-inf in every dtype (0.6-0.9% of W1's outputs for a batch
            # of 2 and 79 source tokens at d=512): zero it here; the slot's output is zeroed
            # below anyway, so real phrases (values and gradients) are unchanged
            summary = summary.masked_fill(seg.phrase_padding_mask.unsqueeze(-1), 0.0)
        if self.attentive:
            both = torch.cat([tokens, summary.unsqueeze(2).expand_as(tokens)], dim=-1)
            scores = self.w2(torch.sigmoid(self.w1(both))).squeeze(-1)  # Eq. 3
            scores = scores.masked_fill(~seg.token_mask, torch.finfo(scores.dtype).min)
            probs = F.softmax(scores.float() if scores.element_size() < 4 else scores, dim=-1).type_as(x)  # Eq. 4
            summary = (probs.unsqueeze(-1) * tokens).sum(dim=2)  # Eq. 5
        summary = summary.masked_fill(seg.phrase_padding_mask.unsqueeze(-1), 0.0)
        return summary.transpose(0, 1)


class PhraseAttentiveCombination(nn.Module):
    """Eq. 7-8 with residual connection and layer normalization (post- or pre-norm).

    ``combiner`` (the paper gives neither W3's width nor what the residual adds):
    "residue" (the authors' ``ResidueCombiner``): W3 2d -> ``hidden_dim`` (d_ff), dropout on the
    sigmoid, LN(x + dropout(out) + out_phrase); "narrow": W3 2d -> d, LN(x + dropout(out)).
    """

    def __init__(self, cfg, embed_dim: int, heads: int, normalize_before: bool,
                 combiner: str = "residue", hidden_dim: int = None):
        super().__init__()
        self.attn = MultiheadAttention(
            embed_dim, heads, dropout=cfg.attention_dropout, encoder_decoder_attention=True
        )
        self.residue = combiner == "residue"
        hidden = hidden_dim if self.residue else embed_dim
        self.w3 = nn.Linear(2 * embed_dim, hidden)
        self.w4 = nn.Linear(hidden, embed_dim)
        self.layer_norm = LayerNorm(embed_dim)
        self.dropout_module = FairseqDropout(cfg.dropout, module_name=type(self).__name__)
        self.normalize_before = normalize_before
        self.internals_sink = None  # --fusion-log-internals (internals.py): the attention's entropy over phrases
        self.internals_name = "layer"  # set by attach: enc0, dec0, ...

    def forward(self, x, phrases, phrase_padding_mask, incremental_state=None, query_padding_mask=None):
        residual = x
        if self.internals_sink is not None and incremental_state is None:
            self.record_internals(self.layer_norm(x) if self.normalize_before else x, phrases, phrase_padding_mask,
                                  query_padding_mask)
        if self.normalize_before:
            x = self.layer_norm(x)
        out_phrase, _ = self.attn(  # Eq. 7, x as the query
            query=x,
            key=phrases,
            value=phrases,
            key_padding_mask=phrase_padding_mask,
            incremental_state=incremental_state,
            static_kv=True,
            need_weights=False,
        )
        hidden = torch.sigmoid(self.w3(torch.cat([x, out_phrase], dim=-1)))  # Eq. 8
        if self.residue:
            hidden = self.dropout_module(hidden)
        x = residual + self.dropout_module(self.w4(hidden))
        if self.residue:
            x = x + out_phrase
        if not self.normalize_before:
            x = self.layer_norm(x)
        return x

    def record_internals(self, query, phrases, phrase_padding_mask, query_padding_mask):
        """Entropy (nats) of Eq. 7's attention over the phrases, mean over heads and the tokens of the batch's first
        sentence (one sentence: recomputed beside the fused attention kernel at a small share of its cost)."""
        with torch.no_grad():
            a, heads = self.attn, self.attn.num_heads
            q = (a.q_proj(query[:, :1]) * a.scaling).view(-1, heads, a.head_dim).transpose(0, 1)  # H x T x hd
            k = a.k_proj(phrases[:, :1]).view(-1, heads, a.head_dim).transpose(0, 1)  # H x P x hd
            scores = torch.bmm(q, k.transpose(1, 2)).float()  # H x T x P
            if phrase_padding_mask is not None:
                scores = scores.masked_fill(phrase_padding_mask[:1].view(1, 1, -1).bool(), float("-inf"))
            spread = internals.entropy(torch.softmax(scores, dim=-1)).mean(0)  # T
            keep = None if query_padding_mask is None else ~query_padding_mask[:1].t().bool()
            internals.record(self, f"phrases/{self.internals_name}_entropy", internals.masked_mean(spread[:, None], keep))


class PhraseEncoderSublayer(nn.Module):
    """Encoder layer k: R^k from the layer's input (Eq. 2-5), then attentive combination (Eq. 7-8); a
    ``seams.SubLayer`` (seam d)."""

    def __init__(self, cfg, segmenter: PhraseSegmenter, glance: str, attentive: bool, combiner: str = "residue"):
        super().__init__()
        self.segmenter = segmenter
        self.represent = PhraseRepresentation(cfg.encoder.embed_dim, glance, attentive)
        self.combine = PhraseAttentiveCombination(
            cfg, cfg.encoder.embed_dim, cfg.encoder.attention_heads, cfg.encoder.normalize_before,
            combiner, cfg.encoder.ffn_embed_dim,
        )

    def forward(self, x, st: LayerContext):
        ctx = st.ctx
        seg = self.segmenter(ctx)
        source = self.combine.layer_norm(x) if self.combine.normalize_before else x
        phrases = self.represent(source, seg)
        ctx.cache.setdefault(PHRASE_REPS, []).append(phrases)
        return self.combine(x, phrases, seg.phrase_padding_mask, query_padding_mask=st.self_attn_padding_mask)


class PhraseEncoderOutput(nn.Module):
    """Adds R^d (from the encoder's output) and, with transparent attention, R^0..R^{d-1} to the encoder output."""

    def __init__(self, embed_dim, segmenter: PhraseSegmenter, glance, attentive, transparent: bool):
        super().__init__()
        self.segmenter = segmenter
        self.represent = PhraseRepresentation(embed_dim, glance, attentive)
        self.transparent = transparent

    def forward(self, out, ctx):
        seg = self.segmenter(ctx)
        top = self.represent(out["encoder_out"][0], seg)
        lower = ctx.cache.get(PHRASE_REPS, [])
        out[PHRASE_REPS] = lower + [top] if self.transparent else [top]
        out[PHRASE_PADDING_MASK] = [seg.phrase_padding_mask]


class PhraseDecoderSublayer(nn.Module):
    """Decoder "phrase_attn", a ``seams.SubLayer`` (seam d): attentive combination (Eq. 7-8) with R^j_d (Eq. 6,
    or the top R^d).

    Eq. 6's weights w^j are initialized uniformly in +-sqrt(1 / (d + 1)) and, in training, get
    DropConnect (dropout on w^j before the softmax) with ``dropconnect``, as the authors' code
    (``sc_tattn_w``; the paper is silent). In incremental decoding the phrase keys and values
    are cached after the first step (static), so the mixture is computed once per sentence.
    """

    def __init__(self, cfg, num_encoder_states: int, transparent: bool, combiner: str = "residue",
                 dropconnect: float = 0.0):
        super().__init__()
        self.combine = PhraseAttentiveCombination(
            cfg, cfg.decoder.embed_dim, cfg.decoder.attention_heads, cfg.decoder.normalize_before,
            combiner, cfg.decoder.ffn_embed_dim,
        )
        self.transparent = transparent
        self.dropconnect = dropconnect
        if transparent:  # Eq. 6: w^j over the embedding layer and every encoder layer
            bound = math.sqrt(1.0 / num_encoder_states)
            self.layer_weights = nn.Parameter(torch.empty(num_encoder_states).uniform_(-bound, bound))

    def mixture_weights(self):
        w = F.dropout(self.layer_weights, p=self.dropconnect, training=self.training)
        return F.softmax(w.float(), dim=0)

    def decoder_phrases(self, reps):
        if not self.transparent:
            return reps[-1]
        if len(reps) != self.layer_weights.numel():
            raise FusionError(
                f"--phrase-transparent-attention: the encoder output has {len(reps)} phrase "
                f"representations, this decoder layer weighs {self.layer_weights.numel()}"
            )
        weights = self.mixture_weights()
        return torch.einsum("l,lpbc->pbc", weights.type_as(reps[0]), torch.stack(reps, dim=0))

    def forward(self, x, st: LayerContext):
        encoder_out = st.ctx.encoder_out
        if encoder_out is None or PHRASE_REPS not in encoder_out:
            raise FusionError(
                "--phrase-representations: the decoder needs the encoder's phrase representations "
                f"('{PHRASE_REPS}' in encoder_out)"
            )
        incremental_state = st.incremental_state
        cached = incremental_state is not None and "prev_key" in self.combine.attn._get_input_buffer(incremental_state)
        # static keys/values cached at the first step: fairseq's attention ignores ``key`` then
        phrases = None if cached else self.decoder_phrases(encoder_out[PHRASE_REPS])
        mask = encoder_out[PHRASE_PADDING_MASK][0]
        return self.combine(x, phrases, mask, incremental_state=incremental_state,
                            query_padding_mask=st.self_attn_padding_mask)
