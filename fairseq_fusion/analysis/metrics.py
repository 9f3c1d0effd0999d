"""Corpus metrics the inference analyses score with (``--metric``), by name.

Each metric maps line-aligned hypotheses and references (post-processed text) to one number,
higher is better. Tasks add theirs with ``register_metric`` (e.g. ROUGE for summarization,
F0.5 for grammatical error correction).

- ``bleu``: tokenized corpus BLEU on the text as it is (multi-bleu.perl's formula: sacreBLEU
  with ``tokenize="none"``), the metric of Liu et al. 2021 and Yang et al. 2020;
- ``sacrebleu``: sacreBLEU with its default 13a tokenizer (for detokenized output);
- ``chrf``: sacreBLEU's chrF.
"""
from typing import Callable, Dict, Sequence

Metric = Callable[[Sequence[str], Sequence[str]], float]
METRICS: Dict[str, Metric] = {}


def register_metric(name: str, fn: Metric) -> Metric:
    METRICS[name] = fn
    return fn


def get_metric(name: str) -> Metric:
    if name not in METRICS:
        raise ValueError(f"--metric {name!r}: expected one of {sorted(METRICS)}")
    return METRICS[name]


def _check(hyps, refs):
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references: they must be line-aligned")


def tokenized_bleu(hyps, refs):
    import sacrebleu

    _check(hyps, refs)
    return sacrebleu.metrics.BLEU(tokenize="none", force=True).corpus_score(list(hyps), [list(refs)]).score


def sacrebleu_13a(hyps, refs):
    import sacrebleu

    _check(hyps, refs)
    return sacrebleu.metrics.BLEU().corpus_score(list(hyps), [list(refs)]).score


def chrf(hyps, refs):
    import sacrebleu

    _check(hyps, refs)
    return sacrebleu.metrics.CHRF().corpus_score(list(hyps), [list(refs)]).score


register_metric("bleu", tokenized_bleu)
register_metric("sacrebleu", sacrebleu_13a)
register_metric("chrf", chrf)
