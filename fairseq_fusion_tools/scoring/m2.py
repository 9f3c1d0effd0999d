"""The MaxMatch (M2) scorer of grammatical error correction (Dahlmeier & Ng, NAACL 2012).

A re-implementation, in Python 3, of the algorithm of the official NUS scorer
(https://github.com/nusnlp/m2scorer, ``scripts/m2scorer.py`` and ``scripts/levenshtein.py``), which is
Python 2 only and not on PyPI. It follows that script's behaviour step by step, including its quirks;
the official function each step mirrors is named in the docstrings:

1. ``load_annotation``: the gold file, paragraph by paragraph (read as a stream here): ``S`` lines are
   source sentences, ``A start end|||type|||corr1||corr2|||required|||comment|||annotator`` lines are
   gold edits of one annotator; ``noop`` edits and ``-1 -1`` offsets give the annotator an empty edit
   set; ``-NONE-`` is the empty correction.
2. ``levenshtein_matrix`` twice (substitution cost 1 and 2), ``edit_graph`` on each and
   ``merge_graph``: the lattice of all minimum-cost token alignments of source and hypothesis.
3. ``transitive_arcs``: edges joined into longer edits (at most ``max_unchanged_words`` unchanged
   tokens inside one), then multi-token ``noop`` arcs dropped.
4. Per annotator, ``set_weights``: edges equal to a gold edit get weight ``-len(E)``, other edits
   ``1 + 0.001``; ``best_edit_seq_bf``: the Bellman-Ford shortest path, whose non-noop edges are the
   system edits; ``matchSeq``: the system edits that match a gold edit.
5. ``batch_multi_pre_rec_f1``: for each sentence the annotator whose counts, added to the counts so
   far, give the highest corpus F (ties: more correct, then fewer ``proposed + beta^2 gold``);
   P = correct / proposed, R = correct / gold, F_beta of P and R.

``score_m2(hyps, gold_path)`` returns the counts and P, R, F; the metric ``m2:GOLD.m2`` (F0.5 x 100)
is registered in ``scoring/metrics.py``.
"""
import math
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple
from fairseq_fusion.guards.text_files import open_text


EPSILON = 0.001  # set_weights: the extra weight of an edge that matches no gold edit

# An edit: (kind, start, end, original, correction, unchanged) with kind in ins/del/sub/noop and
# start/end source token offsets (the official tuple); a gold edit: (start, end, original, [corrections]).
Edit = Tuple[str, int, int, str, str, int]
Gold = Tuple[int, int, str, List[str]]
Vertex = Tuple[int, int]
Edge = Tuple[Vertex, Vertex]


class M2FormatError(ValueError):
    """A malformed line of an M2 file (the message names the file and the line)."""


# ------------------------------------------------------------------------------------------- gold file
def _annotation(path, lineno, line, tokens):
    """One ``A`` line -> (annotator, error type, gold edit; offsets -1 -1 for noop)."""
    fields = line[2:].split("|||")
    offsets = fields[0].split()
    if len(fields) < 6 or len(offsets) != 2:
        raise M2FormatError(f"{path}:{lineno}: malformed M2 edit line (expected 'A start end|||type|||"
                            f"correction(s)|||required|||comment|||annotator'): {line!r}")
    try:
        start, end, annotator = int(offsets[0]), int(offsets[1]), int(fields[5])
    except ValueError:
        raise M2FormatError(f"{path}:{lineno}: malformed M2 edit line (offsets and annotator id must be integers): {line!r}")
    if fields[1] == "noop":
        start = end = -1
    # '-NONE-' (as written, before stripping) is the empty correction, as in load_annotation
    corrections = ["" if c == "-NONE-" else c.strip() for c in fields[2].split("||")]
    original = " ".join(tokens[start:end])
    return annotator, fields[1], (start, end, original, corrections)


def _paragraph_sentences(path, lines, skip_types=()):
    """The (source, {annotator: gold edits}) of one paragraph of an M2 file, as ``load_annotation``;
    edits of a type in ``skip_types`` are left out (their annotator still counts)."""
    first_no, first = lines[0]
    if not (first.startswith("S ") or first == "S"):
        raise M2FormatError(f"{path}:{first_no}: expected a source sentence line 'S ...', got {first!r}")
    sentences = [line[2:].strip() for _, line in lines if line.startswith("S ") or line == "S"]
    tokens = " ".join(sentences).split()
    annotations: Dict[int, List[Gold]] = {}
    for lineno, line in lines[1:]:
        if line.startswith(("S ", "I ")) or line == "S":
            continue
        if not line.startswith("A "):
            raise M2FormatError(f"{path}:{lineno}: malformed M2 line (expected 'S ', 'A ' or a blank line): {line!r}")
        annotator, kind, edit = _annotation(path, lineno, line, tokens)
        annotations.setdefault(annotator, [])
        if kind not in skip_types:
            annotations[annotator].append(edit)
    # annotators in increasing id: the iteration order of the official Python 2 dict for small int keys
    annotators = sorted(annotations)
    offset = 0
    for sentence in sentences:
        offset += len(sentence.split())
        golds = {a: [g for g in annotations[a] if 0 <= g[0] <= offset and 0 <= g[1] <= offset] for a in annotators}
        yield sentence, (golds or {0: []})


