"""n-gram and span segmentation of a padded source batch (Xu et al. 2020, footnote 2)."""
import math

import pytest
import torch

from fairseq_fusion.modules.phrase_segmentation import (
    PhraseSegmenter,
    ngram_phrase_ids,
    ngram_phrase_size,
    ngram_segmentation_size,
    segmentation_from_ids,
    span_phrase_ids,
)

PAD = 1


def reference_ntok(seql, rounding="ceil"):
    """Footnote 2 as plain Python: ntok = max(min(8, seql / 6), 3), seql / 6 rounded to whole tokens."""
    return max(min(8, (math.ceil if rounding == "ceil" else math.floor)(seql / 6)), 3)


def reference_phrases(n_tokens, rounding="ceil"):
    """[[token ranks of phrase 0], ...] for a sentence of n_tokens tokens."""
    ntok = reference_ntok(n_tokens, rounding)
    return [list(range(s, min(s + ntok, n_tokens))) for s in range(0, n_tokens, ntok)]


def padded_batch(lengths, left_pad=True):
    width = max(lengths)
    tokens = torch.full((len(lengths), width), PAD)
    for b, n in enumerate(lengths):
        real = torch.arange(4, 4 + n)
        if left_pad:
            tokens[b, width - n:] = real
        else:
            tokens[b, :n] = real
    return tokens


def phrases_of(seg, b, tokens):
    """Token positions of each real phrase of sentence b, read from the gather index and masks."""
    out = []
    for p in range(seg.index.size(1)):
        if seg.phrase_padding_mask[b, p]:
            assert not seg.token_mask[b, p].any()
            continue
        out.append(seg.index[b, p][seg.token_mask[b, p]].tolist())
    return out


@pytest.mark.parametrize("rounding,seql,ntok", [
    ("floor", 1, 3), ("floor", 2, 3), ("floor", 17, 3), ("floor", 18, 3), ("floor", 24, 4), ("floor", 35, 5),
    ("floor", 47, 7), ("floor", 48, 8), ("floor", 300, 8),
    ("ceil", 1, 3), ("ceil", 18, 3), ("ceil", 19, 4), ("ceil", 24, 4), ("ceil", 25, 5), ("ceil", 35, 6),
    ("ceil", 42, 7), ("ceil", 43, 8), ("ceil", 300, 8),
])
def test_phrase_size_formula(rounding, seql, ntok):
    """Hand-computed sizes; ceil is the default (the authors' code)."""
    assert int(ngram_phrase_size(torch.tensor(seql), rounding)) == ntok == reference_ntok(seql, rounding)
    if rounding == "ceil":
        assert int(ngram_phrase_size(torch.tensor(seql))) == ntok


def test_phrase_size_rounding_reaches_the_segmenter():
    tokens = padded_batch([35, 7])
    ceil = PhraseSegmenter("ngram", PAD).segment(tokens, {})
    floor = PhraseSegmenter("ngram", PAD, "floor").segment(tokens, {})
    assert [len(p) for p in phrases_of(ceil, 0, tokens)] == [6] * 5 + [5]
    assert [len(p) for p in phrases_of(floor, 0, tokens)] == [5] * 7
    # a value outside the flag's choices: refused by the registry (tests/test_flag_values.py)


@pytest.mark.parametrize("left_pad", [True, False])
def test_ngram_phrases_use_each_sentence_own_length(left_pad):
    # length 1, shorter than 3, exact multiples (12 = 4 x 3, 48 = 6 x 8), long (250), ragged
    lengths = [1, 2, 3, 12, 13, 48, 49, 250]
    tokens = padded_batch(lengths, left_pad)
    seg = PhraseSegmenter("ngram", PAD).segment(tokens, {})
    width = tokens.size(1)
    for b, n in enumerate(lengths):
        offset = width - n if left_pad else 0
        expected = [[offset + r for r in phrase] for phrase in reference_phrases(n)]
        assert phrases_of(seg, b, tokens) == expected, f"length {n}"
    # the padded batch length (250) must not change the short sentences' phrase size
    assert len(phrases_of(seg, 3, tokens)) == 4 and len(phrases_of(seg, 1, tokens)) == 1


