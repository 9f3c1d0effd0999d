"""Word alignment from encoder attention (Yang et al. 2020, §3.2, Fig. 4).

- AER (Och & Ney 2003): ``scoring/alignment_links.py`` (links read and scored; fusion-aer).
- Alignment from SEM (§3.2): the encoder attention of each decoder layer, heads averaged;
  sub-words are merged back to words (a target word's row is the mean of its sub-words'
  rows, a source word's column the sum of its sub-words' columns); each target word is
  aligned to the one source word with the highest weight (argmax; the source </s> is
  excluded). Reading: the attention row of decoder position t is the one that predicts
  target token t (fairseq's convention for --print-alignment).
- Cumulative coverage (Eq. 2): C<=i = |A_1 ∪ ... ∪ A_i| / N with A_l the source words aligned
  to at least one target word at layer l; counted over the corpus (sums of per-sentence
  unions over the total number of source words N).

Files (formats of ``../shared/data/alignment``: deen, roen, zhen): parallel text
``src ||| tgt`` (tokenized; zhen's Chinese is segmented into words, its English lower-cased);
gold ``i-j`` sure / ``ipj`` possible, 1-indexed, source index first; hypotheses in Pharaoh
``i-j``, 0-indexed unless told otherwise.

The corpus-level pass (streaming, batched, several checkpoints) is in ``alignment_stream``. torch is imported where
it is used.
"""
from __future__ import annotations

import re
from typing import List, Sequence, Tuple

from .common import no_grad
from ..scoring.alignment_links import Links
from fairseq_fusion.guards.text_files import open_text


def read_parallel(path: str) -> List[Tuple[List[str], List[str]]]:
    """Tokenized ``source ||| target`` lines."""
    pairs = []
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split(" ||| ")
            if len(parts) != 2:
                raise ValueError(f"{path}:{n}: expected 'source ||| target', got {line.strip()[:80]!r}")
            pairs.append((parts[0].split(), parts[1].split()))
    return pairs


def check_lengths(gold: List[Tuple[Links, Links]], pairs, path: str):
    if len(gold) != len(pairs):
        raise ValueError(f"{path}: {len(gold)} alignment lines but {len(pairs)} sentence pairs")
    for n, ((_, possible), (src, tgt)) in enumerate(zip(gold, pairs), 1):
        bad = [(i, j) for i, j in possible if i >= len(src) or j >= len(tgt)]
        if bad:
            raise ValueError(f"{path}:{n}: links {sorted(bad)[:3]} (0-indexed) outside {len(src)} source x {len(tgt)} target words")


def word_alignment(attn: torch.Tensor, src_words: Sequence[int], tgt_words: Sequence[int]) -> Links:
    """One (source word, target word) link per target word from sub-word attention.

    ``attn``: target sub-words x source sub-words (the rows/columns to use only);
    ``src_words[k]`` / ``tgt_words[t]``: the word index of source sub-word k / target sub-word t.
    """
    import torch

    n_src, n_tgt = max(src_words) + 1, max(tgt_words) + 1
    attn = attn.float()
    src_index = torch.as_tensor(src_words, device=attn.device)
    tgt_index = torch.as_tensor(tgt_words, device=attn.device)
    by_src = attn.new_zeros(attn.size(0), n_src).index_add_(1, src_index, attn)
    words = by_src.new_zeros(n_tgt, n_src).index_add_(0, tgt_index, by_src)
    counts = torch.bincount(tgt_index, minlength=n_tgt).clamp(min=1).unsqueeze(1)
    words = words / counts
    best = words.argmax(dim=1).tolist()
    return {(s, t) for t, s in enumerate(best)}


def cumulative_coverage(per_layer: Sequence[Sequence[Links]], src_lengths: Sequence[int]) -> List[float]:
    """C<=i (Eq. 2) for each layer i: corpus share of source words aligned at some layer <= i."""
    total = sum(src_lengths)
    covered = [set() for _ in src_lengths]
    out = []
    for layer_links in per_layer:
        for seen, links in zip(covered, layer_links):
            seen.update(i for i, _ in links)
        out.append(sum(len(seen) for seen in covered) / total if total else 0.0)
    return out


def subword_map(word_pieces: Sequence[Sequence[str]]) -> Tuple[List[str], List[int]]:
    """Flatten per-word BPE pieces: (sub-word tokens, word index of each)."""
    tokens, index = [], []
    for w, pieces in enumerate(word_pieces):
        tokens += pieces
        index += [w] * len(pieces)
    return tokens, index


@no_grad
def layer_attentions(model, src_tokens, src_lengths, prev_output_tokens) -> List[torch.Tensor]:
    """Encoder attention of every decoder layer, heads averaged: list of B x T_tgt x T_src."""
    from .common import capture

    names = [f"decoder.layers.{i}.encoder_attn" for i in range(len(model.decoder.layers))]
    with capture(model, names, output_index=1) as records:
        model(src_tokens, src_lengths, prev_output_tokens)
    out = []
    for name in names:
        if not records[name] or records[name][0] is None:
            raise RuntimeError(f"{name} returned no attention weights (is the model in eval mode?)")
        attn = records[name][0]
        # the decoder asks its alignment layer for per-head weights (H x B x T x S)
        out.append(attn.mean(dim=0) if attn.dim() == 4 else attn)
    return out


def file_languages(path: str):
    """('de', 'en') from a file named like ``test.de-en``; None if the name says nothing."""
    m = re.search(r"\.([a-z]{2,3})-([a-z]{2,3})$", path)
    return (m.group(1), m.group(2)) if m else None


def model_direction(task, file_langs, swap=None) -> bool:
    """Whether to feed the file's target side to the model as its source (``swap``).

    ``swap`` given explicitly wins; else it is decided from the model's languages and the
    file's (``file_langs``), and an unknown or unrelated pair is an error naming the flags.
    """
    if swap is not None:
        return swap
    model_langs = (getattr(task.cfg, "source_lang", None), getattr(task.cfg, "target_lang", None))
    if file_langs is None:
        raise ValueError("--parallel: cannot tell its languages from the name; pass --file-langs SRC-TGT (e.g. de-en)")
    if tuple(file_langs) == model_langs:
        return False
    if tuple(reversed(file_langs)) == model_langs:
        return True
    raise ValueError(
        f"--parallel is {file_langs[0]}-{file_langs[1]} but the model translates "
        f"{model_langs[0]}-{model_langs[1]}; pass --swap or --no-swap to force a direction"
    )


def load_bpe(codes_path):
    if codes_path is None:
        return None
    from subword_nmt.apply_bpe import BPE

    with open(codes_path, encoding="utf-8") as f:
        return BPE(f)


def encode_words(words, dictionary, bpe):
    """Token ids (with </s>) and the word index of each sub-word (</s> excluded)."""
    pieces = [bpe.segment_tokens([w]) if bpe is not None else [w] for w in words]
    tokens, index = subword_map(pieces)
    ids = dictionary.encode_line(" ".join(tokens), add_if_not_exist=False, append_eos=True).long()
    return ids, index


