"""Word alignment links and their scores (Och & Ney 2003): read ``i-j`` (sure) and ``ipj`` (possible) links, and
count AER, precision, recall and the cumulative coverage C<=i (Yang et al. 2020, Eq. 2) over a corpus, line by line.

AER: with hypothesis links A, sure links S and possible links P (S ⊆ P), summed over the corpus, precision =
|A∩P|/|A|, recall = |A∩S|/|S| and AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|). Links are sets (duplicates count once).
fusion-aer scores alignment files with these; the analysis of a model's attention (``analysis/alignment*.py``)
counts its links with them too. Standard library only.
"""
import re
from typing import Dict, Iterator, List, Sequence, Set, Tuple

from fairseq_fusion.guards.text_files import open_text

Links = Set[Tuple[int, int]]


_LINK = re.compile(r"^(\d+)([-p])(\d+)$")


def parse_links(line: str, one_indexed: bool, where: str = "line") -> Tuple[Links, Links]:
    """(sure, possible) links of one line, 0-indexed; possible includes sure."""
    sure, possible = set(), set()
    offset = 1 if one_indexed else 0
    for tok in line.split():
        m = _LINK.match(tok)
        if m is None:
            raise ValueError(f"{where}: bad alignment link {tok!r}; expected 'i-j' (sure) or 'ipj' (possible)")
        i, j = int(m.group(1)) - offset, int(m.group(3)) - offset
        if i < 0 or j < 0:
            raise ValueError(f"{where}: link {tok!r} has an index below {offset}; is the file {'0' if one_indexed else '1'}-indexed?")
        possible.add((i, j))
        if m.group(2) == "-":
            sure.add((i, j))
    return sure, possible


def read_links(path: str, one_indexed: bool) -> List[Tuple[Links, Links]]:
    with open_text(path) as f:
        return [parse_links(line, one_indexed, f"{path}:{n}") for n, line in enumerate(f, 1)]


def alignment_error_rate(hyps: Sequence[Links], gold: Sequence[Tuple[Links, Links]]) -> Dict[str, float]:
    """Corpus AER, precision and recall (fractions) and the number of hypothesis links."""
    if len(hyps) != len(gold):
        raise ValueError(f"{len(hyps)} hypothesis lines but {len(gold)} gold lines")
    a = s = a_s = a_p = 0
    for hyp, (sure, possible) in zip(hyps, gold):
        hyp = set(hyp)
        a += len(hyp)
        s += len(sure)
        a_s += len(hyp & sure)
        a_p += len(hyp & possible)
    return {
        "aer": 1.0 - (a_s + a_p) / (a + s) if a + s else 0.0,
        "precision": a_p / a if a else 0.0,
        "recall": a_s / s if s else 0.0,
        "links": a,
    }


def reverse_links(links: Links) -> Links:
    return {(j, i) for i, j in links}


def iter_links(path: str, one_indexed: bool) -> Iterator[Tuple[Links, Links]]:
    """(sure, possible) links of each line, 0-indexed."""
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            yield parse_links(line, one_indexed, f"{path}:{n}")


class AlignmentStats:
    """Running per-layer AER counts and cumulative coverage (Eq. 2) over sentences."""

    def __init__(self, n_layers: int):
        self.counts = [dict(a=0, s=0, a_s=0, a_p=0) for _ in range(n_layers)]
        self.covered = [0] * n_layers
        self.source_words = 0
        self.sentences = 0

    def add(self, per_layer: List[Links], n_source_words: int, gold=None, source_of=lambda link: link[0]):
        """One sentence: ``per_layer`` links (file order); C<=i counts ``source_of(link)``."""
        seen = set()
        for layer, links in enumerate(per_layer):
            seen.update(source_of(link) for link in links)
            self.covered[layer] += len(seen)
            if gold is not None:
                sure, possible = gold
                c = self.counts[layer]
                c["a"] += len(links)
                c["s"] += len(sure)
                c["a_s"] += len(links & sure)
                c["a_p"] += len(links & possible)
        self.source_words += n_source_words
        self.sentences += 1

    def layers(self, with_gold: bool):
        rows = []
        for n, (c, cov) in enumerate(zip(self.counts, self.covered), 1):
            row = {"layer": n, "cumulative_coverage": cov / self.source_words if self.source_words else 0.0}
            if with_gold:
                a, s = c["a"], c["s"]
                row.update(aer=1.0 - (c["a_s"] + c["a_p"]) / (a + s) if a + s else 0.0,
                           precision=c["a_p"] / a if a else 0.0, recall=c["a_s"] / s if s else 0.0, links=a)
            rows.append(row)
        return rows
