"""Run a console script as fairseq's own tests run fairseq-train: its entry-point function, in this process.

``run_in_process(argv)`` gives the command, for the time of the call, what its process would give it (``sys.argv``,
the working folder, the environment, standard input), captures what it prints (stdout, stderr, and its log records
in fairseq's format on the stream its command logs to) and returns a ``subprocess.CompletedProcess``. An exception
it raises goes to ``sys.excepthook``, as the interpreter does (the plugin's hook prints a refusal as one line), with
exit status 1; ``SystemExit`` gives its status. Everything is put back afterwards.

``run_process(argv)`` starts the console script as a new process instead (5 s of imports): for what only a process
shows (its exit status and output as the interpreter ends it, a signal, a second plugin folder, which cannot be
imported into this process beside the first).

``expect(proc, holds, expected)`` is how a test asserts what a command did: a failure says what was expected and
shows the command, its exit status and the tail of its output (``output_tail``), not a bare ``False``.
"""
import contextlib
import gc
import io
import logging
import multiprocessing
import os
import subprocess
import sys
import warnings
from importlib import metadata

BIN = os.path.dirname(sys.executable)  # this environment's console scripts

# where a command's log records go, as its own imports set logging up (python -c "import fairseq_cli.train, logging;
# print(logging.root.handlers, logging.root.level)"): fairseq_cli.train configures stdout at INFO; the others keep
# the stderr handler that importing fairseq leaves
LOG_TO_STDOUT = {"fairseq-train"}
# the warnings module's default filters ("Default Warning Filter" in Python's documentation)
PYTHON_DEFAULT_FILTERS = [("default", DeprecationWarning, "__main__"), ("ignore", DeprecationWarning, ""),
                          ("ignore", PendingDeprecationWarning, ""), ("ignore", ImportWarning, ""),
                          ("ignore", ResourceWarning, "")]
LOG_FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"


def entry_point(name):
    """The function console script ``name`` runs (pyproject.toml's [project.scripts], fairseq's own)."""
    if not is_console_script(name):
        raise ValueError(f"{name} is not a console script of this environment")
    return metadata.entry_points(group="console_scripts")[name].load()


def is_console_script(name):
    return name in metadata.entry_points(group="console_scripts").names


def plugin_dir():
    """What $(fusion-user-dir) prints."""
    import fusion_user_dir

    return fusion_user_dir.user_dir()


@contextlib.contextmanager
def command_state(argv, cwd=None, env=None, stdin=None):
    """argv, working folder, environment and standard input (a file path; None: empty) of one command."""
    old = (sys.argv, os.getcwd(), dict(os.environ), sys.stdin)
    with open(stdin if stdin is not None else os.devnull, encoding="utf-8") as stdin_file:
        sys.argv, sys.stdin = [os.path.join(BIN, argv[0])] + list(argv[1:]), stdin_file
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        try:
            yield
        finally:
            sys.argv, sys.stdin = old[0], old[3]
            os.chdir(old[1])
            os.environ.clear()
            os.environ.update(old[2])


@contextlib.contextmanager
def captured_output(prog):
    """(stdout, stderr) StringIOs receiving what the command prints, its log records and its warnings."""
    from fairseq_fusion import errors
    from fairseq_fusion.compat import quiet

    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    old_handlers, old_level = root.handlers[:], root.level
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    added = {id(lg): lg.handlers[:] for lg in loggers}  # what a command adds (fairseq-preprocess: a log file)
    handler = logging.StreamHandler(out if prog in LOG_TO_STDOUT else err)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%Y-%m-%d %H:%M:%S"))
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            # the warning filters a new interpreter has (not pytest's), with the plugin's; warnings print on the
            # command's stderr (pytest would record them), the plugin's as one line
            warnings.resetwarnings()
            for action, category, module in PYTHON_DEFAULT_FILTERS:
                warnings.filterwarnings(action, category=category, module=module, append=True)
            quiet.filter_warnings()
            warnings.showwarning = errors.one_line_warnings(print_warning)
            yield out, err
    finally:
        root.handlers = old_handlers
        root.setLevel(old_level)
        for lg in loggers:
            for handler in lg.handlers[len(added[id(lg)]):]:
                handler.close()
            lg.handlers = added[id(lg)]


