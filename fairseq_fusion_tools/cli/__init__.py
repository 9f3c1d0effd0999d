"""Console scripts of fairseq-fusion: ``fusion-NAME`` runs ``NAME.cli_main`` (listed in pyproject.toml).

Every ``fusion-*`` command imports this package first, and it installs the one place where a missing torch or
fairseq becomes one line saying what to install, instead of a traceback: the scorers that need neither
(fusion-score-bleu, -score-m2, -score-rouge, -significance, -aer, -bleu-by-length, -training-curve) run without them,
every other command stops there (README: Installation; tests/test_packaging.py).
"""
import os
import sys

STACK = ("torch", "fairseq", "fairseq_cli")  # fairseq_cli ships with fairseq


def missing_stack_line(name):
    """The one line for a command that needs torch and fairseq, run where ``name`` (one of them) is missing."""
    import importlib.util

    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    prog = prog if prog.startswith("fusion-") else "this command"
    missing = [m for m in ("torch", "fairseq") if importlib.util.find_spec(m) is None] or [name]
    # the prefix of the plugin's refusals (fairseq_fusion.errors.PREFIX), not imported: that would load the plugin
    return (f"fairseq-fusion: error: {prog} needs torch and fairseq, and {sys.executable} has no "
            f"{' and no '.join(missing)}: install torch, then fairseq (README: Installation; in the repository, "
            "make install does both)")


def _excepthook(exc_type, exc, tb, _previous=sys.excepthook):
    name = (getattr(exc, "name", None) or "").split(".")[0]
    verbose = os.environ.get("FAIRSEQ_FUSION_TRACEBACK", "").lower() not in ("", "0", "false", "no")
    if issubclass(exc_type, ModuleNotFoundError) and name in STACK and not verbose:
        print(missing_stack_line("fairseq" if name == "fairseq_cli" else name), file=sys.stderr)
        return
    _previous(exc_type, exc, tb)


sys.excepthook = _excepthook
