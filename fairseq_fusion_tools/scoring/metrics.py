"""Corpus metrics the inference analyses score with (``--metric``), by name.

Each metric maps line-aligned hypotheses and references (post-processed text) to one number,
higher is better. Tasks add theirs with ``register_metric`` (e.g. ROUGE for summarization,
F0.5 for grammatical error correction).

- ``bleu``: tokenized corpus BLEU on the text as it is (multi-bleu.perl's formula: sacreBLEU
  with ``tokenize="none"``), the metric of Liu et al. 2021 and Yang et al. 2020;
- ``sacrebleu``: sacreBLEU with its default 13a tokenizer (for detokenized output);
- ``chrf``: sacreBLEU's chrF;
- ``rouge1``, ``rouge2``, ``rougeL``: ROUGE F1 exactly as ROUGE-1.5.5 ``-c 95 -r 1000 -n 2 -a -m`` prints it
  (``scoring/rouge.py``: a port of ROUGE-1.5.5.pl, its Porter stemmer and WordNet exceptions included;
  ROUGE-L summary-level over sentences), the metric of Liu et al. 2021 on CNN/DM.

A metric that needs more than the references takes an argument: ``NAME:ARG`` (e.g. ``m2:gold.m2``)
calls the factory registered with ``register_metric_factory(NAME, factory)`` on ARG.
"""
from typing import Callable, Dict, Sequence

from .m2 import m2_metric

Metric = Callable[[Sequence[str], Sequence[str]], float]
METRICS: Dict[str, Metric] = {}
FACTORIES: Dict[str, Callable[[str], Metric]] = {}


def register_metric(name: str, fn: Metric) -> Metric:
    METRICS[name] = fn
    return fn


def register_metric_factory(name: str, factory: Callable[[str], Metric]):
    """``factory(arg)`` builds the metric ``NAME:ARG`` (e.g. the M2 scorer from a gold edit file)."""
    FACTORIES[name] = factory
    return factory


def known_metrics():
    return sorted(METRICS) + sorted(f"{n}:ARG" for n in FACTORIES)


def get_metric(spec: str) -> Metric:
    name, sep, arg = spec.partition(":")
    if sep and name in FACTORIES:
        return FACTORIES[name](arg)
    if spec not in METRICS:
        raise ValueError(f"--metric {spec!r}: expected one of {known_metrics()}")
    return METRICS[spec]


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


def _rouge(kind):
    def metric(hyps, refs):
        from .rouge import rouge_scores

        return rouge_scores(hyps, refs, (kind,))[kind]["f"]

    return metric


for _kind in ("rouge1", "rouge2", "rougeL"):
    register_metric(_kind, _rouge(_kind))

register_metric_factory("m2", m2_metric)