def print_warning(message, category, filename, lineno, file=None, line=None):
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def exit_status(code):
    """The exit status SystemExit(code) gives a process (a message: printed on stderr, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def forget_best_checkpoint():
    """fairseq-train keeps the best validation loss so far on a function (checkpoint_utils.save_checkpoint.best), for
    the life of the process: a new command starts without one, as a new process would."""
    from fairseq import checkpoint_utils

    if hasattr(checkpoint_utils.save_checkpoint, "best"):
        del checkpoint_utils.save_checkpoint.best


def stop_kept_data_workers():
    """A process would end the DataLoader worker processes fairseq keeps (``persistent_workers``) on exit; in this one
    they outlive the command, in a reference cycle (fairseq's EpochBatchIterator and its batch sampler), and when
    Python's GC collects it at some later point, torch waits its 5 s join timeout for the workers (pytorch#81794):
    measured 5 s stalls in later tests, 15 in a run of the suite. Dropping each loader's iterator now (its only
    reference) shuts the workers down at once."""
    if not multiprocessing.active_children():
        return
    from torch.utils.data import DataLoader

    for obj in gc.get_objects():  # by type(): isinstance() would ask deprecated objects their class, which warns
        if issubclass(type(obj), DataLoader) and obj._iterator is not None:
            obj._iterator = None


def run_in_process(argv, cwd=None, env=None, stdin=None):
    """CompletedProcess of console script ``argv[0]`` run with ``argv[1:]`` in this process."""
    from fairseq_fusion_tools import atomic_files

    main = entry_point(argv[0])
    forget_best_checkpoint()
    with command_state(argv, cwd, env, stdin), captured_output(argv[0]) as (out, err):
        try:
            returncode = exit_status(main())
        except SystemExit as e:
            returncode = exit_status(e.code)
        except Exception:
            sys.excepthook(*sys.exc_info())  # what the interpreter does with an uncaught exception
            returncode = 1
        finally:
            sys.stdout.flush()
            atomic_files.release_all()  # the --out locks a process holds until it exits
    stop_kept_data_workers()
    return subprocess.CompletedProcess(list(argv), returncode, out.getvalue(), err.getvalue())


def run_process(argv, cwd=None, env=None, stdin=None):
    """CompletedProcess of console script ``argv[0]`` started as a new process."""
    with open(stdin, "rb") if stdin is not None else contextlib.nullcontext() as stdin_file:
        return subprocess.run([os.path.join(BIN, argv[0])] + list(argv[1:]), cwd=cwd, env=dict(os.environ, **(env or {})),
                              stdin=stdin_file if stdin is not None else subprocess.DEVNULL, capture_output=True, text=True)


def output_tail(proc, chars=3000):
    """Command ``proc`` (a CompletedProcess), its exit status and the last ``chars`` characters of its stdout and
    stderr: what a failed assertion about it shows."""
    cmd = proc.args if isinstance(proc.args, str) else " ".join(str(a) for a in proc.args)
    return (f"{cmd}\nexited {proc.returncode}\n--- stdout (tail)\n{(proc.stdout or '')[-chars:]}\n"
            f"--- stderr (tail)\n{(proc.stderr or '')[-chars:]}")


def expect(proc, holds, expected):
    """Assert ``holds``, a fact about what command ``proc`` did or wrote; a failure reads "expected ``expected``"
    followed by the command's output tail."""
    if not holds:
        raise AssertionError(f"expected {expected}\n{output_tail(proc)}")


def expect_success(proc, what="exit status 0"):
    expect(proc, proc.returncode == 0, what)
    return proc
