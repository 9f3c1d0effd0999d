"""Text as every command reads it: UTF-8 (``.gz`` read as gzip), checked where it is opened, a byte-order mark removed.

``check_text`` reads the file once in blocks (the standard library's C loops: about a second per GB) and refuses in
one line naming the file (``TextFileError``; the ``fusion-*`` commands name the flag that gave it,
``errors.named``): a folder, an empty or blank-only file, a NUL byte
(a binary file), bytes that are not UTF-8 (line and byte offset), a carriage return that is no line end (Python
would split the line there), a cut or corrupt gzip, gzip data without ``.gz`` in its name or ``.gz`` without gzip
data. CRLF line ends are read as LF by every consumer (Python's text mode, fairseq's readers, fairseq-interactive's
``strip``): one warning names the file and how many lines end so.

A UTF-8 byte-order mark (bytes EF BB BF, U+FEFF; some Windows editors write one at the start of a file) is no part of
the text: read as text it glues itself to the first word, which becomes a word of its own (a vocabulary entry of
``fusion-prepare-text``, ``<unk>`` in fairseq-interactive, a mismatched word for a scorer). The readers here remove it,
with one warning naming the file (``errors.warn``). Used by ``fusion-prepare-text``, the scorers
(``fairseq_fusion_tools.scoring``: ``evaluation``, ``m2``, ``alignment_links``), fairseq-preprocess's input files,
fairseq-interactive's line reader and the hub (``input_checks``, ``input_files``). Standard library only: the scorers
run without torch and fairseq.
"""
import codecs
import gzip
import io
import os
import zlib

from ..errors import FusionError, named, warn

BOM = "\ufeff"
GZIP_MAGIC = b"\x1f\x8b"
BLOCK = 1 << 20
EXPECTED = "UTF-8 text, one sentence a line"


class TextFileError(FusionError):
    """A text file that cannot be read as text: ``path`` and ``what``; the message names the file as the user gave it
    (``errors.named``: a ``fusion-*`` command's flag first)."""

    def __init__(self, path, what):
        self.path, self.what = str(path), what
        super().__init__(f"{named(path)}: {what}")


def bom_removed(name, several=False):
    return (f"{name} {'start' if several else 'starts'} with a UTF-8 byte-order mark (U+FEFF, which some editors write; it is not text): removed, "
            "so that it is not read as part of the first word")


def _raw(path, plain=False):
    """``path`` opened as bytes: gzip where it is named ``.gz``; refused where name and content disagree, or where it
    is gzip and the consumer reads ``plain`` text only."""
    if os.path.isdir(path):
        raise TextFileError(path, f"is a folder; expected a file of {EXPECTED}")
    with open(path, "rb") as f:
        head = f.read(len(GZIP_MAGIC))
    if plain and head == GZIP_MAGIC:
        raise TextFileError(path, "is gzip-compressed, and this command reads plain text only; expected plain text "
                                  "(decompress it first: gunzip -k, or zcat FILE | the command with - for stdin)")
    named_gz = str(path).endswith(".gz")
    if named_gz and head and head != GZIP_MAGIC:
        raise TextFileError(path, "is named .gz but is not gzip data; expected gzip-compressed text (or the name "
                                  "without .gz)")
    if not named_gz and head == GZIP_MAGIC:
        raise TextFileError(path, "is gzip-compressed but not named .gz; expected plain text, or the name ending in "
                                  ".gz to read it as gzip")
    return gzip.open(path, "rb") if named_gz and head else open(path, "rb")


def _blocks(raw, path):
    """The decompressed bytes of ``raw`` in blocks that end at a line end (the last block: the rest)."""
    rest = b""
    while True:
        try:
            chunk = raw.read(BLOCK)
        except EOFError:
            raise TextFileError(path, "truncated gzip (the compressed data ends before its end marker: a cut copy or "
                                      "download); expected a whole gzip file") from None
        except (gzip.BadGzipFile, zlib.error) as e:
            raise TextFileError(path, f"corrupt gzip ({e}); expected a whole gzip file") from None
        if not chunk:
            if rest:
                yield rest
            return
        data = rest + chunk
        end = data.rfind(b"\n") + 1
        if end:
            yield data[:end]
        rest = data[end:]


def _line(block, before, at):
    """The 1-based line number of byte ``at`` of ``block``, which starts after ``before`` lines."""
    return before + block.count(b"\n", 0, at) + 1


def check_text(path, utf8=True, expected=EXPECTED, plain=False, lone_cr=True):
    """Refuse ``path`` (``TextFileError``) unless it is non-blank text as described above; warn of CRLF line ends.
    ``utf8``: False where the consumer reads undecodable lines itself (fairseq-interactive's reader, a log read with
    replacement); ``plain``: gzip refused (a consumer that reads no gzip); ``lone_cr``: False where a carriage
    return splits no line (fairseq-interactive splits at LF only) or is expected (a log's progress bars). Returns the
    number of lines."""
    lines = offset = crlf = 0
    text = False
    with _raw(path, plain) as raw:
        for block in _blocks(raw, path):
            if offset == 0 and block.startswith(codecs.BOM_UTF8):
                body = block[len(codecs.BOM_UTF8):]
            else:
                body = block
            nul = block.find(b"\0")
            if nul >= 0:
                raise TextFileError(path, f"line {_line(block, lines, nul)} has a NUL byte (byte offset "
                                          f"{offset + nul}): a binary file, not UTF-8 text; expected {expected}")
            if utf8:
                try:
                    block.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise TextFileError(path, f"line {_line(block, lines, e.start)} is not UTF-8 (byte "
                                              f"0x{block[e.start]:02x} at byte offset {offset + e.start}); expected "
                                              f"{expected}") from None
            pairs = block.count(b"\r\n")
            if lone_cr and block.count(b"\r") != pairs:
                at = next(i for i in range(len(block)) if block[i:i + 1] == b"\r" and block[i + 1:i + 2] != b"\n")
                raise TextFileError(path, f"line {_line(block, lines, at)} has a carriage return (\\r) "
                                          "that ends no line (old Mac line ends, or a stray \\r): it would be read as a "
                                          f"line end and split the line; expected {expected}")
            crlf += pairs
            text = text or bool(body.strip())
            lines += block.count(b"\n") + (not block.endswith(b"\n"))
            offset += len(block)
    if offset == 0:
        raise TextFileError(path, f"is empty (0 bytes{' of text' if str(path).endswith('.gz') else ''}); expected "
                                  f"{expected}")
    if not text:
        raise TextFileError(path, f"has only blank lines ({lines}); expected {expected}")
    if crlf:
        warn(f"{path}: {crlf} line{'s' if crlf > 1 else ''} end in CRLF (Windows line ends): read as LF, the \\r "
             "dropped")
    return lines


def open_text(path, errors="strict"):
    """``path`` checked (``check_text``; its UTF-8 and carriage returns only with ``errors="strict"``: a log read with
    replacement has progress bars) and opened for reading text (UTF-8; gzip if it ends in ``.gz``), a byte-order mark
    at its start skipped with one warning naming the file."""
    check_text(path, utf8=errors == "strict", lone_cr=errors == "strict")
    raw = _raw(path)
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