def test_last_phrase_padded_and_padding_never_in_a_phrase():
    tokens = padded_batch([7, 20])
    seg = PhraseSegmenter("ngram", PAD).segment(tokens, {})
    real = tokens.ne(PAD)
    picked = tokens.gather(1, seg.index.flatten(1)).view_as(seg.index)
    assert not picked[seg.token_mask].eq(PAD).any()
    # every real token is in exactly one phrase
    counts = torch.zeros_like(tokens)
    for b in range(2):
        counts[b].index_add_(0, seg.index[b][seg.token_mask[b]], torch.ones_like(seg.index[b][seg.token_mask[b]]))
    assert torch.equal(counts, real.long())
    # sentence 0: 7 tokens, ntok 3 -> phrases 3, 3, 1 (last one padded); sentence 1: 20 tokens,
    # ntok ceil(20 / 6) = 4 -> 5 phrases, so the batch has 5 phrase slots
    assert seg.token_mask[0].sum(dim=1).tolist()[:3] == [3, 3, 1]
    assert seg.phrase_padding_mask[0].tolist() == [False] * 3 + [True] * 2


def test_spans_give_phrases_and_eos_phrase():
    tokens = padded_batch([6, 3])  # 5 and 2 sub-words + </s>
    lengths = torch.tensor([[2, 3], [2, 0]])
    ids = span_phrase_ids(tokens.eq(PAD), lengths)
    assert ids.tolist() == [[0, 0, 1, 1, 1, 2], [-1, -1, -1, 0, 0, 1]]
    seg = segmentation_from_ids(ids)
    assert phrases_of(seg, 0, tokens) == [[0, 1], [2, 3, 4], [5]]
    assert phrases_of(seg, 1, tokens) == [[3, 4], [5]]


def test_spans_that_do_not_cover_the_sentence_are_rejected():
    tokens = padded_batch([6])
    with pytest.raises(ValueError, match="cover 4 sub-words but it has 5"):
        span_phrase_ids(tokens.eq(PAD), torch.tensor([[2, 2]]))


def test_parse_mode_without_spans_names_the_task():
    with pytest.raises(ValueError, match="translation_with_phrases"):
        PhraseSegmenter("parse", PAD).segment(padded_batch([4]), {})


@pytest.mark.parametrize("rounding", ["ceil", "floor"])
def test_ngram_ids_match_reference_for_every_length(rounding):
    lengths = list(range(1, 120))
    ids = ngram_phrase_ids(padded_batch(lengths).eq(PAD), rounding)
    for b, n in enumerate(lengths):
        expected = [p for p, phrase in enumerate(reference_phrases(n, rounding)) for _ in phrase]
        assert ids[b, -n:].tolist() == expected
        assert (ids[b, :-n] == -1).all()


@pytest.mark.parametrize("rounding", ["ceil", "floor"])
def test_segmentation_size_from_the_padded_length_fits_every_shorter_sentence(rounding):
    for seq_len in range(1, 120):
        phrases = [reference_phrases(n, rounding) for n in range(1, seq_len + 1)]
        expected = max(len(p) for p in phrases), max(len(ph) for p in phrases for ph in p)
        assert ngram_segmentation_size(seq_len, rounding) == expected, seq_len


def test_segmentation_sized_from_the_padded_length_has_the_same_phrases(monkeypatch):
    """Off the CPU, P x M come from the padded length (no host read): the same phrases, more empty slots."""
    from fairseq_fusion import host_sync

    tokens = padded_batch([19, 7, 2])  # 19 tokens: 5 phrases of 4; the size for 18 tokens: 6 phrases
    exact = PhraseSegmenter("ngram", PAD).segment(tokens, {})
    monkeypatch.setattr(host_sync, "host_reads_are_free", lambda tensor: False)
    sized = PhraseSegmenter("ngram", PAD).segment(tokens, {})
    assert exact.index.shape == (3, 5, 4) and sized.index.shape == (3, 6, 4)
    for b in range(3):
        assert phrases_of(sized, b, tokens) == phrases_of(exact, b, tokens)
    assert sized.phrase_padding_mask[:, 5].all() and not sized.token_mask[:, 5].any()
