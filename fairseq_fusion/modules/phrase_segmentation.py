"""Phrase segmentation of a source batch (Xu et al. 2020, §3 "Transformer with Phrase Representation").

A segmentation is given per token as its phrase id (``-1`` on padding) and turned into a
gather index ``B x P x M`` (P phrases, M tokens per phrase slot) with a token mask, so that
padding never enters a phrase representation, and a phrase padding mask ``B x P`` for the
attention over phrases.

- n-gram phrases (footnote 2): ``ntok = max(min(8, seql / 6), 3)`` tokens per phrase, with
  ``seql`` the sentence's own length (its non-padding tokens, the final ``</s>`` included),
  never the padded batch length; the last phrase is shorter (padded). ``seql / 6`` is rounded
  up by default, as the authors' code (``ceil``; ``--phrase-size-rounding floor`` rounds down).
- parse-tree phrases (Algorithm 1, see ``phrase_parse_tree``): the task passes each
  sentence's phrase lengths in sub-words (``net_input["src_phrase_lengths"]``, B x K, 0 =
  no phrase); ``</s>`` forms one more phrase of its own.
Both are computed from token ranks (position among the sentence's own tokens), so the
result does not depend on the side or amount of padding.

P and M are the batch's exact sizes where reading them is free (the CPU). Elsewhere n-gram
phrases take the sizes every sentence of the padded length fits in (``ngram_segmentation_size``,
from the shape alone): more empty, masked slots at most, and no host sync per forward.
"""
from typing import NamedTuple

import torch
from torch import Tensor
from .. import host_sync
from ..errors import FusionError

PHRASE_LENGTHS_KEY = "src_phrase_lengths"


ROUNDINGS = ("ceil", "floor")


