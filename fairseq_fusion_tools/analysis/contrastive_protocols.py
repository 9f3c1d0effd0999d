"""How contrastive scores become accuracies: LingEval97's and ContraWSD's protocols.

- ``lingeval97`` (rsennrich/lingeval97 ``evaluate.py``, ``count_errors``): every (reference,
  contrastive) pair is one decision, counted in its own error type (``errors[].type``), right when
  the reference scores strictly higher. The same pairs are also counted by distance (bins "0",
  "1" ... "15", ">15"; pairs without a distance are left out of that table) and by training-set
  frequency (its bins, see ``LINGEVAL97_FREQUENCY_BINS``). ``--categories`` there / ``categories``
  here keeps only the named error types, in every table. On the LingEval97 README's example item
  (3 errors; reference preferred over 2 of them) this gives 2/3, where the ContraWSD rule gives 0/1.
- ``contrawsd`` (ZurichNLP/ContraWSD ``evaluate.py``): an item (a reference with all its
  variants) is right when its reference scores strictly higher than every variant; counted per
  ``"ambig word:sense"`` (else per error type), per ambiguous word, and by the sense's absolute
  training frequency in ContraWSD's bins.

Xu et al. (2020, Fig. 4) report LingEval97 subject-verb agreement accuracy by distance "following
Tang et al. (2018)"; the figure's axis is not in the text, so the bins are LingEval97's own
(``evaluate.py``'s ``DISTANCE_BINS``), which Tang et al.'s scripts use.
"""
from collections import OrderedDict
from typing import Dict, List, Optional

PROTOCOLS = ("lingeval97", "contrawsd")

# lingeval97 evaluate.py: distance 0, each of 1..15, everything else ">15"
DISTANCE_BINS = ["0"] + [str(i) for i in range(1, 16)] + [">15"]

# lingeval97 evaluate.py's frequency bins, (name, lowest, highest). Its table maps 5 to ">2" (the
# ranges of ">5" and ">2" overlap at 5 and the later one wins); kept, to count as it does.
LINGEVAL97_FREQUENCY_BINS = [(">10k", 10001, None), (">5k", 5001, 10000), (">2k", 2001, 5000), (">1k", 1001, 2000),
                             (">500", 501, 1000), (">200", 201, 500), (">100", 101, 200), (">50", 51, 100),
                             (">20", 21, 50), (">10", 11, 20), (">5", 6, 10), (">2", 3, 5), ("2", 2, 2), ("1", 1, 1),
                             ("0", 0, 0)]
# ContraWSD evaluate.py's bins of the sense's absolute frequency
CONTRAWSD_FREQUENCY_BINS = [(">10k", 10001, None), (">5k", 5001, 10000), (">2k", 2001, 5000), (">1k", 1001, 2000),
                            (">500", 501, 1000), (">200", 201, 500), (">100", 101, 200), (">50", 51, 100),
                            (">20", 21, 50), ("0-20", 0, 20)]


def distance_bin(d: Optional[int]) -> Optional[str]:
    if d is None:
        return None
    return str(d) if 0 <= d <= 15 else ">15"


def frequency_bin(f: Optional[int], bins=LINGEVAL97_FREQUENCY_BINS) -> Optional[str]:
    """The bin of ``f``; values in no range (above the top, negative) go to the first bin, as in evaluate.py."""
    if f is None:
        return None
    for name, lo, hi in bins[1:]:
        if lo <= f <= hi:
            return name
    return bins[0][0]


def choose_protocol(items, requested: str, path: str) -> str:
    """``requested`` unless "auto": line-aligned folders -> lingeval97 (one variant an item, so both rules
    agree); JSON -> contrawsd when every item has an "ambig word" (ContraWSD/MuCoW schema), lingeval97
    when none has (LingEval97 schema); a mix is an error asking for --protocol."""
    if requested != "auto":
        if requested not in PROTOCOLS:
            raise ValueError(f"--protocol {requested!r}: expected auto or one of {PROTOCOLS}")
        return requested
    if not path.endswith((".json", ".json.gz")):
        return "lingeval97"
    with_word = sum(it.word is not None for it in items)
    if with_word == len(items):
        return "contrawsd"
    if with_word == 0:
        return "lingeval97"
    raise ValueError(f"{path}: {with_word} of {len(items)} items have an 'ambig word': cannot tell ContraWSD from "
                     f"LingEval97 format; give --protocol lingeval97 or --protocol contrawsd")


def _acc(xs):
    return {"accuracy": sum(xs) / len(xs) if xs else 0.0, "correct": sum(xs), "total": len(xs)}


