"""Checking translations of a translation test suite, as the suites' authors' scripts do.

MuCoW (Helsinki-NLP/MuCoW ``WMT2019/translation test suite/evaluate.py``), one decision a line:
the translation is Moses-tokenized (target language, no escaping) and lowercased; "pos" when one
of the key's correct-sense words is a token, "neg" when one of its other-sense words is (also when
a correct one is too), else the lemmatized translation (optional, the authors use the Turku
parser) is searched the same way, else "unk". Per domain (in/out, from the domain file) and all:
coverage = (pos+neg)/n, precision = pos/(pos+neg), recallA = pos/(pos+unk) (the figure the
papers' tables report), recallB = pos/(pos+neg+unk) (the papers' definition), F1A, F1B.

ContraWSD WMT18 (ZurichNLP/ContraWSD ``testsuite_wmt18/evaluate.py``), one key entry a line: the
correct sense's pattern and the other senses' patterns of the same ambiguous word are searched
as whole words, case-insensitively (``\\b(...)\\b``). Counts are weighted by the ambiguous word's
"occurrence in source": only correct found -> credit = number of matches (when no more than the
occurrences; otherwise 1, as the script does), the rest "unfound"; only other senses -> wrong;
both -> manual inspection; none -> unfound (manual). Accuracy = only-correct / total per
"ambig word:sense", per frequency bin and overall; ``ignore_wmt`` drops origins from WMT sets.
Sense patterns: the script uses its own enhanced patterns (inflections, synonyms) for the 30 words;
without ``patterns`` each sense string of the key ("a|b|c", word forms) is the pattern, and the
other senses of a word are the senses the key gives it elsewhere.
"""
import json
import re
from typing import Dict, List, Optional

from .suite_files import SuiteFormatError, open_text as _open
from .contrastive_protocols import CONTRAWSD_FREQUENCY_BINS, frequency_bin

WMT_ORIGINS = re.compile(r"^dev|^newstest|^news-test|^nc-dev")


# ------------------------------------------------------------------------------------------ MuCoW
def mucow_decision(translation: str, correct, other, tokenizer, lemmas: Optional[str] = None) -> str:
    words = [w.lower() for w in tokenizer.tokenize(translation.strip(), escape=False)]
    pos, neg = any(w in words for w in correct), any(w in words for w in other)
    if not pos and not neg and lemmas is not None:
        words = lemmas.strip().lower().split(" ")
        pos, neg = any(w in words for w in correct), any(w in words for w in other)
    return "neg" if neg else "pos" if pos else "unk"


def mucow_scores(c: Dict[str, int]) -> dict:
    pos, neg, unk = c.get("pos", 0), c.get("neg", 0), c.get("unk", 0)
    n = pos + neg + unk
    prec = pos / (pos + neg) if pos else 0.0
    rec_a = pos / (pos + unk) if pos else 0.0
    rec_b = pos / n if pos else 0.0

    def f1(p, r):
        return 2 * p * r / (p + r) if p + r else 0.0

    return {"pos": pos, "neg": neg, "unk": unk, "total": n, "coverage": (pos + neg) / n if n else 0.0,
            "precision": prec, "recallA": rec_a, "recallB": rec_b, "f1A": f1(prec, rec_a), "f1B": f1(prec, rec_b)}


def check_mucow(suite, hyps: List[str], lemmas: Optional[List[str]] = None) -> dict:
    from sacremoses import MosesTokenizer

    tokenizer = MosesTokenizer(lang=suite.pair.split("-")[1])
    domains, words, rows = {"in": {}, "out": {}}, {}, []
    for i, (key, hyp) in enumerate(zip(suite.keys, hyps)):
        _, corpus, word, correct, other = key
        d = mucow_decision(hyp, correct, other, tokenizer, lemmas[i] if lemmas else None)
        domain = suite.domains[(word, " ".join(correct))]
        for table in (domains[domain], words.setdefault(word, {})):
            table[d] = table.get(d, 0) + 1
        rows.append({"line": i + 1, "word": word, "corpus": corpus, "domain": domain, "decision": d, "translation": hyp})
    everything = {k: domains["in"].get(k, 0) + domains["out"].get(k, 0) for k in ("pos", "neg", "unk")}
    return {"suite": "MuCoW", "pair": suite.pair, "protocol": "Helsinki-NLP/MuCoW WMT2019 translation test suite evaluate.py",
            "lemmas": lemmas is not None, "overall": mucow_scores(everything),
            "by_domain": {k: mucow_scores(v) for k, v in domains.items()},
            "by_word": {k: mucow_scores(v) for k, v in sorted(words.items())}, "lines": rows}


# -------------------------------------------------------------------------------------- ContraWSD
def read_contrawsd_key(path: str) -> List[dict]:
    """Entries of ContraWSD's ``de-en.wsd.task.json`` (one per suite line) with the fields the check needs."""
    with _open(path) as f:
        try:
            entries = json.load(f)
        except json.JSONDecodeError as e:
            raise SuiteFormatError(f"{path}: line {e.lineno}, column {e.colno}: invalid JSON ({e.msg})") from None
    if not isinstance(entries, list) or not entries:
        raise SuiteFormatError(f"{path}: expected a non-empty JSON list of entries (ContraWSD testsuite_wmt18 key)")
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not all(isinstance(e.get(k), str) and e[k] for k in ("ambig word", "sense")) \
                or not isinstance(e.get("occurrence in source"), int) or e["occurrence in source"] < 1:
            raise SuiteFormatError(f"{path}: entry {i + 1}: expected 'ambig word' (str), 'sense' (str) and "
                                   f"'occurrence in source' (int >= 1)")
    return entries


