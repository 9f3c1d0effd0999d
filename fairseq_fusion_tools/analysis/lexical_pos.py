"""Part-of-speech categories of the probed positions (Emelin et al. 2019, A.3, Fig. 16-23).

A tag file has one line per sentence of the split and one tag per (tokenized, pre-BPE)
word. Each tag is mapped to the super-categories NOUN / VERB / ADJ-ADV / OTHER
(``super_category``: UD UPOS, Penn Treebank, TreeTagger's English and German STTS tags);
every sub-word of a word gets the word's category (the authors project TreeTagger's tags
onto the sub-words). The BPE text of the split gives the word boundaries (``@@`` marks a
sub-word continued by the next one): DATA/tok/SPLIT.bpe.LANG as fusion-prepare-text writes it.
"""
from typing import List

import numpy as np

CATEGORIES = ("NOUN", "VERB", "ADJ-ADV", "OTHER")

# fine tag -> category; tags not listed are OTHER
_NOUN = {"NOUN", "PROPN",  # UD
         "NN", "NNS", "NNP", "NNPS",  # PTB (NN is also STTS' common noun)
         "NP", "NPS",  # TreeTagger English proper nouns
         "NE"}  # STTS proper noun
_VERB = {"VERB", "AUX", "MD"}  # plus every tag starting with V: PTB VB*, TreeTagger VV*/VH*, STTS V*
_ADJ_ADV = {"ADJ", "ADV",  # UD (ADV is also STTS' adverb)
            "JJ", "JJR", "JJS", "RB", "RBR", "RBS", "WRB",  # PTB
            "ADJA", "ADJD", "PAV", "PROAV", "PWAV"}  # STTS adjectives, pronominal / wh-adverbs


def super_category(tag: str) -> str:
    tag = tag.upper()
    if tag in _NOUN:
        return "NOUN"
    if tag in _VERB or tag.startswith("V"):
        return "VERB"
    if tag in _ADJ_ADV:
        return "ADJ-ADV"
    return "OTHER"


def subword_categories(bpe_line: str, tag_line: str, where: str) -> List[int]:
    """Category index of each sub-word of a BPE line; ``where`` names file and line for errors."""
    subwords, tags = bpe_line.split(), tag_line.split()
    n_words = sum(1 for s in subwords if not s.endswith("@@"))
    if n_words != len(tags):
        raise ValueError(f"{where}: {len(tags)} tags but the BPE line has {n_words} words "
                         f"({bpe_line.strip()[:80]!r}); expected one tag per tokenized word")
    cats, word = [], 0
    for s in subwords:
        cats.append(CATEGORIES.index(super_category(tags[word])))
        if not s.endswith("@@"):
            word += 1
    return cats


class PositionCategories:
    """Category of each non-padding position of one side (-1 for </s>), by (sentence, position)."""

    def __init__(self, tag_path, bpe_path, sizes, side):
        flat, offsets = [], [0]
        with open(tag_path, encoding="utf-8") as tags, open(bpe_path, encoding="utf-8") as bpe:
            for i, (tag_line, bpe_line) in enumerate(zip(tags, bpe)):
                if i >= len(sizes):
                    break
                cats = subword_categories(bpe_line, tag_line, f"{tag_path} line {i + 1}")
                if len(cats) + 1 != sizes[i]:
                    raise ValueError(f"{bpe_path} line {i + 1}: {len(cats)} sub-words but the binarized sentence has "
                                     f"{sizes[i] - 1}; expected the BPE text of the binarized split")
                # encoder positions: sub-words then </s>; decoder input: </s> then sub-words
                cats = cats + [-1] if side == "encoder" else [-1] + cats
                flat.extend(cats)
                offsets.append(len(flat))
        if len(offsets) - 1 < len(sizes):
            raise ValueError(f"{tag_path} / {bpe_path}: {len(offsets) - 1} lines, expected {len(sizes)} (one per sentence)")
        self.flat = np.asarray(flat, dtype=np.int8)
        self.offsets = np.asarray(offsets, dtype=np.int64)

    def __call__(self, sentence, position):
        return self.flat[self.offsets[np.asarray(sentence)] + np.asarray(position)]
