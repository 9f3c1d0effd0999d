"""Source phrase representations in the Transformer (Xu et al. 2020, ACL, §3).

- ``PhraseRepresentation``: Eq. 2-5. R_all = F_glance(R_t1..R_tm) (mean or max-over-time);
  s_i = W2 sigmoid(W1 [R_ti | R_all] + b1) + b2; p_i = softmax_i(s_i) over the phrase's own
  tokens (padding excluded); R_phrase = sum_i p_i R_ti. Without ``attentive`` (Table 2,
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
import torch
import torch.nn.functional as F
from fairseq.modules import LayerNorm, MultiheadAttention
from fairseq.modules.fairseq_dropout import FairseqDropout
from torch import Tensor, nn

from .phrase_segmentation import PhraseSegmenter, Segmentation

PHRASE_REPS = "phrase_reps"
PHRASE_PADDING_MASK = "phrase_padding_mask"


class PhraseRepresentation(nn.Module):
    """Eq. 2-5: one vector per phrase from the vectors of its tokens (P x B x C)."""

    def __init__(self, embed_dim: int, glance: str = "max", attentive: bool = True):
        super().__init__()
        if glance not in ("mean", "max"):
            raise ValueError(f"--phrase-glance: expected 'mean' or 'max', got {glance!r}")
        self.glance = glance
        self.attentive = attentive
        if attentive:
            self.w1 = nn.Linear(2 * embed_dim, embed_dim)
            self.w2 = nn.Linear(embed_dim, 1)

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
    """Eq. 7-8 with residual connection and layer normalization (post- or pre-norm)."""

    def __init__(self, cfg, embed_dim: int, heads: int, normalize_before: bool):
        super().__init__()
        self.attn = MultiheadAttention(
            embed_dim, heads, dropout=cfg.attention_dropout, encoder_decoder_attention=True
        )
        self.w3 = nn.Linear(2 * embed_dim, embed_dim)
        self.w4 = nn.Linear(embed_dim, embed_dim)
        self.layer_norm = LayerNorm(embed_dim)
        self.dropout_module = FairseqDropout(cfg.dropout, module_name=type(self).__name__)
        self.normalize_before = normalize_before

    def forward(self, x, phrases, phrase_padding_mask, incremental_state=None):
        residual = x
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
        out = self.w4(torch.sigmoid(self.w3(torch.cat([x, out_phrase], dim=-1))))  # Eq. 8
        x = residual + self.dropout_module(out)
        if not self.normalize_before:
            x = self.layer_norm(x)
        return x


class PhraseEncoderSublayer(nn.Module):
    """Encoder layer k: R^k from the layer's input (Eq. 2-5), then attentive combination (Eq. 7-8)."""

    def __init__(self, cfg, segmenter: PhraseSegmenter, glance: str, attentive: bool):
        super().__init__()
        self.segmenter = segmenter
        self.represent = PhraseRepresentation(cfg.encoder.embed_dim, glance, attentive)
        self.combine = PhraseAttentiveCombination(
            cfg, cfg.encoder.embed_dim, cfg.encoder.attention_heads, cfg.encoder.normalize_before
        )

    def forward(self, x, st):
        ctx = st["ctx"]
        seg = self.segmenter(ctx)
        source = self.combine.layer_norm(x) if self.combine.normalize_before else x
        phrases = self.represent(source, seg)
        ctx.setdefault(PHRASE_REPS, []).append(phrases)
        return self.combine(x, phrases, seg.phrase_padding_mask)


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
        lower = ctx.get(PHRASE_REPS, [])
        out[PHRASE_REPS] = lower + [top] if self.transparent else [top]
        out[PHRASE_PADDING_MASK] = [seg.phrase_padding_mask]


class PhraseDecoderSublayer(nn.Module):
    """Decoder "phrase_attn": attentive combination (Eq. 7-8) with R^j_d (Eq. 6, or the top R^d)."""

    def __init__(self, cfg, num_encoder_states: int, transparent: bool):
        super().__init__()
        self.combine = PhraseAttentiveCombination(
            cfg, cfg.decoder.embed_dim, cfg.decoder.attention_heads, cfg.decoder.normalize_before
        )
        self.transparent = transparent
        if transparent:  # Eq. 6: w^j over the embedding layer and every encoder layer
            self.layer_weights = nn.Parameter(torch.zeros(num_encoder_states))

    def decoder_phrases(self, reps):
        if not self.transparent:
            return reps[-1]
        if len(reps) != self.layer_weights.numel():
            raise ValueError(
                f"--phrase-transparent-attention: the encoder output has {len(reps)} phrase "
                f"representations, this decoder layer weighs {self.layer_weights.numel()}"
            )
        weights = F.softmax(self.layer_weights, dim=0)
        return torch.einsum("l,lpbc->pbc", weights.type_as(reps[0]), torch.stack(reps, dim=0))

    def forward(self, x, st):
        encoder_out = st["ctx"]["encoder_out"]
        if encoder_out is None or PHRASE_REPS not in encoder_out:
            raise ValueError(
                "--phrase-representations: the decoder needs the encoder's phrase representations "
                f"('{PHRASE_REPS}' in encoder_out)"
            )
        phrases = self.decoder_phrases(encoder_out[PHRASE_REPS])
        mask = encoder_out[PHRASE_PADDING_MASK][0]
        return self.combine(x, phrases, mask, incremental_state=st["incremental_state"])
