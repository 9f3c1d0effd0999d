"""A binarized data folder (fairseq-preprocess's output, fusion-prepare-text's), checked where fairseq opens it.

fairseq ends in ``KeyError``, ``EOFError``, ``ValueError: max() arg is an empty sequence``, numpy's mmap errors or a
model of a 4-word vocabulary on a damaged folder. Refused here in one line naming the file and what was expected:

- a dictionary (``dict.LANG.txt``: ``check_dictionary``) that is no text file (``text_files.check_text``: a folder,
  empty, blank-only, NUL bytes, not UTF-8), a line that is not ``<token> <count> [#fairseq:overwrite]``, a token twice,
  or nothing but the padding entries fairseq-preprocess adds (``madeupword0000``: built from empty files);
- a split (``check_split``: ``SPLIT.SRC-TGT.LANG.idx`` and ``.bin``) with one of the pair missing, an ``.idx`` that is
  no index (fairseq's mmap format starts with ``MMIDIDX``), one cut short of the sentences its header counts, no
  sentence at all, or a ``.bin`` whose size disagrees with what its index describes (cut, or of another run).

``_checked_indexed_dataset`` wraps ``data_utils.load_indexed_dataset``, which every translation split goes through.
"""
import functools
import os
import struct

from .text_files import check_text
from ..errors import FusionError

MMAP_MAGIC = b"MMIDIDX\x00\x00"
LEGACY_MAGIC = b"TNTIDX\x00\x00"  # fairseq's older "cached"/"lazy" index: checked for its pair only
HEADER = len(MMAP_MAGIC) + 8 + 1 + 8  # magic, version, dtype code, number of sentences
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # a Dictionary has them before its file's entries
DICT_LINE = "<token> <count> [#fairseq:overwrite], as fairseq-preprocess writes"
PREPROCESSED = "as fairseq-preprocess writes them (binarize the split again)"


def check_dictionary(path):
    """A ``dict.*.txt`` fairseq's ``Dictionary.load`` reads into a vocabulary, or ``FusionError`` naming its line."""
    check_text(path, expected=f"one entry a line, {DICT_LINE}")
    seen, words = set(SPECIALS), 0
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.rstrip().rsplit(" ", 1)
            if len(fields) == 2 and fields[1] == "#fairseq:overwrite":
                fields = fields[0].rsplit(" ", 1)
                seen.discard(fields[0])
            if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
                raise FusionError(f"dictionary {path}: line {number} is {line.rstrip()[:60]!r}; expected {DICT_LINE}")
            if fields[0] in seen:
                raise FusionError(f"dictionary {path}: line {number}: {fields[0]!r} is there twice (or is one of "
                                  f"fairseq's own symbols {', '.join(SPECIALS)}); expected each token once")
            seen.add(fields[0])
            words += not fields[0].startswith("madeupword")
    if not words:
        raise FusionError(f"dictionary {path}: no word, only the padding entries fairseq-preprocess adds "
                          "(madeupword...): it was built from empty training files; expected the dictionary of the "
                          "training data")


def _itemsize(code):
    from fairseq.data.indexed_dataset import _code_to_dtype

    dtype = _code_to_dtype.get(code)
    return None if dtype is None else dtype().itemsize


def check_split(prefix):
    """``PREFIX.idx`` and ``PREFIX.bin`` (one language of a split) as fairseq-preprocess wrote them; nothing to say
    where neither exists (fairseq's callers decide whether the split must be there)."""
    idx, bin_ = prefix + ".idx", prefix + ".bin"
    if not os.path.exists(idx) and not os.path.exists(bin_):
        return
    for path, other in ((idx, bin_), (bin_, idx)):
        if os.path.isdir(path):
            raise FusionError(f"split file {path}: is a folder; expected the file {PREPROCESSED}")
        if not os.path.exists(path):
            raise FusionError(f"split file {path}: no such file beside {other}; expected both files of the split, "
                              f"{PREPROCESSED}")
    size = os.path.getsize(idx)
    with open(idx, "rb") as f:
        head = f.read(HEADER)
    if head.startswith(LEGACY_MAGIC):
        return
    if not head.startswith(MMAP_MAGIC):
        what = "is empty (0 bytes)" if size == 0 else "is not a fairseq index (it does not start with MMIDIDX)"
        raise FusionError(f"split index {idx}: {what}; expected the index {PREPROCESSED}")
    if size < HEADER:
        raise FusionError(f"split index {idx}: cut short in its header ({size} of {HEADER} bytes); expected the index "
                          f"{PREPROCESSED}")
    (version,), (code,), (count,) = struct.unpack("<Q", head[9:17]), struct.unpack("<B", head[17:18]), \
        struct.unpack("<Q", head[18:26])
    itemsize = _itemsize(code)
    if version != 1 or itemsize is None:
        raise FusionError(f"split index {idx}: version {version}, token type {code}: not an index this fairseq "
                          f"reads; expected the index {PREPROCESSED}")
    expected = HEADER + 12 * count
    if size < expected:
        raise FusionError(f"split index {idx}: cut short ({size} bytes; its header counts {count} sentences, which "
                          f"take {expected}); expected the whole index {PREPROCESSED}")
    if count == 0:
        raise FusionError(f"split index {idx}: no sentence (0 in its header): binarized from an empty file; expected "
                          "a split of at least one sentence")
    with open(idx, "rb") as f:
        f.seek(HEADER + 4 * (count - 1))
        (last_size,) = struct.unpack("<i", f.read(4))
        f.seek(HEADER + 4 * count + 8 * (count - 1))
        (last_pointer,) = struct.unpack("<q", f.read(8))
    data = last_pointer + last_size * itemsize
    found = os.path.getsize(bin_)
    if found != data:
        why = "cut short" if found < data else "longer: the two files are of different runs"
        raise FusionError(f"split data {bin_}: {found} bytes, but its index {os.path.basename(idx)} describes {data} "
                          f"({count} sentences): {why}; expected the pair {PREPROCESSED}")


def check_split_pair(folder, split, source, target):
    """The files of ``split`` of a translation folder whose pair is incomplete (fairseq's ``split_exists`` needs
    both .idx and .bin, so a split missing one reads as no split at all), named by ``check_split``."""
    for src, tgt in ((source, target), (target, source)):
        for lang in (source, target):
            check_split(os.path.join(folder, f"{split}.{src}-{tgt}.{lang}"))


def _checked_indexed_dataset(load_indexed_dataset):
    @functools.wraps(load_indexed_dataset)
    def wrapper(path, dictionary=None, dataset_impl=None, combine=False, default="cached"):
        if isinstance(path, str) and "://" not in path and dataset_impl in (None, "mmap", "cached", "lazy"):
            k = 0
            while k == 0 or (combine and (os.path.exists(f"{path}{k}.idx") or os.path.exists(f"{path}{k}.bin"))):
                check_split(path + (str(k) if k else ""))
                k += 1
        return load_indexed_dataset(path, dictionary, dataset_impl, combine, default)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper
