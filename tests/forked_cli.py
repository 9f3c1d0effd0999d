"""Run a console script of this environment in a forked copy of the test process.

A new interpreter spends about 5 s importing torch, fairseq and the plugin before a command does anything; the test
process has imported them already. A fork gives the command its own process as a user's shell would (its own argv,
working directory, environment, file descriptors 1 and 2, exit status, atexit handlers) without that cost. What a
fork cannot give, a fresh interpreter does (``run_cli(..., fresh=True)`` and ``fork_ok``): a ``--user-dir`` other
than the imported plugin's folder, and commands that are not Python console scripts of this environment.
"""
import atexit
import io
import logging
import os
import sys
import threading
from importlib import metadata

import fairseq_fusion

PLUGIN_PATHS = {os.path.abspath(p) for p in fairseq_fusion.__path__}


def entry_point(name):
    found = [ep for ep in metadata.entry_points(group="console_scripts") if ep.name == name]
    return found[0] if found else None


def fork_ok(cmd, cwd):
    """Whether ``cmd`` runs the same in a fork: a console script of this environment whose --user-dir, if any, is
    the plugin this process imported (fairseq refuses a second folder of the same name)."""
    if not hasattr(os, "fork") or entry_point(cmd[0]) is None:
        return False
    base = cwd or os.getcwd()
    for i, a in enumerate(cmd):
        value = None
        if a == "--user-dir" and i + 1 < len(cmd):
            value = cmd[i + 1]
        elif a.startswith(("--user-dir=", "common.user_dir=")):
            value = a.split("=", 1)[1]
        if value is not None and os.path.realpath(os.path.join(base, value)) not in {os.path.realpath(p) for p in PLUGIN_PATHS}:
            return False
    return True


def _drain(fd, chunks):
    with os.fdopen(fd, "rb") as f:
        chunks.append(f.read())


ROOT_LEVEL = logging.root.level  # what importing fairseq leaves (its import chain configures the root logger)


