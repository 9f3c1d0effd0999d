"""Raw text in and out of a prepared data folder, as ``fusion-prepare-text`` processed it (``prepare.json``).

Used by ``--bpe prepared`` (fairseq-interactive, the hub) and by the tools: ``fusion-prepare-text`` builds its
folders with these steps, the scorers detokenize with ``detokenize``.
"""
import functools
import json
import os
from typing import List, Sequence

from ..errors import FusionError
from .bpe_tools import bpe_applier

CJK_LANGS = ("zh",)


def chinese_segmenter(name):
    """Word segmentation of Chinese before tokenizing: jieba (its default dictionary and HMM), or None."""
    if name == "none":
        return None
    try:
        import jieba
    except ImportError:
        raise FusionError("Chinese text needs word segmentation: pip install jieba "
                          "(or --zh-segmenter none for text that is already segmented)") from None
    jieba.setLogLevel(60)
    return lambda line: " ".join(w for w in jieba.cut(line) if w.strip())


def punctuation_normalizer(lang):
    """Moses ``normalize-punctuation.perl`` then ``remove-non-printing-char.perl`` (sacremoses), as fairseq's
    prepare-wmt14 scripts run them before tokenizing."""
    from sacremoses import MosesPunctNormalizer

    return MosesPunctNormalizer(lang=lang, pre_replace_unicode_punct=True, post_remove_control_chars=True)


def codes_path(destdir, lang):
    """BPE codes of ``lang`` in a folder: per-language codes (--separate-bpe) else the joint ``bpe.codes``."""
    own = os.path.join(destdir, f"bpe.codes.{lang}")
    return own if os.path.exists(own) else os.path.join(destdir, "bpe.codes")


class TextPipeline:
    """Preprocess new raw sentences of one language exactly as ``fusion-prepare-text`` did in ``destdir``.

    Reads ``prepare.json`` when present (older folders without it: Moses tokens + ``bpe.codes``); its ``bpe_tool``
    applies the codes (subword-nmt or fastBPE, ``bpe_tools``).
    """

    def __init__(self, destdir, lang):
        from sacremoses import MosesTokenizer

        codes = codes_path(destdir, lang)
        manifest_path = os.path.join(destdir, "prepare.json")
        manifest = {}
        if os.path.exists(manifest_path):
            with open(manifest_path) as f:
                manifest = json.load(f)
        if not os.path.exists(codes):
            if manifest.get("preprocessed"):
                raise FileNotFoundError(
                    f"{destdir} was binarized from already-preprocessed text without its BPE codes (--bpe-codes), so raw "
                    f"{lang} text cannot be processed like it: give tokenized, BPE'd input (e.g. --input-format bpe)")
            raise FileNotFoundError(f"{codes} not found: expected a folder written by fusion-prepare-text")
        self.tokenizer = None if manifest.get("tokenizer", {}).get("name") == "none" else MosesTokenizer(lang=lang)
        self.normalizer = punctuation_normalizer(lang) if manifest.get("normalize_punctuation") else None
        self.segment = chinese_segmenter(manifest.get("zh_segmenter", "none")) if lang in CJK_LANGS else None
        self.truecaser = None
        if manifest.get("truecase"):
            from sacremoses import MosesTruecaser

            self.truecaser = MosesTruecaser(load_from=os.path.join(destdir, f"truecase-model.{lang}"))
        threshold = manifest.get("bpe_vocab_threshold")
        vocab = os.path.join(destdir, f"bpe.vocab.{lang}") if threshold else None
        self.bpe_tool = manifest.get("bpe_tool", "subword-nmt")
        self.bpe = bpe_applier(self.bpe_tool, codes, vocab, threshold,
                               why=f"{destdir} (prepared with --bpe-tool {self.bpe_tool})")

    def tokenize(self, line):
        if self.normalizer is not None:
            line = self.normalizer.normalize(line)
        if self.segment is not None:
            line = self.segment(line)
        if self.tokenizer is None:  # --tokenizer none: the input is tokenized already
            tok = " ".join(line.split())
        else:
            tok = self.tokenizer.tokenize(line, escape=False, return_str=True, aggressive_dash_splits=True)
        return self.truecaser.truecase(tok, return_str=True) if self.truecaser is not None else tok

    def __call__(self, line):
        """Raw sentence -> the BPE'd token string fairseq's dictionary encodes."""
        return self.bpe([self.tokenize(line.strip())])[0]


@functools.lru_cache(maxsize=None)
def moses_detokenizer(lang: str):
    """sacremoses' detokenizer of ``lang``, built once."""
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang=lang)


def detokenize(lines: Sequence[str], lang: str, detruecase: bool = False) -> List[str]:
    """Moses detokenizer (sacremoses); optionally the Moses detruecaser first (upper-case sentence starts)."""
    from sacremoses import MosesDetruecaser

    detok = moses_detokenizer(lang)
    detrue = MosesDetruecaser() if detruecase else None
    out = []
    for line in lines:
        tokens = line.split()
        if detrue is not None:
            tokens = detrue.detruecase(" ".join(tokens))
        out.append(detok.detokenize(tokens, unescape=True))
    return out
