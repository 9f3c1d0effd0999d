"""Text as every command reads it: UTF-8 (``.gz`` read as gzip), a byte-order mark removed.

A UTF-8 byte-order mark (bytes EF BB BF, U+FEFF; some Windows editors write one at the start of a file) is no part of
the text: read as text it glues itself to the first word, which becomes a word of its own (a vocabulary entry of
``fusion-prepare-text``, ``<unk>`` in fairseq-interactive, a mismatched word for a scorer). The readers here remove it,
with one warning naming the file (``errors.warn``). Used by ``fusion-prepare-text``, the scorers
(``fairseq_fusion_tools.scoring``: ``evaluation``, ``m2``, ``alignment_links``), fairseq-interactive's line reader and the hub
(``input_checks``). Standard library only: the scorers run without torch and fairseq.
"""
import codecs
import gzip
import io

from ..errors import warn

BOM = "\ufeff"


def bom_removed(name, several=False):
    return (f"{name} {'start' if several else 'starts'} with a UTF-8 byte-order mark (U+FEFF, which some editors write; it is not text): removed, "
            "so that it is not read as part of the first word")


def open_text(path, errors="strict"):
    """``path`` opened for reading text (UTF-8; gzip if it ends in ``.gz``), a byte-order mark at its start skipped
    with one warning naming the file."""
    raw = gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")
    try:
        if raw.peek(len(codecs.BOM_UTF8))[:len(codecs.BOM_UTF8)] == codecs.BOM_UTF8:
            raw.read(len(codecs.BOM_UTF8))
            warn(bom_removed(path))
    except BaseException:
        raw.close()
        raise
    return io.TextIOWrapper(raw, encoding="utf-8", errors=errors)


def read_lines(path):
    """The lines of a text file (``open_text``), without their newlines."""
    with open_text(path) as f:
        return [line.rstrip("\n") for line in f]


def without_bom(text, name):
    """``text`` (the first line of ``name``) without a byte-order mark at its start (one warning if it had one)."""
    if text.startswith(BOM):
        warn(bom_removed(name))
        return text[len(BOM):]
    return text
