"""fairseq-preprocess's input files, each checked before the first is read (fairseq reads them as they come: an
empty or blank-only training file binarizes into a split of no sentence and a dictionary of padding entries, which
fairseq-train ends in ``ValueError: max() arg is an empty sequence``; a NUL byte, bytes that are not UTF-8 or gzip data
end in a traceback half-way, after the dictionaries are written).

The text of ``--trainpref``, ``--validpref`` and ``--testpref`` (``PREFIX.LANG``, each prefix of a comma-separated list)
and ``--alignfile`` go through ``text_files.check_text``, ``--srcdict`` and ``--tgtdict`` through
``data_folders.check_dictionary``; a refusal is one line naming the flag and the file. fairseq-preprocess loads the
plugin inside its ``main`` (``--user-dir``), so the check wraps the first functions ``main`` calls after that:
``_build_dictionary`` (no ``--srcdict``) and ``_make_all`` (both dictionaries given).
"""
import functools
import os

from .data_folders import check_dictionary
from .text_files import TextFileError, check_text
from ..errors import FusionError

MARKER = "patched_by_fairseq_fusion"
_CHECKED = [None]  # the args checked last (main calls both functions, and _make_all once per language)


def input_files(args):
    """(flag, value, path) of every text file fairseq-preprocess's ``args`` make it read."""
    langs = [args.source_lang] + ([args.target_lang] if not args.only_source else [])
    for flag, prefixes in (("--trainpref", args.trainpref), ("--validpref", args.validpref),
                           ("--testpref", args.testpref)):
        for prefix in (prefixes.split(",") if prefixes else []):
            for lang in langs:
                yield flag, prefix, f"{prefix}.{lang}" if lang else prefix
    if getattr(args, "alignfile", None):
        yield "--alignfile", args.alignfile, args.alignfile


def check_inputs(args):
    if _CHECKED[0] is args:
        return
    _CHECKED[0] = args
    for flag in ("--srcdict", "--tgtdict"):
        path = getattr(args, flag[2:], None)
        if path:
            if not os.path.exists(path):
                raise FusionError(f"{flag} {path}: no such file; expected a dictionary (dict.LANG.txt)")
            check_dictionary(path)
    for flag, value, path in input_files(args):
        if not os.path.exists(path):
            hint = " (fairseq-preprocess reads no gzip: decompress it)" if os.path.exists(path + ".gz") else ""
            raise FusionError(f"{flag} {value}: no such file {path}{hint}; expected one sentence a line in "
                              "PREFIX.LANG")
        try:
            check_text(path, plain=True)  # fairseq reads no gzip
        except TextFileError as e:
            raise FusionError(f"{flag} {value}: {e.path}: {e.what}") from None


def _checked(function, args_at):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        check_inputs(kwargs["args"] if "args" in kwargs else args[args_at])
        return function(*args, **kwargs)

    setattr(wrapper, MARKER, True)
    return wrapper


def patch_preprocess(module):
    """``module``'s (``fairseq_cli.preprocess``) ``_build_dictionary(filenames, task, args, ...)`` and
    ``_make_all(lang, vocab, args)`` check every input first."""
    module._build_dictionary = _checked(module._build_dictionary, 2)
    module._make_all = _checked(module._make_all, 2)
