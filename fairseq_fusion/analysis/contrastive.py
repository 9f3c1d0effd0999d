"""Contrastive evaluation: does the model score the correct translation above minimally wrong ones?

Protocol of LingEval97 (Sennrich 2017) and ContraWSD (Rios et al. 2017), used by Xu et al. 2020
(subject-verb agreement by distance, Fig. 4) and Emelin et al. 2019 (word sense disambiguation):
the model scores a translation by its log-probability given the source,
``score(y | x) = sum_j log P(y_j | y_<j, x)`` (natural log, EOS included, the distribution of
``model.get_normalized_probs``, so output-fusion techniques are scored as they translate), and
an item is right when its reference scores strictly higher than every contrastive variant.

Suite formats:

- line-aligned (DistilLingEval, Vamvas & Sennrich 2021): a folder with ``src.<SRC>``,
  ``tgt.correct.<TGT>`` and ``tgt.incorrect.<TGT>`` (``.gz`` allowed); line i of the three files
  is one item; the category is the folder's name.
- ContraWSD JSON: a list of ``{"source", "reference", "errors": [{"contrastive", "type", ...}], ...}``;
  the category is the errors' ``type``; ``"ambig word"`` (ContraWSD/MuCoW) gives a per-word
  breakdown; an error's ``"distance"`` (LingEval97) a per-distance breakdown (pairwise there:
  reference vs. that contrastive).
"""
import gzip
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch


class SuiteFormatError(ValueError):
    """A malformed test-suite file; the message names the file and the line."""


@dataclass
class Item:
    source: str
    reference: str
    contrastive: List[str]
    category: str
    where: str  # file:line of the item
    word: Optional[str] = None  # ContraWSD's ambiguous word
    distances: List[Optional[int]] = field(default_factory=list)


def _open(path):
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


def _find(folder, name):
    for p in (os.path.join(folder, name), os.path.join(folder, name + ".gz")):
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{folder}: no {name} or {name}.gz (a line-aligned suite has src.SRC, tgt.correct.TGT, tgt.incorrect.TGT)")


def read_line_aligned(folder: str, src_lang: str, tgt_lang: str) -> List[Item]:
    """Items of a DistilLingEval-style folder; a missing or empty line is an error naming file and line."""
    paths = [_find(folder, f"src.{src_lang}"), _find(folder, f"tgt.correct.{tgt_lang}"), _find(folder, f"tgt.incorrect.{tgt_lang}")]
    columns = []
    for path in paths:
        with _open(path) as f:
            lines = [line.rstrip("\n") for line in f]
        for i, line in enumerate(lines, 1):
            if not line.strip():
                raise SuiteFormatError(f"{path}: line {i}: empty line (each line must hold one sentence)")
        columns.append(lines)
    n = min(len(c) for c in columns)
    for path, col in zip(paths, columns):
        if len(col) > n:
            short = paths[[len(c) for c in columns].index(n)]
            raise SuiteFormatError(f"{path}: line {n + 1}: no matching line in {short}, which ends after {n} lines "
                                   f"(the three files must be line-aligned)")
    category = os.path.basename(os.path.normpath(folder))
    return [Item(s, c, [w], category, f"{paths[0]}:{i + 1}") for i, (s, c, w) in enumerate(zip(*columns))]


