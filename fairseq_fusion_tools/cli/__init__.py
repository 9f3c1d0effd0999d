"""Console scripts of fairseq-fusion: ``fusion-NAME`` runs ``NAME.cli_main`` (listed in pyproject.toml).

Every ``fusion-*`` command imports this package first, and it installs the one place where a missing torch or
fairseq becomes one line saying what to install, instead of a traceback: the scorers that need neither
(fusion-score-bleu, -score-m2, -score-rouge, -significance, -aer, -bleu-by-length, -training-curve) run without them,
every other command stops there (README: Installation; tests/test_packaging.py).
"""
import os
import sys

STACK = ("torch", "fairseq", "fairseq_cli")  # fairseq_cli ships with fairseq


def missing_stack():
    """Which of torch and fairseq this Python cannot import (found, not imported)."""
    import importlib.util

    return [m for m in ("torch", "fairseq") if importlib.util.find_spec(m) is None]


def missing_stack_line(missing):
    """The one line for a command that needs torch and fairseq, run where ``missing`` (some of them) are not."""
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    prog = prog if prog.startswith("fusion-") else "this command"
    # the prefix of the plugin's refusals (fairseq_fusion.errors.PREFIX), not imported: that would load the plugin
    return (f"fairseq-fusion: error: {prog} needs torch and fairseq, and {sys.executable} has no "
            f"{' and no '.join(missing)}: install torch, then fairseq (README: Installation; in the repository, "
            "make install does both)")


def _excepthook(exc_type, exc, tb, _previous=sys.excepthook):
    top = (getattr(exc, "name", None) or "").split(".")[0]
    verbose = os.environ.get("FAIRSEQ_FUSION_TRACEBACK", "").lower() not in ("", "0", "false", "no")
    # only where torch or fairseq itself is missing: a module missing inside an installed one is a bug (traceback)
    missing = missing_stack() if issubclass(exc_type, ModuleNotFoundError) and top in STACK and not verbose else []
    if missing:
        print(missing_stack_line(missing), file=sys.stderr)
        return
    _previous(exc_type, exc, tb)


sys.excepthook = _excepthook
