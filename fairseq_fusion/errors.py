"""Bad input reaches the user as one line, ``fairseq-fusion: error: ...``, never a traceback.

The plugin's refusals raise ``FusionError`` (a ``ValueError``, so callers that catch those keep
working). In a command-line run (``command_line.py``) a ``sys.excepthook`` prints such an error as one
line and exits 1 (``guards/command_output.py``); fairseq-hydra-train prints it through hydra's compact
error path (``FusionError`` is one of hydra's ``CompactHydraException``s when hydra is installed). In a
program of the user's own it is an exception as any library raises, its message one line. Real bugs keep
their traceback; ``FAIRSEQ_FUSION_TRACEBACK=1`` shows it for the plugin's errors too.

Input that is processed but whose output is likely wrong (``input_checks.py``, a language that disagrees with the
checkpoint's or with ``-t``) is said with ``warn``: a Python warning of category ``FusionWarning``, which the
command-line runs print as one line ``fairseq-fusion: warning: ...`` on stderr, and which Python callers (the hub) record as
any other warning; one that the warning filters hide goes to the calling module's logger at WARNING instead, so
``PYTHONWARNINGS=ignore`` cannot silence it.
"""
import logging
import os
import sys
import warnings

PREFIX = "fairseq-fusion: error: "
WARNING_PREFIX = "fairseq-fusion: warning: "
TRACEBACK_ENV = "FAIRSEQ_FUSION_TRACEBACK"

try:  # hydra prints str(ex) of a CompactHydraException, without the traceback
    from hydra.errors import CompactHydraException as _Compact
except ImportError:  # pragma: no cover - hydra comes with fairseq
    class _Compact(Exception):
        pass


class FusionError(ValueError, _Compact):
    """A refusal of bad input: the message names the flag or file and what was expected."""

    def __init__(self, message):
        # a refusal that quotes another one ("fusion-x: " + str(error)) keeps a single prefix, at the start
        super().__init__(PREFIX + str(message).replace(PREFIX, ""))


# how the user gave a file (``path -> "PROG: --flag VALUE"`` or None): the fusion-* commands register theirs
# (fairseq_fusion_tools/user_files.py), so that a reader's refusal (``guards/text_files.py``) names the flag
NAMED_BY = []


def named(path):
    """``path`` as the user gave it (``NAMED_BY``), else the path itself."""
    return next((head for head in (name(str(path)) for name in NAMED_BY) if head), str(path))


class FusionWarning(UserWarning):
    """Input that is processed, but whose output is likely not what the user wants (the message says why)."""


def warn(message, logger=None):
    """One ``FusionWarning``: printed as the line ``fairseq-fusion: warning: MESSAGE`` (``install``). Where the warning
    filters hide it (``PYTHONWARNINGS=ignore``, ``-W ignore``, ``warnings.simplefilter("ignore")``), it goes to the
    logger of the calling module (``fairseq_fusion.guards.input_checks``, ...; ``logger``: another name) at WARNING instead,
    as fairseq reports its own problems: no filter silences a result that is likely wrong, and no line is printed
    twice. A filter ``error`` raises it; a caller recording warnings records it."""
    caller = sys._getframe(1).f_globals.get("__name__", __name__)
    with warnings.catch_warnings(record=True) as passed:  # the filters as they are, the warning kept, not shown
        warnings.warn(message, FusionWarning, stacklevel=2)
    for w in passed:  # through the filters: shown (or recorded) as any warning would have been
        warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
    if not any(issubclass(w.category, FusionWarning) and str(w.message) == str(message) for w in passed):
        logging.getLogger(logger or caller).warning(message)



def few(items, shown=3):
    """A refusal's list: the first ``shown`` items, then how many more ("a, b, c and 2 more")."""
    items = list(items)
    head = ", ".join(items[:shown])
    return head + (f" and {len(items) - shown} more" if len(items) > shown else "")


def show_tracebacks():
    return os.environ.get(TRACEBACK_ENV, "").lower() not in ("", "0", "false", "no")


def one_line_warnings(show):
    """A ``warnings.showwarning`` that prints a ``FusionWarning`` as one line, without the code location a user
    cannot act on, and passes every other warning to ``show``."""
    def showwarning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, FusionWarning):
            print(WARNING_PREFIX + str(message), file=file if file is not None else sys.stderr)
            return
        show(message, category, filename, lineno, file, line)

    showwarning.one_line_warnings = True
    return showwarning