def read_contrawsd_json(path: str) -> List[Item]:
    """Items of a ContraWSD-format JSON file; syntax and schema errors name the line."""
    with _open(path) as f:
        text = f.read()
    decoder = json.JSONDecoder()

    def line_at(pos):
        return text.count("\n", 0, pos) + 1

    def fail(pos, msg):
        raise SuiteFormatError(f"{path}: line {line_at(pos)}: {msg}")

    pos = _skip_ws(text, 0)
    if pos >= len(text) or text[pos] != "[":
        fail(pos, "expected a JSON list of items ('[') at the start (ContraWSD format)")
    pos = _skip_ws(text, pos + 1)
    items = []
    while pos < len(text) and text[pos] != "]":
        start = pos
        try:
            entry, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise SuiteFormatError(f"{path}: line {e.lineno}, column {e.colno}: invalid JSON ({e.msg})") from None
        items.append(_contrawsd_item(entry, f"{path}:{line_at(start)}", lambda msg, s=start: fail(s, msg)))
        pos = _skip_ws(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_ws(text, pos + 1)
        elif pos < len(text) and text[pos] != "]":
            fail(pos, f"expected ',' or ']' after an item, found {text[pos]!r}")
    if pos >= len(text):
        fail(len(text), "the list is not closed (missing ']')")
    if _skip_ws(text, pos + 1) != len(text):
        fail(_skip_ws(text, pos + 1), "text after the closing ']'")
    if not items:
        fail(0, "no items")
    return items


def _skip_ws(text, pos):
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _contrawsd_item(entry, where, fail):
    schema = "expected {'source': str, 'reference': str, 'errors': [{'contrastive': str, 'type': str}, ...]}"
    if not isinstance(entry, dict):
        fail(f"an item must be a JSON object; {schema}")
    for key in ("source", "reference"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            fail(f"item has no (non-empty) {key!r}; {schema}")
    errors = entry.get("errors")
    if not isinstance(errors, list) or not errors:
        fail(f"item has no list 'errors' of contrastive variants; {schema}")
    for e in errors:
        if not isinstance(e, dict) or not isinstance(e.get("contrastive"), str) or not e["contrastive"].strip():
            fail(f"an entry of 'errors' has no (non-empty) 'contrastive'; {schema}")
    types = sorted({str(e.get("type", "contrastive")) for e in errors})
    distances = [e.get("distance") for e in errors]
    for d in distances:
        if d is not None and not isinstance(d, int):
            fail(f"'distance' must be an integer, got {d!r}")
    return Item(entry["source"], entry["reference"], [e["contrastive"] for e in errors], "+".join(types), where,
                entry.get("ambig word"), distances)


def read_suite(path: str, src_lang: str, tgt_lang: str) -> List[Item]:
    if os.path.isdir(path):
        return read_line_aligned(path, src_lang, tgt_lang)
    if path.endswith(".json") or path.endswith(".json.gz"):
        return read_contrawsd_json(path)
    raise SuiteFormatError(f"{path}: expected a line-aligned suite folder or a ContraWSD .json file")


# ------------------------------------------------------------------------------------- scoring
class Scorer:
    """Log-probabilities of (source, target) sentence pairs under a fairseq translation model."""

    def __init__(self, model, task, preprocess_src=None, preprocess_tgt=None, max_tokens=4000):
        from fairseq.sequence_scorer import SequenceScorer

        self.model, self.task, self.max_tokens = model, task, max_tokens
        self.pre_src = preprocess_src or (lambda s: s)
        self.pre_tgt = preprocess_tgt or (lambda s: s)
        self.scorer = SequenceScorer(task.target_dictionary)

    def encode(self, dictionary, text):
        return dictionary.encode_line(text, add_if_not_exist=False, append_eos=True).long()

    def score(self, pairs, progress=None):
        """[(sum of log-probs, number of target tokens incl. EOS)] of each (source, target) raw pair."""
        from fairseq import utils
        from fairseq.data import LanguagePairDataset

        src = [self.encode(self.task.source_dictionary, self.pre_src(s)) for s, _ in pairs]
        tgt = [self.encode(self.task.target_dictionary, self.pre_tgt(t)) for _, t in pairs]
        dataset = LanguagePairDataset(
            src, [len(x) for x in src], self.task.source_dictionary, tgt, [len(x) for x in tgt], self.task.target_dictionary,
            left_pad_source=getattr(self.task.cfg, "left_pad_source", True), left_pad_target=False)
        batches = dataset.batch_by_size(dataset.ordered_indices(), max_tokens=self.max_tokens)
        device = next(self.model.parameters()).device
        out = [None] * len(pairs)
        with torch.no_grad():
            for batch in (progress(batches) if progress else batches):
                sample = dataset.collater([dataset[i] for i in batch])
                if device.type == "cuda":
                    sample = utils.move_to_cuda(sample)
                hypos = self.scorer.generate([self.model], sample)
                for i, sid in enumerate(sample["id"].tolist()):
                    pos = hypos[i][0]["positional_scores"].float()
                    out[sid] = (pos.sum().item(), pos.numel())
        return out


def evaluate(items: List[Item], scores: Dict[tuple, tuple], normalize: bool = False) -> dict:
    """Accuracy overall, per category, per ambiguous word and per distance from the pairs' scores."""

    def value(src, tgt):
        total, n = scores[(src, tgt)]
        return total / n if normalize else total

    rows, cats, words, dist = [], {}, {}, {}
    for it in items:
        ref = value(it.source, it.reference)
        con = [value(it.source, c) for c in it.contrastive]
        ok = all(ref > c for c in con)
        rows.append({"where": it.where, "category": it.category, "reference_score": ref, "contrastive_scores": con, "correct": ok})
        cats.setdefault(it.category, []).append(ok)
        if it.word is not None:
            words.setdefault(it.word, []).append(ok)
        for c, d in zip(con, it.distances or []):
            if d is not None:
                dist.setdefault(d, []).append(ref > c)

    def acc(xs):
        return {"accuracy": sum(xs) / len(xs), "correct": sum(xs), "total": len(xs)}

    result = {
        "score": "mean log-prob per token" if normalize else "sum of log-probs (nats)",
        "overall": acc([r["correct"] for r in rows]),
        "by_category": {k: acc(v) for k, v in sorted(cats.items())},
        "items": rows,
    }
    if words:
        result["by_word"] = {k: acc(v) for k, v in sorted(words.items())}
    if dist:
        result["by_distance"] = {str(k): acc(v) for k, v in sorted(dist.items())}
    return result


def plot(result: dict):
    from .common import new_figure

    panels = [("by_category", "category")] + ([("by_distance", "distance")] if "by_distance" in result else [])
    fig, axes = new_figure(1, len(panels), figsize=(5 * len(panels), 3.5), squeeze=False)
    for ax, (key, label) in zip(axes[0], panels):
        names = list(result[key])
        ax.bar(range(len(names)), [100 * result[key][n]["accuracy"] for n in names])
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([f"{n}\n(n={result[key][n]['total']})" for n in names], rotation=30 if key == "by_category" else 0,
                           ha="right" if key == "by_category" else "center", fontsize=7)
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(0, 100)
        ax.set_xlabel(label)
    return fig