def read_m2(path: str, skip_types: Sequence[str] = ()) -> Iterator[Tuple[str, Dict[int, List[Gold]]]]:
    """Stream the (source sentence, {annotator: gold edits}) of an M2 file (``load_annotation``).

    Paragraphs are separated by blank lines; every ``S`` line of a paragraph is one sentence (the
    paragraph's edits are filtered by the cumulative token count, as the official script does).
    """
    paragraph: List[Tuple[int, str]] = []
    with open_text(path) as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\r\n")
            if line.strip() == "":
                if paragraph:
                    yield from _paragraph_sentences(path, paragraph, skip_types)
                    paragraph = []
            else:
                paragraph.append((lineno, line))
    if paragraph:
        yield from _paragraph_sentences(path, paragraph, skip_types)


# ----------------------------------------------------------------------------------------- edit lattice
def alignment_edges(source: Sequence[str], hyp: Sequence[str], sub_cost: int) -> Dict[Edge, Edit]:
    """The edges of all minimum-cost alignments (``levenshtein_matrix`` then ``edit_graph``).

    Insertion and deletion cost 1, substitution ``sub_cost``, a kept token 0. An edge (u, v) joins
    cells u -> v of the matrix; only cells on some optimal path to the last cell are kept (the
    backward search of ``edit_graph``). Insertions before the first source token are at offset 0.
    """
    n, m = len(source), len(hyp)
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    back: Dict[Vertex, List[Tuple[Vertex, Edit]]] = {}
    for i in range(1, n + 1):
        cost[i][0] = i
        back[(i, 0)] = [((i - 1, 0), ("del", i - 1, i, source[i - 1], "", 0))]
    for j in range(1, m + 1):
        cost[0][j] = j
        back[(0, j)] = [((0, j - 1), ("ins", 0, 0, "", hyp[j - 1], 0))]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            same = source[i - 1] == hyp[j - 1]
            diagonal = cost[i - 1][j - 1] + (0 if same else sub_cost)
            deletion, insertion = cost[i - 1][j] + 1, cost[i][j - 1] + 1
            best = min(diagonal, deletion, insertion)
            cost[i][j] = best
            options = []
            if diagonal == best:
                kind = "noop" if same else "sub"
                options.append(((i - 1, j - 1), (kind, i - 1, i, source[i - 1], hyp[j - 1], 1 if same else 0)))
            if deletion == best:
                options.append(((i - 1, j), ("del", i - 1, i, source[i - 1], "", 0)))
            if insertion == best:
                options.append(((i, j - 1), ("ins", i, i, "", hyp[j - 1], 0)))
            back[(i, j)] = options
    edges: Dict[Edge, Edit] = {}
    seen, queue = set(), [(n, m)]
    while queue:
        v = queue.pop()
        if v in seen:
            continue
        seen.add(v)
        for u, edit in back.get(v, []):
            edges[(u, v)] = edit
            queue.append(u)
    return edges


def _join(a: str, b: str) -> str:
    return f"{a} {b}" if a and b else a or b


def merge_edits(e1: Edit, e2: Edit) -> Edit:
    """Two consecutive edits as one (``merge_edits``): insertions stay insertions, deletions deletions,
    kept tokens noop; any other pair is a substitution of the joined original by the joined correction."""
    kind = e1[0] if e1[0] == e2[0] and e1[0] in ("ins", "del", "noop") else "sub"
    return (kind, e1[1], e2[2], _join(e1[3], e2[3]), _join(e1[4], e2[4]), e1[5] + e2[5])


