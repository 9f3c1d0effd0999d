"""Phrase spans of raw input for parse-tree phrase models (Xu et al. 2020 "+Parse") at inference.

Training and fairseq-generate read a span file next to the binarized data. Input that arrives as
text (fairseq-interactive, the hub's ``translate``, fusion-contrastive-score) gets its spans here,
from the BPE tokens the task receives: their words are parsed, by a tree looked up in a file of
trees (``--phrase-trees``, one bracketed tree per sentence, looked up by its words, ``<unk>``
matching any word) or by a parser run on them (``--phrase-parser stanza``), and Algorithm 1 turns
the tree into sub-word phrase lengths (``phrase_parse_tree.phrase_lengths``). A sentence without a
usable tree gets n-gram spans (footnote 2's size) with a warning, counted, or an error with
``--phrase-fallback error``.
"""
import logging
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from ..modules.phrase_parse_tree import (PTB_ESCAPES, UNK, ParseError, _strip_bpe, bpe_words, parse_tree, phrase_lengths,
                                         tree_words)
from ..modules.phrase_segmentation import ngram_phrase_size
from ..errors import FusionError


logger = logging.getLogger(__name__)


def ngram_spans(n_subwords: int, rounding: str = "ceil") -> List[int]:
    """n-gram phrase lengths covering ``n_subwords`` (footnote 2's n of the sentence with its ``</s>``)."""
    n = int(ngram_phrase_size(torch.tensor(n_subwords + 1), rounding))
    return [n] * (n_subwords // n) + ([n_subwords % n] if n_subwords % n else [])


def bpe_line_words(bpe_line: str) -> List[str]:
    """The words of a subword-nmt BPE line ("un@@ der way" -> ["underway", ...])."""
    return [_strip_bpe(pieces) for pieces in bpe_words(bpe_line.split())]


class TreeFile:
    """Bracketed trees read from ``path`` (one per line), looked up by their words."""

    def __init__(self, path: str):
        self.path = path
        self.exact: Dict[Tuple[str, ...], str] = {}
        self.by_length: Dict[int, List[Tuple[Tuple[str, ...], str]]] = defaultdict(list)
        try:
            f = open(path, encoding="utf-8")
        except OSError as e:
            raise FusionError(f"--phrase-trees {path}: {e.strerror}") from None
        with f:
            for i, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    words = tuple(PTB_ESCAPES.get(w, w) for w in tree_words(parse_tree(line)))
                except ParseError as e:
                    raise FusionError(f"--phrase-trees {path} line {i}: {e}") from None
                self.exact.setdefault(words, line.strip())
                self.by_length[len(words)].append((words, line.strip()))

    def lookup(self, words: Sequence[str]) -> Optional[str]:
        words = tuple(words)
        tree = self.exact.get(words)
        if tree is None and UNK in words:  # an <unk> of the model's vocabulary matches any word
            for cand, cand_tree in self.by_length.get(len(words), []):
                if all(w == UNK or w == c for w, c in zip(words, cand)):
                    return cand_tree
        return tree


class StanzaParser:
    """stanza's constituency parser on pre-tokenized words (``pip install stanza``; models by
    ``stanza.download(lang)`` or in ``model_dir``). Returns PTB-bracketed trees, None where it fails."""

    def __init__(self, lang: str, model_dir: Optional[str] = None, batch_size: int = 64):
        try:
            import stanza
        except ImportError:
            raise ImportError("--phrase-parser stanza needs stanza: pip install 'fairseq_fusion[parse]' "
                              "(or pip install stanza), then stanza.download('%s')" % lang) from None
        kwargs = {"dir": model_dir} if model_dir else {}
        try:
            self.pipeline = stanza.Pipeline(lang=lang, processors="tokenize,pos,constituency",
                                            tokenize_pretokenized=True, download_method=None, verbose=False,
                                            pos_batch_size=batch_size, constituency_batch_size=batch_size, **kwargs)
        except Exception as e:  # stanza raises its own errors for missing models
            raise RuntimeError(f"stanza could not load its {lang} constituency parser ({e}); download it with "
                               f"python -c \"import stanza; stanza.download('{lang}')\" or pass its folder") from None

    def parse(self, sentences: List[List[str]]) -> List[Optional[str]]:
        try:
            doc = self.pipeline(sentences)
            trees = [str(s.constituency) for s in doc.sentences]
            if len(trees) == len(sentences):
                return trees
        except Exception as e:  # one bad sentence: parse one by one below
            logger.debug(f"stanza failed on a batch ({e}); parsing its sentences one by one")
        out = []
        for words in sentences:
            try:
                out.append(str(self.pipeline([words]).sentences[0].constituency))
            except Exception:
                out.append(None)
        return out


PARSERS = {"stanza": StanzaParser}


class InferenceSpans:
    """Phrase lengths for BPE source lines, from a tree file or a parser, n-gram spans as the fallback."""

    def __init__(self, trees: Optional[str] = None, parser: Optional[str] = None, lang: str = "en",
                 parser_dir: Optional[str] = None, fallback: str = "ngram", rounding: str = "ceil"):
        if fallback not in ("ngram", "error"):
            raise FusionError(f"--phrase-fallback: expected ngram or error, got {fallback!r}")
        self.trees = TreeFile(trees) if trees else None
        self.parser = PARSERS[parser](lang, parser_dir) if parser and parser != "none" else None
        self.fallback, self.rounding = fallback, rounding
        self.sentences = self.fallbacks = 0

    def __call__(self, bpe_lines: List[str]) -> List[List[int]]:
        words = [bpe_line_words(line) for line in bpe_lines]
        trees: List[Optional[str]] = [self.trees.lookup(w) if self.trees else None for w in words]
        if self.parser is not None:
            todo = [i for i, t in enumerate(trees) if t is None]
            for i, tree in zip(todo, self.parser.parse([words[i] for i in todo]) if todo else []):
                trees[i] = tree
        spans = []
        for line, tree in zip(bpe_lines, trees):
            self.sentences += 1
            problem = "no tree" if tree is None else None
            if tree is not None:
                try:
                    spans.append(phrase_lengths(tree, line, self.rounding))
                    continue
                except ParseError as e:
                    problem = str(e)
            if self.fallback == "error":
                raise FusionError(f"no usable parse tree for the input {line!r} ({problem}): give its tree in "
                                 "--phrase-trees or use --phrase-parser; --phrase-fallback ngram uses n-gram spans")
            self.fallbacks += 1
            logger.warning(f"parse-tree phrases: {problem} for {line!r}; n-gram spans instead "
                           f"({self.fallbacks} of {self.sentences} sentences so far)")
            spans.append(ngram_spans(len(line.split()), self.rounding))
        return spans