def _configures_logging_first(module):
    """Whether ``module`` calls logging.basicConfig before it imports fairseq (fairseq_cli.train does: its log goes
    to stdout in fairseq's format; fairseq_cli.interactive imports fairseq first, whose import chain has already
    configured the root logger to stderr, so its basicConfig does nothing)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module)
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if any(n == "fairseq" or n.startswith("fairseq.") for n in names):
            return False
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "basicConfig":
            return True
    return False


def _fresh_logging_and_warnings(cmd, env, python_argv=None):
    """Logging and warnings as a new interpreter of the command has them: the test's capture handlers gone; the
    root logger as the command's own imports leave it (fairseq_cli's modules imported again, so that their
    basicConfig runs where it ran first; else the stderr handler in logging's basic format that importing fairseq
    leaves); Python's default warning filters, the plugin's (quiet.py) when the command loads it, and a showwarning
    that prints to stderr (the test's recording one gone; the plugin's, errors.py, over it when the command loads it)."""
    import warnings

    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    for name in [n for n in sys.modules if n == "fairseq_cli" or n.startswith("fairseq_cli.")]:
        del sys.modules[name]
    if python_argv is not None:  # python -m M: M's imports; -c / a script: nothing configured until they import
        module = python_argv[1] if python_argv[0] == "-m" else None
    else:
        module = entry_point(cmd[0]).module
    if module is None or (module.startswith("fairseq_cli.") and _configures_logging_first(module)) or module == "fusion_user_dir":
        root.setLevel(logging.WARNING)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
        root.addHandler(handler)
        root.setLevel(ROOT_LEVEL)
    logging.disable(logging.NOTSET)
    warnings.resetwarnings()
    for action, category, module in (("ignore", ResourceWarning, ""), ("ignore", ImportWarning, ""),
                                     ("ignore", PendingDeprecationWarning, ""), ("ignore", DeprecationWarning, ""),
                                     ("default", DeprecationWarning, "__main__")):
        warnings.filterwarnings(action, category=category, module=module)
    if env.get("PYTHONWARNINGS"):
        warnings._processoptions(env["PYTHONWARNINGS"].split(","))
    warnings.showwarning = warnings._showwarning_orig
    warnings._showwarnmsg_impl = lambda msg: sys.stderr.write(warnings._formatwarnmsg(msg))
    if cmd[0].startswith("fusion-") or any(a == "--user-dir" or a.startswith(("--user-dir=", "common.user_dir="))
                                           for a in cmd):
        from fairseq_fusion import errors, quiet

        quiet.install()
        errors.install_warnings()  # its warnings as one line (errors.warn); the excepthooks stay chained


def _same_plugin_folder_is_imported():
    """--user-dir (or hydra's common.user_dir) naming the imported plugin's folder by another path (a link, a
    relative path from elsewhere) is the plugin already imported, as it would be in a new process; fairseq compares
    the spelling of the path and would refuse it."""
    from fairseq import utils

    original = getattr(utils.import_user_module, "__wrapped__", utils.import_user_module)

    def import_user_module(args):
        user_dir = getattr(args, "user_dir", None)
        if user_dir is not None and os.path.realpath(os.path.abspath(user_dir)) in {os.path.realpath(p) for p in PLUGIN_PATHS}:
            return None
        return original(args)

    import_user_module.__wrapped__ = original
    utils.import_user_module = import_user_module


def python_main(argv):
    """What ``python ARGS`` runs, as (module whose imports configure logging, main): ``-m MODULE``, ``-c CODE`` or a
    script path, each as the interpreter runs it (``__main__``, sys.argv as Python sets it)."""
    import runpy

    if argv[0] == "-m":
        sys.argv = [argv[1]] + argv[2:]
        sys.path.insert(0, os.getcwd())
        return argv[1], lambda: runpy.run_module(argv[1], run_name="__main__", alter_sys=True) and None
    if argv[0] == "-c":
        sys.argv = ["-c"] + argv[2:]
        sys.path.insert(0, "")
        return None, lambda: exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    return None, lambda: runpy.run_path(argv[0], run_name="__main__") and None


def _import_time_exit_handlers():
    """The atexit handlers that modules imported before the fork register on import, in import order, as the
    command's own imports would: multiprocessing's terminates daemonic children (a data loader's workers, which
    hold the command's stdout and stderr open and would otherwise linger up to 5 s), torch's makes its data
    loaders' finalizers skip the join a finished interpreter no longer needs."""
    handlers = []
    for module, name in (("multiprocessing.util", "_exit_function"), ("torch.utils.data._utils", "_set_python_exit_flag")):
        if module in sys.modules:
            handlers.append(getattr(sys.modules[module], name))
    return handlers


def _child(exe, cmd, cwd, env, out_w, err_w, in_fd=None, python_argv=None):
    """In the forked process: become the command (a console script; with ``python_argv``, ``python ARGS``), run it,
    exit with its status. Never returns."""
    code = 1
    try:
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY) if in_fd is None else in_fd, 0)
        _same_plugin_folder_is_imported()
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        _fresh_logging_and_warnings(cmd, env, python_argv)
        atexit._clear()  # the test process's handlers are not the command's ...
        for handler in _import_time_exit_handlers():  # ... but those its imports register are
            atexit.register(handler)
        os.chdir(cwd or os.getcwd())
        os.environ.clear()
        os.environ.update(env)
        import torch
        torch.set_num_threads(int(env.get("OMP_NUM_THREADS", "1") or 1))
        if python_argv is not None:
            _, main = python_main(python_argv)
        else:
            sys.argv = [exe] + list(cmd[1:])
            main = entry_point(cmd[0]).load()
        if env.get("FUSION_TEST_PYTHON"):  # zygote.py's shims: the console scripts beside "this Python"
            sys.executable = env["FUSION_TEST_PYTHON"]
        try:
            result = main()
            code = 0 if result is None else result
        except SystemExit as e:
            code = e.code
        except BaseException:  # what the interpreter does with an uncaught exception
            sys.excepthook(*sys.exc_info())
            code = 1
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        atexit._run_exitfuncs()
    except BaseException:  # the runner itself failed: say so on the command's stderr
        try:
            import traceback
            traceback.print_exc()
        except BaseException:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)


def run_forked(exe, cmd, cwd, env, stdin=None):
    """(returncode, stdout, stderr) of ``cmd`` run in a fork of this process; ``stdin``: a file read as its standard
    input (else /dev/null)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        _child(exe, cmd, cwd, env, out_w, err_w, None if stdin is None else os.open(stdin, os.O_RDONLY))
    os.close(out_w)
    os.close(err_w)
    out, err = [], []
    readers = [threading.Thread(target=_drain, args=(out_r, out)), threading.Thread(target=_drain, args=(err_r, err))]
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    return rc, out[0].decode("utf-8", "replace"), err[0].decode("utf-8", "replace")