def ngram_phrase_size(seql, rounding: str = "ceil"):
    """Footnote 2: ntok = max(min(8, seql / 6), 3), seql / 6 rounded up (ceil) or down (floor),
    elementwise on sentence lengths (a tensor, or one length as an int)."""
    if rounding not in ROUNDINGS:
        raise FusionError(f"--phrase-size-rounding: expected one of {list(ROUNDINGS)}, got {rounding!r}")
    size = -((-seql) // 6) if rounding == "ceil" else seql // 6
    return size.clamp(min=3, max=8) if isinstance(size, Tensor) else min(max(size, 3), 8)


def ngram_segmentation_size(seq_len: int, rounding: str = "ceil"):
    """(P, M): phrase slots and tokens per slot that the n-gram phrases of every sentence of at most
    ``seq_len`` tokens fit in (the phrase count is not monotone in the length: 18 tokens make 6
    phrases of 3, 19 make 5 of 4)."""
    sizes = [(n, ngram_phrase_size(n, rounding)) for n in range(1, seq_len + 1)]
    return max((-(-n // k) for n, k in sizes), default=1), max((min(n, k) for n, k in sizes), default=1)


class Segmentation(NamedTuple):
    index: Tensor  # B x P x M token positions (0 where masked)
    token_mask: Tensor  # B x P x M, True for a real token of the phrase
    phrase_padding_mask: Tensor  # B x P, True for a phrase slot without tokens


def token_ranks(padding_mask: Tensor) -> Tensor:
    """Rank of each token among its sentence's real tokens (B x T); -1 on padding."""
    real = ~padding_mask
    return torch.where(real, real.long().cumsum(dim=1) - 1, torch.full_like(padding_mask, -1, dtype=torch.long))


def ngram_phrase_ids(padding_mask: Tensor, rounding: str = "ceil") -> Tensor:
    """Phrase id of each token (B x T, -1 on padding) for n-gram phrases of the sentence's own size."""
    ranks = token_ranks(padding_mask)
    ntok = ngram_phrase_size((~padding_mask).sum(dim=1, keepdim=True), rounding)
    return torch.where(ranks >= 0, torch.div(ranks, ntok, rounding_mode="floor"), ranks)


def span_phrase_ids(padding_mask: Tensor, phrase_lengths: Tensor) -> Tensor:
    """Phrase id of each token from phrase lengths (B x K sub-words, 0 = none); ``</s>`` is the last phrase."""
    ranks = token_ranks(padding_mask)
    n_tokens = (~padding_mask).sum(dim=1)
    covered = phrase_lengths.sum(dim=1)
    bad = (covered != n_tokens - 1).nonzero()
    if bad.numel() > 0:
        b = int(bad[0, 0])
        raise FusionError(
            f"{PHRASE_LENGTHS_KEY}: the phrases of sentence {b} of the batch cover {int(covered[b])} "
            f"sub-words but it has {int(n_tokens[b]) - 1} (+ </s>): the phrase-span file does not "
            "match the binarized source (re-run fusion-parse-spans on this data)"
        )
    ends = phrase_lengths.cumsum(dim=1).masked_fill(phrase_lengths == 0, torch.iinfo(torch.long).max)
    ids = (ranks.unsqueeze(-1) >= ends.unsqueeze(1)).sum(dim=-1)
    return torch.where(ranks >= 0, ids, ranks)


def segmentation_from_ids(phrase_ids: Tensor, size=None) -> Segmentation:
    """Gather index, token mask and phrase padding mask from contiguous per-token phrase ids.

    ``size``: (P, M) that the phrases fit in (no read of the ids on the host); default the exact ones."""
    bsz, seq_len = phrase_ids.shape
    device = phrase_ids.device
    real = phrase_ids >= 0
    safe_ids = phrase_ids.clamp(min=0)
    n_phrases = int(safe_ids.max()) + 1 if size is None else size[0]
    counts = torch.zeros(bsz, n_phrases, dtype=torch.long, device=device)
    counts.scatter_add_(1, safe_ids, real.long())
    starts = counts.cumsum(dim=1) - counts
    pos = token_ranks(~real) - starts.gather(1, safe_ids)
    width = max(int(counts.max()), 1) if size is None else size[1]
    # each real token to its slot of the flattened P x M; padding to one more slot, dropped after
    slot = torch.where(real, safe_ids * width + pos, n_phrases * width)
    positions = torch.arange(seq_len, device=device).expand(bsz, seq_len)
    index = torch.zeros(bsz, n_phrases * width + 1, dtype=torch.long, device=device).scatter_(1, slot, positions)
    token_mask = torch.zeros(bsz, n_phrases * width + 1, dtype=torch.bool, device=device).scatter_(1, slot, real)
    shape = (bsz, n_phrases, width)
    return Segmentation(index[:, :-1].reshape(shape), token_mask[:, :-1].reshape(shape), counts == 0)


class PhraseSegmenter:
    """Segments the encoder's batch once per forward (cached in the encoder's layer context)."""

    CTX_KEY = "phrase_segmentation"

    def __init__(self, mode: str, padding_idx: int, rounding: str = "ceil"):
        self.mode = mode
        self.padding_idx = padding_idx
        self.rounding = rounding

    def __call__(self, ctx) -> Segmentation:
        seg = ctx.cache.get(self.CTX_KEY)
        if seg is None:
            seg = ctx.inputs.get(self.CTX_KEY)  # computed before a compiled forward (``eager_input``)
            if seg is None:
                seg = self.segment(ctx.src_tokens, ctx.inputs)
            ctx.cache[self.CTX_KEY] = seg
        return seg

    def eager_input(self, src_tokens: Tensor, inputs):
        """The encoder's ``eager_input_hooks``: the segmentation, whose sizes are read from the batch, computed
        before a ``--fusion-compile``d forward (the same function, so the same tensors), not inside its graph."""
        return {self.CTX_KEY: self.segment(src_tokens, inputs)}

    def segment(self, src_tokens: Tensor, inputs) -> Segmentation:
        padding_mask = src_tokens.eq(self.padding_idx)
        if self.mode == "ngram":
            size = None if host_sync.host_reads_are_free(src_tokens) else ngram_segmentation_size(src_tokens.size(1), self.rounding)
            return segmentation_from_ids(ngram_phrase_ids(padding_mask, self.rounding), size)
        lengths = inputs.get(PHRASE_LENGTHS_KEY)
        if lengths is None:
            raise FusionError(
                f"--phrase-segmentation parse needs the phrase spans of each source sentence "
                f"(net_input['{PHRASE_LENGTHS_KEY}']) and this batch has none. Binarized data (fairseq-train, "
                "fairseq-generate): --task translation_with_phrases with a span file from fusion-parse-spans. Raw "
                "input (fairseq-interactive, the hub's translate, fusion-contrastive-score): --task "
                "translation_with_phrases with --phrase-trees FILE (the input's parse trees) or --phrase-parser stanza"
            )
        return segmentation_from_ids(span_phrase_ids(padding_mask, lengths.to(src_tokens.device)))
