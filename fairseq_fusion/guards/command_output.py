"""How a command-line run reports (``command_line.py``): a refusal (``FusionError``) as one line with exit status 1,
Ctrl-C in a training as one line naming the checkpoint a re-run resumes from (exit status 130), a reader that left
(``fusion-archs | head``) in silence, and a ``FusionWarning`` as one line ``fairseq-fusion: warning: ...``.

Installed only in a command-line run: in a program of the user's own, Python's own hook and warning display stay.
"""
import os
import sys
import warnings

from ..errors import FusionError, one_line_warnings, show_tracebacks

# what a training run has saved last (set by the checkpoint hook in ``entry_checks``)
LAST_SAVED = {}
TRAINING = ("fairseq-train", "fairseq-hydra-train")
TRAINING_MODULES = ("fairseq_cli.train", "fairseq_cli.hydra_train")


def _argv_option(name, default=None):
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


def is_training():
    """Whether this process is fairseq-train or fairseq-hydra-train (console script or ``python -m``)."""
    prog = os.path.basename(sys.argv[0] if sys.argv else "")
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return prog.startswith(TRAINING) or (spec is not None and spec.name in TRAINING_MODULES)


def interrupted_message():
    """What a re-run of an interrupted ``fairseq-train`` resumes from."""
    save_dir = LAST_SAVED.get("save_dir") or _argv_option("--save-dir") or _argv_option("checkpoint.save_dir") \
        or "checkpoints"
    restore = _argv_option("--restore-file") or _argv_option("checkpoint.restore_file") or "checkpoint_last.pt"
    last = restore if os.path.isabs(restore) else os.path.join(save_dir, restore)
    if os.path.exists(last):
        where = f"{last}"
        if LAST_SAVED.get("path") and os.path.abspath(LAST_SAVED["path"]) == os.path.abspath(last):
            where += f" (update {LAST_SAVED['num_updates']})"
        return f"fairseq-fusion: interrupted; the same command resumes from {where}"
    return f"fairseq-fusion: interrupted before the first checkpoint ({last} does not exist): the same command starts from scratch"


def one_line_hook(previous):
    """The command-line run's ``sys.excepthook``, passing what it does not handle to ``previous``."""
    def excepthook(exc_type, exc, tb):
        _report(exc_type, exc, tb, previous)

    excepthook.one_line_errors = True
    return excepthook


def _report(exc_type, exc, tb, previous):
    if issubclass(exc_type, FusionError) and not show_tracebacks():
        print(str(exc), file=sys.stderr)
        return
    if issubclass(exc_type, BrokenPipeError):  # `fusion-archs | head`: the reader left, nothing to report
        sys.stderr.close()
        return
    if issubclass(exc_type, KeyboardInterrupt) and is_training():
        print(file=sys.stderr)
        print(interrupted_message(), file=sys.stderr)
        # skip the interpreter's teardown: native threads still running there end it in std::terminate
        # ("terminate called without an active exception") after this line
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    previous(exc_type, exc, tb)


def install_excepthook():
    """Refusals (``FusionError``) as one line, Ctrl-C in a training as one line."""
    if not getattr(sys.excepthook, "one_line_errors", False):
        sys.excepthook = one_line_hook(sys.excepthook)


def install_warnings():
    """``FusionWarning``s as one line (without the excepthook: a hook set over ours, the tools', chains to it)."""
    if not getattr(warnings.showwarning, "one_line_warnings", False):
        warnings.showwarning = one_line_warnings(warnings.showwarning)
