"""Contrastive evaluation: does the model score the correct translation above minimally wrong ones?

The model scores a translation by its log-probability given the source,
``score(y | x) = sum_j log P(y_j | y_<j, x)`` (natural log, EOS included, the distribution of
``model.get_normalized_probs``, so output-fusion techniques are scored as they translate).
How scores become accuracies is the protocol (``contrastive_protocols``): LingEval97's pairwise
count per error type (rsennrich/lingeval97 ``evaluate.py``) or ContraWSD's "reference beats every
variant" per item (ZurichNLP/ContraWSD ``evaluate.py``).

Scoring suite formats (``read_suite``):

- line-aligned (DistilLingEval, Vamvas & Sennrich 2021): a folder with ``src.<SRC>``,
  ``tgt.correct.<TGT>`` and ``tgt.incorrect.<TGT>`` (``.gz`` allowed); line i of the three files
  is one item; the error type is the folder's name.
- JSON (LingEval97, ContraWSD, MuCoW scoring): a list of ``{"source", "reference", "errors":
  [{"contrastive", "type", "distance"?, "frequency"?}], "ambig word"?, "sense"?, ...}``.

Translation suites (ContraWSD WMT18, MuCoW translation) have no contrastive variants; they are
read and checked by ``contrastive_translate`` (``fusion-contrastive-translate``).
"""
import json
import os
import re
from dataclasses import dataclass, field
from typing import List, Optional

import torch

from .contrastive_translate import translation_suite_format
from .suite_files import SuiteFormatError, open_text as _open


@dataclass
class Item:
    source: str
    reference: str
    contrastive: List[str]
    category: str
    where: str  # file:line of the item
    word: Optional[str] = None  # ContraWSD's ambiguous word
    distances: List[Optional[int]] = field(default_factory=list)  # per contrastive (LingEval97)
    types: List[str] = field(default_factory=list)  # error type per contrastive
    frequencies: List[Optional[int]] = field(default_factory=list)  # per contrastive (LingEval97)
    sense: Optional[str] = None  # ContraWSD's sense of the reference
    sense_frequency: Optional[int] = None  # ContraWSD's "frequency of sense/ambig word in ..." (absolute)

    def __post_init__(self):
        self.types = self.types or [self.category] * len(self.contrastive)


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
    types = [str(e.get("type", "contrastive")) for e in errors]
    distances = [e.get("distance") for e in errors]
    frequencies = [e.get("frequency") for e in errors]
    for key, values in (("distance", distances), ("frequency", frequencies)):
        for v in values:
            if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                fail(f"an entry of 'errors' has a non-integer {key!r}: {v!r}")
    word, sense = entry.get("ambig word"), entry.get("sense")
    category = f"{word}:{sense}" if word is not None and sense is not None else "+".join(sorted(set(types)))
    return Item(entry["source"], entry["reference"], [e["contrastive"] for e in errors], category, where,
                word, distances, types, frequencies, sense, _sense_frequency(entry, fail))


def _sense_frequency(entry, fail):
    """ContraWSD's "frequency of sense/ambig word in <corpus>": "ABS/TOTAL" -> ABS (its evaluate.py bins ABS)."""
    keys = [k for k in entry if k.startswith("frequency of sense/ambig word")]
    if not keys:
        return None
    value = str(entry[keys[0]])
    if not re.fullmatch(r"\d+/\d+", value):
        fail(f"{keys[0]!r} must be 'ABS/TOTAL', got {value!r}")
    return int(value.split("/")[0])


def read_suite(path: str, src_lang: str, tgt_lang: str) -> List[Item]:
    """Items of a scoring suite: a line-aligned folder or a LingEval97/ContraWSD/MuCoW JSON file."""
    if os.path.isdir(path):
        kind = translation_suite_format(path)
        if kind is not None:
            raise SuiteFormatError(f"{path}: a {kind} translation test suite (sources and references, no contrastive "
                                   f"variants): check translations with fusion-contrastive-translate --suite {path}")
        return read_line_aligned(path, src_lang, tgt_lang)
    if path.endswith(".json") or path.endswith(".json.gz"):
        return read_contrawsd_json(path)
    raise SuiteFormatError(f"{path}: expected a line-aligned suite folder (src.SRC, tgt.correct.TGT, tgt.incorrect.TGT) "
                           f"or a .json file (LingEval97/ContraWSD format)")


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
        if hasattr(self.task, "add_inference_spans"):  # parse-tree phrase models: spans of the raw sources
            dataset = self.task.add_inference_spans(dataset, src)
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
