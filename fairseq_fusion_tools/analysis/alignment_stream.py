"""Corpus-scale alignment analysis that streams (Yang et al. 2020, §3.2, Eq. 2, Fig. 4).

Sentence pairs and gold lines are read one at a time, aligned in batches, and only running
counts are kept: per layer |A|, |S|, |A∩S|, |A∩P| (AER) and the covered source words of
C<=i (Eq. 2), in ``AlignmentStats`` (``scoring/alignment_links.py``). Memory does not grow with the number of
sentences. torch is imported where it is used.
"""
import itertools
from typing import Iterable, Iterator, List, Optional, Tuple

from fairseq_fusion.guards.text_files import open_text

from . import alignment
from .common import no_grad
from ..scoring.alignment_links import AlignmentStats, reverse_links


def iter_parallel(path: str) -> Iterator[Tuple[List[str], List[str]]]:
    """Tokenized ``source ||| target`` lines, one pair at a time."""
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split(" ||| ")
            if len(parts) != 2:
                raise ValueError(f"{path}:{n}: expected 'source ||| target', got {line.strip()[:80]!r}")
            yield parts[0].split(), parts[1].split()


def zip_strict(a: Iterable, b: Iterable, a_name: str, b_name: str):
    """zip that names both files when one is shorter."""
    missing = object()
    for n, (x, y) in enumerate(itertools.zip_longest(a, b, fillvalue=missing), 1):
        if x is missing or y is missing:
            short = a_name if x is missing else b_name
            raise ValueError(f"{short} ends at line {n - 1} but {b_name if x is missing else a_name} goes on")
        yield x, y


def dictionary_is_cased(dictionary) -> bool:
    """Whether a fairseq dictionary holds upper-case letters (the model was trained cased)."""
    return any(sym != sym.lower() for sym in dictionary.symbols[dictionary.nspecial:])


def lowercase_sides(task, lowercase: Optional[bool]) -> Tuple[bool, bool]:
    """(lowercase the model's source words, its target words): ``lowercase`` if given, else
    each side as its dictionary needs (lower-case only when the dictionary has no capitals)."""
    if lowercase is not None:
        return lowercase, lowercase
    return (not dictionary_is_cased(task.source_dictionary), not dictionary_is_cased(task.target_dictionary))


def _prepare(pair, task, bpe, swap, lower):
    src_words, tgt_words = (pair[1], pair[0]) if swap else pair
    src_words = [w.lower() for w in src_words] if lower[0] else src_words
    tgt_words = [w.lower() for w in tgt_words] if lower[1] else tgt_words
    src_ids, src_index = alignment.encode_words(src_words, task.source_dictionary, bpe)
    tgt_ids, tgt_index = alignment.encode_words(tgt_words, task.target_dictionary, bpe)
    return src_ids, src_index, tgt_ids, tgt_index


@no_grad
def align_batches(model, task, pairs: Iterable, bpe=None, swap=False, lower=(False, False), batch_size=32):
    """For each file pair: (per-layer links in file order (source word, target word), number
    of unknown sub-words). The model reads the file's source side (its target side when
    ``swap``) and forced-decodes the other; each of its target words gets one source word."""
    import torch
    from fairseq.data import data_utils

    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    device = next(model.parameters()).device
    it = iter(pairs)
    while True:
        chunk = list(itertools.islice(it, batch_size))
        if not chunk:
            return
        items = [_prepare(p, task, bpe, swap, lower) for p in chunk]
        src = data_utils.collate_tokens([x[0] for x in items], src_dict.pad(), left_pad=True)
        prev = data_utils.collate_tokens([x[2] for x in items], tgt_dict.pad(), tgt_dict.eos(), move_eos_to_beginning=True)
        lengths = torch.tensor([len(x[0]) for x in items])
        attns = alignment.layer_attentions(model, src.to(device), lengths.to(device), prev.to(device))
        width = src.size(1)
        for b, (src_ids, src_index, tgt_ids, tgt_index) in enumerate(items):
            unk = int((src_ids == src_dict.unk()).sum() + (tgt_ids == tgt_dict.unk()).sum())
            start = width - len(src_ids)  # sources are left-padded
            n_src, n_tgt = len(src_index), len(tgt_index)
            per_layer = []
            for attn in attns:
                links = alignment.word_alignment(attn[b, :n_tgt, start: start + n_src].cpu(), src_index, tgt_index)
                per_layer.append(reverse_links(links) if swap else links)
            yield per_layer, unk