def _whole_words(pattern):
    return re.compile(r"\b({})\b".format(pattern), re.IGNORECASE)


def check_contrawsd(entries: List[dict], hyps: List[str], patterns: Optional[Dict[str, str]] = None,
                    ignore_wmt: bool = False) -> dict:
    patterns = patterns or {}
    senses = {}
    for e in entries:
        senses.setdefault(e["ambig word"], [])
        if e["sense"] not in senses[e["ambig word"]]:
            senses[e["ambig word"]].append(e["sense"])
    counts, freq, manual = {}, {}, []
    for i, (e, hyp) in enumerate(zip(entries, hyps)):
        if ignore_wmt and WMT_ORIGINS.search(str(e.get("origin", ""))):
            continue
        occ, sense, word = e["occurrence in source"], e["sense"], e["ambig word"]
        own = patterns.get(sense, sense)
        others = "|".join(patterns.get(s, s) for s in senses[word] if s != sense)
        found = len(_whole_words(own).findall(hyp))
        found_other = len(_whole_words(others).findall(hyp)) if others else 0
        c = counts.setdefault(f"{word}:{sense}", {"total": 0, "only_correct": 0, "unfound_in_correct": 0,
                                                  "only_other": 0, "found_both": 0, "unfound": 0})
        tables = [c]
        f = frequency_of(e)
        if f is not None:
            tables.append(freq.setdefault(frequency_bin(f, CONTRAWSD_FREQUENCY_BINS), dict.fromkeys(c, 0)))
        if found and not found_other:
            credit = found if found <= occ else 1  # the authors' rule (evaluate.py)
            add = {"only_correct": credit, "unfound_in_correct": occ - credit}
        elif found:
            add = {"found_both": occ}
        elif found_other:
            add = {"only_other": occ}
        else:
            add = {"unfound": occ}
        for t in tables:
            t["total"] += occ
            for k, v in add.items():
                t[k] += v
        if "found_both" in add or "unfound" in add:
            manual.append({"line": i + 1, "category": f"{word}:{sense}", "source": e.get("source"),
                           "translation": hyp, "found both": "found_both" in add, "occurrence in source": occ,
                           "correct": " "})
    total = {k: sum(c[k] for c in counts.values()) for k in ("total", "only_correct", "unfound_in_correct",
                                                              "only_other", "found_both", "unfound")}
    by_word = {}
    for cat, c in counts.items():
        w = by_word.setdefault(cat.split(":")[0], dict.fromkeys(c, 0))
        for k, v in c.items():
            w[k] += v
    return {"suite": "ContraWSD WMT18", "pair": "de-en", "protocol": "ZurichNLP/ContraWSD testsuite_wmt18/evaluate.py",
            "sense_patterns": "given" if patterns else "the key's sense strings", "ignore_wmt": ignore_wmt,
            "overall": _contrawsd_acc(total), "by_category": {k: _contrawsd_acc(v) for k, v in sorted(counts.items())},
            "by_word": {k: _contrawsd_acc(v) for k, v in sorted(by_word.items())},
            "by_frequency": {b[0]: _contrawsd_acc(freq[b[0]]) for b in CONTRAWSD_FREQUENCY_BINS if b[0] in freq},
            "manual_evaluation": manual}


def frequency_of(entry) -> Optional[int]:
    for k, v in entry.items():
        if k.startswith("frequency of sense/ambig word") and re.fullmatch(r"\d+/\d+", str(v)):
            return int(str(v).split("/")[0])
    return None


def _contrawsd_acc(c):
    n = c["total"]
    return dict(c, accuracy=c["only_correct"] / n if n else 0.0, found_both_rate=c["found_both"] / n if n else 0.0,
                other_rate=c["only_other"] / n if n else 0.0)


def plot(result: dict, title=""):
    """Accuracy (MuCoW: precision and recallA) per word, and per domain / frequency bin."""
    from ..outputs import figure_title, new_figure

    mucow = result["suite"] == "MuCoW"
    second = "by_domain" if mucow else "by_frequency"
    widths = [max(9.0, 1.0 + 0.1 * len(result["by_word"])), 3.0]  # room for each word's vertical label
    fig, axes = new_figure(1, 2, figsize=(sum(widths), 3.8), width_ratios=widths)
    for ax, key in zip(axes, ("by_word", second)):
        table = result[key]
        names = list(table)
        x = list(range(len(names)))
        if mucow:
            ax.bar([i - 0.2 for i in x], [100 * table[n]["precision"] for n in names], width=0.4, label="precision")
            ax.bar([i + 0.2 for i in x], [100 * table[n]["recallA"] for n in names], width=0.4, label="recallA")
            ax.legend(fontsize=6)
        else:
            ax.bar(x, [100 * table[n]["accuracy"] for n in names])
        ax.set_xticks(x)
        ax.set_xticklabels(names, rotation=90, fontsize=5 if key == "by_word" else 7)
        ax.set_ylim(0, 100)
        ax.set_ylabel("%")
        ax.set_xlabel(key[3:] + f" [{result['suite']} {result['pair']}]")
    figure_title(fig, f"{result['suite']} {result['pair']} {title}".strip())
    return fig
