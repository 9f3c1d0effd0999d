"""Console scripts of fairseq-fusion: ``fusion-NAME`` runs ``NAME.cli_main`` (listed in pyproject.toml).

Every ``fusion-*`` command imports this package first, and it installs the one place where a missing torch or
fairseq becomes one line saying what to install, instead of a traceback: the scorers that need neither
(fusion-score-bleu, -score-m2, -score-rouge, -significance, -aer, -bleu-by-length, -training-curve, -fetch-data:
``fairseq_fusion.compat.process_command.TORCH_FREE``) run without them, and leave them unimported where they are
installed; every other command stops there (README: Installation; tests/test_packaging.py).

It is also the one place where the other mistakes of a command line become one line ``fairseq-fusion: error: ...``
(tests/test_mistakes.py): argparse's errors of a ``fusion-*`` parser (an unknown flag, a flag of another command)
get that prefix, and an OSError or UnicodeDecodeError on a file the command line named (missing, a folder for a file,
unreadable, not UTF-8, an output folder that cannot be written) is said in one line naming the flag and the file
(``fairseq_fusion_tools/user_files.py``); the same errors on paths the user did not give keep their traceback.
And it is where every command line is checked, once parsed and before any work, for an output that would lose what
the user gave (an input, a running training's folder, a folder the command did not make: ``path_roles.py``).

Ctrl-C, from a command's first line on, is one line ``fairseq-fusion: interrupted; fusion-NAME stopped before it
finished`` with exit status 130 (the plugin's hook, ``fairseq_fusion/guards/command_output.py``, says the same once
the command has loaded the plugin; this one covers the imports before).
"""
import argparse
import os
import sys

from .. import path_roles, user_files
from ..user_files import PREFIX

STACK = ("torch", "fairseq", "fairseq_cli")  # fairseq_cli ships with fairseq


def missing_stack():
    """Which of torch and fairseq this Python cannot import (found, not imported)."""
    import importlib.util

    return [m for m in ("torch", "fairseq") if importlib.util.find_spec(m) is None]


def missing_stack_line(missing):
    """The one line for a command that needs torch and fairseq, run where ``missing`` (some of them) are not."""
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    prog = prog if prog.startswith("fusion-") else "this command"
    return (f"{PREFIX}{prog} needs torch and fairseq, and {sys.executable} has no "
            f"{' and no '.join(missing)}: install torch, then fairseq (README: Installation; in the repository, "
            "make install does both)")


def command():
    """The ``fusion-*`` command this process runs (console script or ``python -m``), else None."""
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if prog.startswith("fusion-"):
        return prog
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    module = spec.name if spec is not None else ""
    if module.startswith(__name__ + "."):
        return "fusion-" + module.rsplit(".", 1)[1].replace("_", "-")
    return None


def interrupted():
    """Ctrl-C in a ``fusion-*`` command before it loaded the plugin: the line ``command_output`` says after, exit 130
    (``os._exit``: the interpreter's teardown would wait for the threads the imports started)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while this is said
    try:
        print(f"\nfairseq-fusion: interrupted; {command()} stopped before it finished", file=sys.stderr, flush=True)
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001 - a closed stream: the status is still Ctrl-C's
        pass
    os._exit(130)


def _excepthook(exc_type, exc, tb, _previous=sys.excepthook):
    top = (getattr(exc, "name", None) or "").split(".")[0]
    verbose = user_files.shows_tracebacks()
    if issubclass(exc_type, KeyboardInterrupt) and command() and not verbose:
        interrupted()
    # only where torch or fairseq itself is missing: a module missing inside an installed one is a bug (traceback)
    missing = missing_stack() if issubclass(exc_type, ModuleNotFoundError) and top in STACK and not verbose else []
    if missing:
        print(missing_stack_line(missing), file=sys.stderr)
        return
    line = _user_file_line(exc, tb)
    if line is not None:
        print(PREFIX + line, file=sys.stderr)
        return
    _previous(exc_type, exc, tb)


def _parse_known_args(self, args=None, namespace=None, _parse=argparse.ArgumentParser.parse_known_args):
    if self.prog.startswith("fusion-") and args is None:  # the command line itself (sys.argv): a command-line run
        from fairseq_fusion import command_line

        command_line.configure()
    parsed = _parse(self, args, namespace)
    if self.prog.startswith("fusion-") and args is None:
        from fairseq_fusion.guards import option_checks

        user_files.remember(self, parsed[0])
        option_checks.check_parsed(self, parsed[0])  # every number in its domain (the one table of them)
        path_roles.check(self, parsed[0])  # before any work: no output that would lose what the user gave
    return parsed


def _error(self, message, _error=argparse.ArgumentParser.error):
    """argparse's usage and error line, the error line with the prefix of every refusal."""
    if not self.prog.startswith("fusion-"):
        _error(self, message)
    self.print_usage(sys.stderr)
    self.exit(2, f"{PREFIX}{self.prog}: {message}\n")


def _user_file_line(exc, tb):
    return None if user_files.shows_tracebacks() else user_files.line_for(exc, tb)


sys.excepthook = _excepthook
argparse.ArgumentParser.parse_known_args = _parse_known_args
argparse.ArgumentParser.error = _error