def analyze_stream(model, task, pairs: Iterable, gold: Optional[Iterable] = None, bpe=None, swap=False,
                   lower=(False, False), batch_size=32, progress=True):
    """Stream ``pairs`` (and ``gold``, one (sure, possible) per pair) through the model.
    Returns (rows per layer, sentences, unknown sub-words). C<=i counts the model's source
    words: the file's target side when ``swap``."""
    from ..progress import progress as progress_bar

    stats = AlignmentStats(len(model.decoder.layers))
    if gold is not None:
        pairs, gold_a = _tee_pairs(pairs, gold)
    else:
        gold_a = itertools.repeat(None)
    pairs, lengths = itertools.tee(pairs)
    unk = 0
    source_of = (lambda link: link[1]) if swap else (lambda link: link[0])
    results = align_batches(model, task, pairs, bpe, swap, lower, batch_size)
    for (per_layer, n_unk), pair, g in progress_bar(zip(results, lengths, gold_a), show=progress, desc="align"):
        model_source = pair[1] if swap else pair[0]
        stats.add(per_layer, len(model_source), g, source_of)
        unk += n_unk
    return stats.layers(gold is not None), stats.sentences, unk


def _tee_pairs(pairs, gold):
    """(pairs, gold) iterators in lockstep, checking each gold link falls inside its pair."""
    checked = _checked(pairs, gold)
    a, b = itertools.tee(checked)
    return (p for p, _ in a), (g for _, g in b)


def _checked(pairs, gold):
    for n, (pair, g) in enumerate(zip_strict(pairs, gold, "--parallel", "--gold"), 1):
        src, tgt = pair
        bad = [(i, j) for i, j in g[1] if i >= len(src) or j >= len(tgt)]
        if bad:
            raise ValueError(f"--gold line {n}: links {sorted(bad)[:3]} (0-indexed) outside {len(src)} source x {len(tgt)} target words")
        yield pair, g


def plot(entries, title=""):
    """AER (a) and C<=i (b) by decoder layer, one line per checkpoint (Figs. 4-7 overlaid)."""
    from ..outputs import checkpoint_styles, figure_title, mark_narrow_range, new_figure

    with_aer = all("aer" in r for e in entries for r in e["layers"])
    fig, axes = new_figure(1, 2 if with_aer else 1, figsize=(9 if with_aer else 4.8, 3.4), squeeze=False)
    axes = axes[0]
    for entry, style in zip(entries, checkpoint_styles(len(entries))):
        xs = [r["layer"] for r in entry["layers"]]
        label = entry.get("label")
        if with_aer:
            axes[0].plot(xs, [r["aer"] for r in entry["layers"]], label=label, **style)
        axes[-1].plot(xs, [r["cumulative_coverage"] for r in entry["layers"]], label=label, **style)
        for ax in axes:
            ax.set_xticks(xs)
    if with_aer:
        axes[0].set(xlabel="decoder layer", ylabel="AER", title="(a) alignment error rate of SEM")
    axes[-1].set(xlabel="decoder layer", ylabel="C<=i", title=("(b) " if with_aer else "") + "cumulative coverage (Eq. 2)",
                 ylim=(0, 1.05))
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if with_aer:
        mark_narrow_range(axes[0])  # AER drawn to the data's range; the coverage on [0, 1]
    if title:
        figure_title(fig, title, fontsize=9)
    return fig