class EditLattice:
    """The merged lattice of one sentence pair with its transitive arcs (``merge_graph``, ``transitive_arcs``).

    ``edges`` keeps the official edge list as it is, duplicates included: the edges of both
    alignments, sorted (an edge in both appears twice), then each transitive arc in the order it was
    added (again when a shorter path replaced it). The duplicates count in ``set_weights`` and in
    ``-len(E)``, so they are kept.
    """

    def __init__(self, source: Sequence[str], hyp: Sequence[str], max_unchanged_words: int = 2):
        first = alignment_edges(source, hyp, 1)
        second = alignment_edges(source, hyp, 2)
        self.edits: Dict[Edge, Edit] = dict(first)
        for e, edit in second.items():
            self.edits.setdefault(e, edit)
        self.vertices = sorted({v for e in list(first) + list(second) for v in e} | {(len(source), len(hyp))})
        self.edges: List[Edge] = sorted(list(first) + list(second))
        self.dist: Dict[Edge, float] = {e: 1 for e in self.edges}
        self._add_transitive_arcs(max_unchanged_words)
        self._drop_noop_arcs()

    def _add_transitive_arcs(self, max_unchanged_words):
        """``transitive_arcs``: for k, i, j in vertex order, add i -> j through k when shorter and the
        joined edit keeps at most ``max_unchanged_words`` tokens unchanged."""
        into: Dict[Vertex, set] = {}
        out_of: Dict[Vertex, set] = {}
        for (u, v) in self.edits:
            out_of.setdefault(u, set()).add(v)
            into.setdefault(v, set()).add(u)
        for k in self.vertices:
            # no arc added while k is the middle vertex starts or ends at k, so both lists are fixed here
            for i in sorted(into.get(k, ())):
                d_ik = self.dist[(i, k)]
                for j in sorted(out_of.get(k, ())):
                    d = d_ik + self.dist[(k, j)]
                    if d < self.dist.get((i, j), math.inf):
                        joined = merge_edits(self.edits[(i, k)], self.edits[(k, j)])
                        if joined[5] <= max_unchanged_words:
                            self.edges.append((i, j))
                            self.dist[(i, j)] = d
                            self.edits[(i, j)] = joined
                            out_of.setdefault(i, set()).add(j)
                            into.setdefault(j, set()).add(i)

    def _drop_noop_arcs(self):
        """The end of ``transitive_arcs``: remove noop arcs longer than one edge. The official loop
        removes from the list it iterates over, so the edge right after a removed one is not looked
        at; reproduced (it only keeps a redundant noop arc, which never changes the edits found)."""
        position = 0
        while position < len(self.edges):
            edge = self.edges[position]
            edit = self.edits.get(edge)
            if edit is not None and edit[0] == "noop" and self.dist[edge] > 1:
                self.edges.remove(edge)  # the first occurrence, as list.remove in the official loop
                self.dist[edge] = math.inf
                del self.edits[edge]
            position += 1

    # ------------------------------------------------------------------------------------ per annotator
    def weights(self, golds: Sequence[Gold]) -> Dict[Edge, float]:
        """``set_weights``: an edge equal to a gold edit (offsets, original, one of the corrections)
        weighs ``-len(E)``; any other non-noop edge 1 + EPSILON (once per copy of it in the edge list).

        Insertions at one offset are matched to the gold insertions there from both ends in turn
        (the official two-pointer walk), so that a sequence of inserted tokens matches gold
        insertions in order.
        """
        weight = dict(self.dist)
        by_span: Dict[Tuple[int, int], List[Edge]] = {}
        for edge in self.edges:
            edit = self.edits.get(edge)
            if edit is None:  # a second copy of a dropped noop arc (the official script fails there); never on a path
                continue
            by_span.setdefault((edit[1], edit[2]), []).append(edge)
        gold_by_span: Dict[Tuple[int, int], List[Gold]] = {}
        for g in golds:
            gold_by_span.setdefault((g[0], g[1]), []).append(g)
        matched = -len(self.edges)
        for span in sorted(by_span):
            edges = sorted(by_span[span])
            span_golds = gold_by_span.get(span, [])
            if span[0] == span[1]:
                self._weigh_insertions(edges, span_golds, weight, matched)
            else:
                for edge in edges:
                    if any(_same_edit(self.edits[edge], g) for g in span_golds):
                        weight[edge] = matched
                    elif self.edits[edge][0] != "noop":
                        weight[edge] += EPSILON
        return weight

    def _weigh_insertions(self, edges, golds, weight, matched):
        """The insertion branch of ``set_weights``: two pointers over the sorted edges, two over the gold
        edits; the left edge is tried against the golds left to right, the right edge right to left.
        After a match on the left, the edges up to the next one starting where the matched edge ends
        get EPSILON (on the right: up to the one ending where it starts)."""
        left, right, cur = 0, len(edges) - 1, 0
        g_left, g_right = 0, len(golds) - 1
        while left <= right:
            edit = self.edits[edges[cur]]
            on_left = cur == left
            order = range(g_left, g_right + 1) if on_left else range(g_right, g_left - 1, -1)
            hit = None
            for gi in order:
                if _same_edit(edit, golds[gi]):
                    hit = gi
                    break
            if hit is None:
                if edit[0] != "noop":
                    weight[edges[cur]] += EPSILON
                if on_left:
                    left += 1
                    cur = right
                else:
                    right -= 1
                    cur = left
                continue
            weight[edges[cur]] = matched
            if on_left:
                g_left = hit + 1
                left += 1
                while left < len(edges) and edges[left][0] != edges[cur][1]:
                    weight[edges[left]] += EPSILON  # the official test here compares a tuple with 'noop': always true
                    left += 1
                cur = left
            else:
                g_right = hit - 1
                right -= 1
                while right >= 0 and edges[right][1] != edges[cur][0]:
                    weight[edges[right]] += EPSILON
                    right -= 1
                cur = right

    def best_edits(self, weight: Dict[Edge, float]) -> List[Tuple[int, int, str, str]]:
        """``best_edit_seq_bf``: the lightest path from (0, 0) to the last vertex (Bellman-Ford over the
        edge list in its order, a strictly lighter path replacing the one found), as its non-noop edits
        (start, end, original, correction) from left to right. Stops once a pass changes nothing (the
        official script runs all |V| - 1 passes; later passes cannot change anything)."""
        best = {v: math.inf for v in self.vertices}
        best[(0, 0)] = 0
        previous: Dict[Vertex, Vertex] = {}
        for _ in range(len(self.vertices) - 1):
            changed = False
            for edge in self.edges:
                u, v = edge
                if best[u] + weight[edge] < best[v]:
                    best[v] = best[u] + weight[edge]
                    previous[v] = u
                    changed = True
            if not changed:
                break
        path = []
        v = self.vertices[-1]
        while v in previous:
            u = previous[v]
            edit = self.edits[(u, v)]
            if edit[0] != "noop":
                path.append(edit[1:5])
            v = u
        return path[::-1]