def _ordered(table: Dict[str, list], order: List[str]):
    return OrderedDict((k, _acc(table[k])) for k in order if k in table)


def lingeval97(items, value, categories=None) -> dict:
    """LingEval97's pairwise count; ``value(source, target)`` is a translation's score (higher = better)."""
    pairs, cats, dist, freq = [], {}, {}, {}
    for it in items:
        ref = value(it.source, it.reference)
        n = len(it.contrastive)
        for c, t, d, f in zip(it.contrastive, it.types, it.distances or [None] * n, it.frequencies or [None] * n):
            if categories is not None and t not in categories:
                continue
            con = value(it.source, c)
            ok = ref > con
            pairs.append({"where": it.where, "type": t, "distance": d, "frequency": f, "reference_score": ref,
                          "contrastive_score": con, "correct": ok})
            cats.setdefault(t, []).append(ok)
            if d is not None:
                dist.setdefault(distance_bin(d), []).append(ok)
            if f is not None:
                freq.setdefault(frequency_bin(f), []).append(ok)
    result = {"protocol": "lingeval97", "unit": "(reference, contrastive) pair",
              "overall": _acc([p["correct"] for p in pairs]),
              "by_category": {k: _acc(v) for k, v in sorted(cats.items())}, "pairs": pairs}
    if dist:
        result["by_distance"] = _ordered(dist, DISTANCE_BINS)
    if freq:
        result["by_frequency"] = _ordered(freq, [b[0] for b in LINGEVAL97_FREQUENCY_BINS])
    return result


def contrawsd(items, value, categories=None) -> dict:
    """ContraWSD's rule per item; ``categories`` keeps items whose category, ambiguous word or error type is named."""
    rows, cats, words, freq = [], {}, {}, {}
    for it in items:
        if categories is not None and not categories & {it.category, it.word, *it.types}:
            continue
        ref = value(it.source, it.reference)
        con = [value(it.source, c) for c in it.contrastive]
        ok = all(ref > c for c in con)
        rows.append({"where": it.where, "category": it.category, "reference_score": ref, "contrastive_scores": con,
                     "correct": ok})
        cats.setdefault(it.category, []).append(ok)
        if it.word is not None:
            words.setdefault(it.word, []).append(ok)
        if it.sense_frequency is not None:
            freq.setdefault(frequency_bin(it.sense_frequency, CONTRAWSD_FREQUENCY_BINS), []).append(ok)
    result = {"protocol": "contrawsd", "unit": "item (reference vs. all its variants)",
              "overall": _acc([r["correct"] for r in rows]),
              "by_category": {k: _acc(v) for k, v in sorted(cats.items())}, "items": rows}
    if words:
        result["by_word"] = {k: _acc(v) for k, v in sorted(words.items())}
    if freq:
        result["by_frequency"] = _ordered(freq, [b[0] for b in CONTRAWSD_FREQUENCY_BINS])
    return result


def evaluate(items, scores: Dict[tuple, tuple], protocol: str, normalize: bool = False, categories=None) -> dict:
    """Accuracies of ``items`` under ``protocol`` from ``scores[(source, target)] = (sum of log-probs, tokens)``."""

    def value(src, tgt):
        total, n = scores[(src, tgt)]
        return total / n if normalize else total

    result = {"lingeval97": lingeval97, "contrawsd": contrawsd}[protocol](items, value, categories)
    result["score"] = "mean log-prob per token" if normalize else "sum of log-probs (nats)"
    return result


def plot(results: Dict[str, dict], title=""):
    """Accuracy per category (each protocol) and per distance bin (LingEval97), one panel each."""
    from ..outputs import figure_title, new_figure

    panels = [(p, "by_category") for p in results] + [(p, "by_distance") for p in results if "by_distance" in results[p]]
    widths = [max(3.0, 1.2 + 0.22 * len(results[p][key])) for p, key in panels]  # room for each vertical label
    fig, axes = new_figure(1, len(panels), figsize=(sum(widths), 4.2), squeeze=False, width_ratios=widths)
    for ax, (protocol, key) in zip(axes[0], panels):
        table = results[protocol][key]
        names = list(table)
        ax.bar(range(len(names)), [100 * table[n]["accuracy"] for n in names])
        ax.set_xticks(range(len(names)), [f"{n} (n={table[n]['total']})" for n in names], rotation=90, fontsize=6)
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(0, 100)
        ax.set_xlabel(("distance (LingEval97 bins)" if key == "by_distance" else "category") + f" [{protocol}]")
    figure_title(fig, f"Contrastive accuracy {title}".strip())
    return fig
