"""How a command-line run reports (``command_line.py``): a refusal (``FusionError``) as one line with exit status 1,
Ctrl-C as one line with exit status 130 (a training's names the checkpoint a re-run resumes from), a reader that left
(``fusion-archs | head``) in silence, and a ``FusionWarning`` as one line ``fairseq-fusion: warning: ...``.

Ctrl-C at any moment of a command-line run, from the moment the plugin is loaded (fairseq's commands load it with
``--user-dir``, after their own imports; the ``fusion-*`` commands' package has its own hook from their first line):
the one line, exit status 130, the run's worker processes stopped, and a second Ctrl-C while that is said ignored.
The processes a run forks (fairseq-preprocess's workers, DataLoader workers) end on the same Ctrl-C without a
report of their own (``quiet_children``). What must not be left half-written is written with Ctrl-C held back
(``interrupts_held``): a training's checkpoint and the copies fairseq makes of it.

Installed only in a command-line run: in a program of the user's own, Python's own hook and warning display stay.
"""
import contextlib
import os
import signal
import sys
import threading
import warnings

from ..compat.process_command import TRAINING, command_name
from ..errors import FusionError, one_line_warnings, show_tracebacks

# what a training run has saved last (set by the checkpoint hook in ``entry_checks``)
LAST_SAVED = {}


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
    return command_name() in TRAINING


def command():
    """The command this process runs, for the Ctrl-C line (``fairseq-generate``, ``fusion-archs``, ...)."""
    return command_name() or "the command"


def interrupted_message():
    """The Ctrl-C line: what a re-run of an interrupted training resumes from; for another command, that it stopped
    (what it writes is never left half-written: its results replace a file whole, a checkpoint is saved whole)."""
    if not is_training():
        return f"fairseq-fusion: interrupted; {command()} stopped before it finished"
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
    if issubclass(exc_type, KeyboardInterrupt) and not show_tracebacks():
        report_interrupt(tb)
    previous(exc_type, exc, tb)


def report_interrupt(tb=None):
    """Ctrl-C's one line, the run's worker processes stopped, exit status 130."""
    _ignore_further_interrupts()
    try:
        print(file=sys.stderr)  # past the "^C" the terminal echoed
        print(interrupted_message(), file=sys.stderr)
        stop_children()
        flush_log_writers()
        _collect(tb)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - a closed stream or a late signal: the status is still Ctrl-C's
        pass
    # skip the interpreter's teardown: native threads still running there end it in std::terminate
    # ("terminate called without an active exception") after this line
    exit_now(130)


def flush_log_writers():
    """What a training logged, written out before ``os._exit`` skips fairseq's exit hook that would: its TensorBoard
    writers (``--tensorboard-logdir``) and a W&B run (``--wandb-project``), where the run opened them."""
    progress = sys.modules.get("fairseq.logging.progress_bar")
    if progress is not None:
        progress._close_writers()
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish(exit_code=130)


def _collect(tb):
    """What the interrupted frames held, collected: a worker pool's semaphores are given back to multiprocessing's
    resource tracker, which would otherwise warn of them as leaked after this process has gone. An object Ctrl-C left
    half-built fails in its ``__del__`` here (fairseq's ``MMapIndexedDataset`` interrupted in ``__init__``:
    "Exception ignored in ... AttributeError" after the one line): said nowhere, as the process ends now."""
    import gc
    import traceback

    previous = sys.unraisablehook
    sys.unraisablehook = _unsaid
    try:
        if tb is not None:
            traceback.clear_frames(tb)
        gc.collect()
    finally:
        sys.unraisablehook = previous


def _unsaid(unraisable):
    pass


def exit_now(status):
    os._exit(status)


def _ignore_further_interrupts():
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def stop_children():
    """The worker processes this run started (multiprocessing's: a pool's, DataLoader's), which ``os._exit`` would
    leave running on: stopped now, their end not reported (torch's DataLoader reports a worker's end from its
    SIGCHLD handler, as an error)."""
    import multiprocessing

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for child in multiprocessing.active_children():
        child.terminate()


@contextlib.contextmanager
def interrupts_held(what):
    """Ctrl-C held back until the block has finished, then raised as ``KeyboardInterrupt``; where the wait passes a
    second, ``what`` is said ("fairseq-fusion: Ctrl-C: finishing the checkpoint being saved first"). Outside the main
    thread the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = []

    def hold(signum, frame):
        if not pressed:
            notice = threading.Timer(HELD_NOTICE_S, print, (f"\nfairseq-fusion: Ctrl-C: finishing {what} first",),
                                     {"file": sys.stderr, "flush": True})
            notice.daemon = True
            notice.start()
            pressed.append(notice)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        for notice in pressed:
            notice.cancel()
    if pressed:
        raise KeyboardInterrupt


HELD_NOTICE_S = 1.0


def _quiet_interrupt(signum, frame):
    """A forked worker's Ctrl-C: ``KeyboardInterrupt`` as Python's (DataLoader workers end on it in silence), its
    report (multiprocessing prints a worker's traceback) left unsaid: the command's own line says it."""
    try:
        sys.stderr = open(os.devnull, "w")
    except OSError:
        pass
    raise KeyboardInterrupt


def _in_forked_child():
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _quiet_interrupt)


def quiet_children():
    """The processes this run forks from now on end on Ctrl-C without a traceback of their own."""
    if not QUIET_CHILDREN:
        os.register_at_fork(after_in_child=_in_forked_child)
        QUIET_CHILDREN.append(True)


QUIET_CHILDREN = []


def install_excepthook():
    """Refusals (``FusionError``) and Ctrl-C as one line."""
    if not getattr(sys.excepthook, "one_line_errors", False):
        sys.excepthook = one_line_hook(sys.excepthook)


def install_warnings():
    """``FusionWarning``s as one line (without the excepthook: a hook set over ours, the tools', chains to it)."""
    if not getattr(warnings.showwarning, "one_line_warnings", False):
        warnings.showwarning = one_line_warnings(warnings.showwarning)