def _same_edit(edit: Edit, gold: Gold) -> bool:
    """``matchEdit`` on a lattice edit: same offsets and original, correction among the gold ones (case-sensitive)."""
    return edit[1] == gold[0] and edit[2] == gold[1] and edit[3] == gold[2] and edit[4] in gold[3]


def matched_edits(system: Sequence[Tuple[int, int, str, str]], golds: Sequence[Gold]) -> list:
    """``matchSeq``: system edits (left to right) that match a gold edit after the last gold edit matched.

    As in the official loop, the search over the gold edits does not stop at the first match: a
    system edit equal to two gold edits of the annotator (a duplicate line) counts twice.
    """
    found, after = [], 0
    for e in system:
        start = after
        for gi in range(start, len(golds)):
            g = golds[gi]
            if e[0] == g[0] and e[1] == g[1] and e[2] == g[2] and e[3] in g[3]:
                found.append(e)
                after = gi + 1
    return found


def _only_whitespace_or_case(a: str, b: str) -> bool:
    """``equals_ignore_whitespace_casing``."""
    return a.replace(" ", "").lower() == b.replace(" ", "").lower()


# ---------------------------------------------------------------------------------------------- scoring
def f_beta(correct, proposed, gold, beta):
    """P, R, F_beta as the end of ``batch_multi_pre_rec_f1``: P = 1 without proposed edits, R = 1
    without gold edits, F = 0 when P and R are both 0."""
    p = correct / proposed if proposed else 1.0
    r = correct / gold if gold else 1.0
    denom = beta * beta * p + r
    f = (1.0 + beta * beta) * p * r / denom if denom else 0.0
    return p, r, f


def _local_f(correct, proposed, gold, beta):
    """``comp_f1``: F from counts, the annotator choice's criterion (1 when nothing is proposed or gold)."""
    denom = beta * beta * gold + proposed
    if denom == 0:
        return 1.0 if correct == 0 else 0.0
    return (1.0 + beta * beta) * correct / denom


