"""Phrases from bracketed parse trees (Xu et al. 2020, §3, Algorithm 1), on BPE sub-words.

The text around the (garbled) Algorithm 1 says: "we try to use the tokens from the largest
sub-tree that complies with the maximum token limitation or from several adjacent sub-trees
of the same depth as a phrase"; the algorithm loops "while T is not empty", appends each
phrase p to S and finally reverses S, i.e. it takes phrases from the end of the sentence.
Our reading, with ``pending`` the unprocessed sub-trees from left to right (first the root):

    while pending:
        node = pending.pop()                      # right-most unprocessed sub-tree
        if size(node) > n: pending += children(node); continue   # too large: one level down
        p = tokens(node)                          # the largest sub-tree ending here within n
        while pending and depth(pending[-1]) == depth(node) and |p| + size(pending[-1]) <= n:
            p = tokens(pending.pop()) + p         # adjacent sub-trees of the same depth
        S.append(p)
    reverse(S)

Sizes count BPE sub-words (the tokens the model sees): each word leaf has its sub-words as
children one level deeper, so a word longer than n is cut into pieces of at most n like any
other sub-tree. n is the n-gram phrase size of footnote 2 for the sentence's length
(sub-words + </s>), "consistent with the simple segmentation approach".

Trees are read with a small bracket parser (Penn Treebank / Stanford parser format,
``(ROOT (S (NP (DT The) (NN dog)) (VP (VBZ barks))))``; an unlabeled outer pair is fine);
PTB escapes (-LRB-, ``, ...) are matched to the raw characters.
"""
from typing import List, Optional

import torch

from .phrase_segmentation import ngram_phrase_size

PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
               "``": '"', "''": '"'}
BPE_CONTINUATION = "@@"
UNK = "<unk>"  # fairseq's unknown word: matches the tree's word (input text of the model's vocabulary)


class ParseError(ValueError):
    pass


class Node:
    __slots__ = ("label", "children", "depth", "size", "first")

    def __init__(self, label: Optional[str], children: list):
        self.label, self.children = label, children
        self.depth = self.size = self.first = 0  # set by ``annotate``


def _tokenize(line: str) -> List[str]:
    return line.replace("(", " ( ").replace(")", " ) ").split()


def parse_tree(line: str) -> Node:
    """One bracketed tree -> Node (word leaves are ``str`` children). Raises ParseError."""
    tokens = _tokenize(line)
    if not tokens:
        raise ParseError("empty line, expected a bracketed parse tree")
    if tokens[0] != "(":
        raise ParseError(f"expected '(' at the start of the tree, found {tokens[0]!r}")
    stack: List[Node] = []
    root = None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if root is not None and tok == ")":
            raise ParseError("unbalanced brackets: ')' after the tree was closed")
        if root is not None:
            raise ParseError(f"text after the end of the tree: {' '.join(tokens[i:i + 5])!r}")
        if tok == "(":
            label = None
            if i + 1 < len(tokens) and tokens[i + 1] not in ("(", ")"):
                label, i = tokens[i + 1], i + 1
            node = Node(label, [])
            if stack:
                stack[-1].children.append(node)
            stack.append(node)
        elif tok == ")":
            if not stack:
                raise ParseError("unbalanced brackets: ')' without a matching '('")
            node = stack.pop()
            if not node.children:
                raise ParseError(f"node ({node.label or ''}) has no children")
            if not stack:
                root = node
        else:
            if not stack:
                raise ParseError(f"word {tok!r} outside the tree")
            stack[-1].children.append(tok)
        i += 1
    if stack:
        raise ParseError(f"unbalanced brackets: {len(stack)} '(' not closed at the end of the line")
    return root


def tree_words(node) -> List[str]:
    if isinstance(node, str):
        return [node]
    return [w for child in node.children for w in tree_words(child)]


def bpe_words(bpe_tokens: List[str]) -> List[List[str]]:
    """Group BPE sub-words into words (``@@`` marks a sub-word continued by the next)."""
    words, current = [], []
    for tok in bpe_tokens:
        current.append(tok)
        if not tok.endswith(BPE_CONTINUATION):
            words.append(current)
            current = []
    if current:
        words.append(current)
    return words


def _strip_bpe(pieces: List[str]) -> str:
    return "".join(p[: -len(BPE_CONTINUATION)] if p.endswith(BPE_CONTINUATION) else p for p in pieces)


def attach_subwords(tree: Node, bpe_tokens: List[str]) -> Node:
    """Replace each word leaf by a node of its sub-words; raises ParseError where they differ."""
    words = tree_words(tree)
    groups = bpe_words(bpe_tokens)
    for i, (word, pieces) in enumerate(zip(words, groups)):
        if PTB_ESCAPES.get(word, word) != _strip_bpe(pieces) and pieces != [UNK]:  # <unk>: a word out of vocabulary
            raise ParseError(
                f"word {i + 1} of the parse tree is {word!r} but the BPE line has "
                f"{' '.join(pieces)!r} ({_strip_bpe(pieces)!r}) there"
            )
    if len(words) != len(groups):
        raise ParseError(
            f"the parse tree has {len(words)} words but the BPE line has {len(groups)}"
            + (f"; first extra BPE word {' '.join(groups[len(words)])!r}" if len(groups) > len(words)
               else f"; first extra tree word {words[len(groups)]!r}")
        )
    it = iter(groups)

    def rebuild(node):
        if isinstance(node, str):
            return Node(node, list(next(it)))
        return Node(node.label, [rebuild(c) for c in node.children])

    return rebuild(tree)


def annotate(node, depth=0, first=0):
    """Set depth, size (sub-words) and first sub-word index of every node; returns the size."""
    if isinstance(node, str):
        return 1
    node.depth, node.first = depth, first
    size = 0
    for child in node.children:
        size += annotate(child, depth + 1, first + size)
    node.size = size
    return size


def _span(node, depth, first):
    """(depth, size, first) of a node or of a sub-word leaf."""
    if isinstance(node, str):
        return depth, 1, first
    return node.depth, node.size, node.first


def extract_phrases(tree: Node, max_tokens: int) -> List[int]:
    """Algorithm 1 on an annotated tree: phrase lengths (sub-words) from left to right."""
    pending = [_span(tree, 0, 0) + (tree,)]
    phrases = []
    while pending:
        depth, size, first, node = pending.pop()
        if size > max_tokens:
            offset = first
            for child in node.children:
                span = _span(child, depth + 1, offset)
                pending.append(span + (child,))
                offset += span[1]
            continue
        length = size
        while pending and pending[-1][0] == depth and length + pending[-1][1] <= max_tokens:
            length += pending.pop()[1]
        phrases.append(length)
    phrases.reverse()
    return phrases


def phrase_lengths(tree_line: str, bpe_line: str, rounding: str = "ceil") -> List[int]:
    """Phrase lengths in sub-words of one sentence (sum = its number of BPE tokens); the limit n
    is the footnote-2 size of the sentence (``rounding`` of seql / 6, as ``--phrase-size-rounding``)."""
    tree = attach_subwords(parse_tree(tree_line), bpe_line.split())
    n_subwords = annotate(tree)
    return extract_phrases(tree, int(ngram_phrase_size(torch.tensor(n_subwords + 1), rounding)))
