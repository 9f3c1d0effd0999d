"""The two tools that apply BPE codes, behind one call: subword-nmt (the default) and fastBPE (``--bpe-tool fastbpe``;
the ``fastbpe`` extra, or ``make install FASTBPE=1``).

A folder uses one of them throughout: ``fusion-prepare-text`` records it in ``prepare.json`` (``bpe_tool``) and
applies its codes with it, and ``TextPipeline`` (``--bpe prepared``, the hub) applies them to new text with the same
one. Both segment alike with the same codes, the vocabulary filter included; only the whitespace around the tokens
differs (``tests/test_bpe_tools.py``). The codes are always learned with subword-nmt.
"""
import os
import tempfile

from ..errors import FusionError

TOOLS = ("subword-nmt", "fastbpe")


def require_fastbpe(why):
    """The fastBPE module, or FusionError (one line) naming what needs it and how to install it."""
    try:
        import fastBPE
    except ImportError:
        raise FusionError(f"{why} needs fastBPE, which is not installed: pip install 'fairseq_fusion[fastbpe]' "
                          "(in the repository: make install FASTBPE=1)") from None
    return fastBPE


def read_counts(vocab_path, threshold):
    """{subword: count} of a ``bpe.vocab.LANG`` file, only those counted >= ``threshold``."""
    with open(vocab_path, encoding="utf-8") as f:
        return {t: int(n) for t, n in (line.split() for line in f) if int(n) >= threshold}


def bpe_applier(tool, codes_path, vocab_path=None, vocab_threshold=None, why="--bpe-tool fastbpe"):
    """A function: tokenized lines -> the same lines split into subwords (``@@ `` joins), by ``tool``.

    With ``vocab_path``: only subwords counted >= ``vocab_threshold`` there are produced (subword-nmt's
    ``--vocabulary-threshold``; fastBPE is given the filtered vocabulary).
    """
    if tool not in TOOLS:
        raise FusionError(f"bpe_tool {tool!r}: expected one of {', '.join(TOOLS)}")
    if tool == "fastbpe":
        fastBPE = require_fastbpe(why)
        if vocab_path is None:
            return fastBPE.fastBPE(codes_path).apply
        with tempfile.TemporaryDirectory() as tmp:  # fastBPE reads the vocabulary when it is built
            kept = os.path.join(tmp, f"vocab.min{vocab_threshold}")
            with open(kept, "w", encoding="utf-8") as f:
                f.writelines(f"{t} {n}\n" for t, n in read_counts(vocab_path, vocab_threshold).items())
            return fastBPE.fastBPE(codes_path, kept).apply
    from subword_nmt.apply_bpe import BPE, read_vocabulary

    vocab = None
    if vocab_path is not None:
        with open(vocab_path, encoding="utf-8") as f:
            vocab = read_vocabulary(f, vocab_threshold)
    with open(codes_path, encoding="utf-8") as f:
        bpe = BPE(f, vocab=vocab)
    return lambda lines: [bpe.process_line(line) for line in lines]