def sentence_counts(hyp: str, source: str, annotations: Dict[int, List[Gold]], totals: Tuple[float, float, float],
                    beta: float = 0.5, max_unchanged_words: int = 2, ignore_whitespace_casing: bool = False):
    """The (correct, proposed, gold, annotator) of one sentence: the annotator whose counts, added to
    ``totals`` (the counts so far), maximize F (the loop body of ``batch_multi_pre_rec_f1``)."""
    lattice = EditLattice(source.split(), hyp.split(), max_unchanged_words)
    sq = beta * beta
    best_key, chosen = None, None
    for annotator, golds in annotations.items():
        system = lattice.best_edits(lattice.weights(golds))
        if ignore_whitespace_casing:
            system = [e for e in system if not _only_whitespace_or_case(e[2], e[3])]
        counts = (len(matched_edits(system, golds)), len(system), len(golds))
        c, p, g = (t + x for t, x in zip(totals, counts))
        f = _local_f(c, p, g, beta)
        if (best_key is None or f > best_key[0] or (f == best_key[0] and c > best_key[1])
                or (f == best_key[0] and c == best_key[1] and best_key[2] > p + sq * g)):
            best_key, chosen = (f, c, p + sq * g), counts + (annotator,)
    return chosen


def score_m2(hyps: Iterable[str], gold_path: str, beta: float = 0.5, max_unchanged_words: int = 2,
             ignore_whitespace_casing: bool = False, hyp_name: Optional[str] = None, first: bool = False) -> dict:
    """Score line-aligned corrected sentences (tokenized as the M2 source) against the gold file.

    Returns precision, recall, f_beta, beta and counts (correct, proposed, gold, sentences). The gold
    file is read as a stream; a different number of hypotheses and gold sentences is an error naming
    both, unless ``first``: then the hypotheses are the first sentences of the gold file (an analysis
    run on the first N sentences of a split).
    """
    from ..progress import progress

    hyps = list(hyps)
    totals = [0, 0, 0]
    count = 0
    gold = progress(read_m2(gold_path), show=len(hyps) >= 1000, desc="M2", unit=" sentences", mininterval=5)
    for count, (source, annotations) in enumerate(gold, 1):
        if count > len(hyps):
            if first:
                count = len(hyps)
                break
            continue  # count the gold sentences for the message below
        c, p, g, _ = sentence_counts(hyps[count - 1].strip(), source, annotations, tuple(totals), beta,
                                     max_unchanged_words, ignore_whitespace_casing)
        totals = [totals[0] + c, totals[1] + p, totals[2] + g]
    if count != len(hyps):
        raise ValueError(f"{hyp_name or 'the hypotheses'} has {len(hyps)} sentences but the gold file {gold_path} "
                         f"has {count}: they must be line-aligned")
    p, r, f = f_beta(*totals, beta)
    return {"precision": p, "recall": r, "f_beta": f, "beta": beta,
            "counts": {"correct": totals[0], "proposed": totals[1], "gold": totals[2], "sentences": count}}


def m2_metric(gold_path: str):
    """The metric ``m2:GOLD.m2``: F0.5 x 100 of the hypotheses against GOLD.m2 (the references are not
    used). The hypotheses are the split's sentences in order, all of them or the first N (an analysis's
    ``--sentences``): they are scored against the first N sentences of GOLD.m2."""
    import os

    if not os.path.isfile(gold_path):
        raise ValueError(f"--metric m2:{gold_path}: no such gold M2 file (expected m2:PATH/TO/GOLD.m2)")

    def metric(hyps, refs):
        return 100.0 * score_m2(hyps, gold_path, first=True)["f_beta"]

    return metric



# ----------------------------------------------------------------------------------- data preparation
def corrected_sentence(source: str, golds: Sequence[Gold]) -> str:
    """The source with one annotator's edits applied, as mlconvgec2018's ``convert_m2_to_parallel.py``
    writes the target of NUCLE (Liu et al.'s preprocessing): left to right, the first correction of
    each edit, insertions at one offset in the order of the file, noop edits ignored."""
    tokens, out, pos = source.split(), [], 0
    for start, end, _, corrections in sorted((g for g in golds if g[0] >= 0), key=lambda g: (g[0], g[1])):
        out += tokens[pos:start]
        out += corrections[0].split() if corrections else []
        pos = max(pos, end)
    return " ".join(out + tokens[pos:])


def m2_to_parallel(gold_path: str, src_out: str, tgt_out: str, annotator: int = 0) -> int:
    """Write the source sentences of an M2 file and their correction by ``annotator`` (the lowest id
    present where that one is absent), leaving out "Um" (unclear meaning) edits as
    ``convert_m2_to_parallel.py`` does; returns the number of sentences."""
    from .. import atomic_files

    n = 0
    with atomic_files.open_replacing(src_out) as fs, atomic_files.open_replacing(tgt_out) as ft:
        for source, annotations in read_m2(gold_path, skip_types=("Um",)):
            golds = annotations.get(annotator, annotations[min(annotations)])
            fs.write(source + "\n")
            ft.write(corrected_sentence(source, golds) + "\n")
            n += 1
    return n
