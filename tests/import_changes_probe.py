"""Run as ``python tests/import_changes_probe.py plugin|command|tools`` (a fresh interpreter): what importing the plugin
(``fairseq_fusion``), then configuring a command-line run (``fairseq_fusion.command_line.configure()``), or importing
the tools' command package (``fairseq_fusion_tools.cli``) changes, found without its list.

Snapshots, before and after that import, every attribute of the fairseq, fairseq_cli and argparse modules imported
(and of their classes), a few of torch's global settings, Python's hooks and the loggers' filters; prints JSON:
``changed``, the names of what differs, and ``listed``, each listed change's name in the same spelling.
"""
import argparse  # noqa: F401  (walked: the tools patch its parser)
import atexit
import importlib
import inspect
import json
import logging
import os
import signal
import sys
import warnings

import torch

FAIRSEQ = ["fairseq", "fairseq.binarizer", "fairseq.checkpoint_utils", "fairseq.options", "fairseq.tasks", "fairseq.tasks.translation",
           "fairseq.trainer", "fairseq.search", "fairseq.sequence_generator", "fairseq.data", "fairseq.data.data_utils",
           "fairseq.ngram_repeat_block", "fairseq.optim.fp16_optimizer", "fairseq.hub_utils", "fairseq.models",
           "fairseq.models.transformer", "fairseq.models.distributed_fairseq_model", "fairseq_cli.train",
           "fairseq_cli.generate", "fairseq_cli.interactive", "fairseq_cli.preprocess", "torch.serialization"]
WALKED = ("fairseq", "fairseq_cli", "argparse", "torch.serialization")  # module name prefixes whose attributes count


def walked_modules():
    return {name: module for name, module in list(sys.modules.items())
            if module is not None and name.startswith(WALKED) and not name.startswith("fairseq_fusion")}


def spelling(owner, name):
    """One spelling per object: a module's own name, a class by the module that defines it."""
    if inspect.ismodule(owner):
        return f"{owner.__name__}.{name}"
    return f"{owner.__module__}.{owner.__qualname__}.{name}"


def attributes():
    seen = {}
    for module in walked_modules().values():
        for name, value in list(vars(module).items()):
            if not inspect.ismodule(value):  # a submodule imported later is no change
                seen[spelling(module, name)] = value
            if inspect.isclass(value) and value.__module__.startswith(WALKED):
                for attr, member in list(vars(value).items()):
                    seen[spelling(value, attr)] = member
    return seen


def settings():
    cuda = torch.backends.cuda
    seen = {"sys.excepthook": sys.excepthook, "warnings.showwarning": warnings.showwarning,
            "warnings.filters": list(warnings.filters), "sys.meta_path": list(sys.meta_path),
            "torch.serialization.get_safe_globals": list(torch.serialization.get_safe_globals()),
            "torch.backends.cudnn.benchmark": torch.backends.cudnn.benchmark,
            "torch.backends.cudnn.deterministic": torch.backends.cudnn.deterministic,
            "torch.backends.cuda.matmul.allow_tf32": cuda.matmul.allow_tf32,
            "torch.get_default_dtype": torch.get_default_dtype()}
    seen["os.register_at_fork"] = forked_child_sigint()
    seen["atexit.register"] = atexit._ncallbacks()  # how many exit handlers are registered
    for flag in ("cudnn_sdp_enabled", "flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled"):
        seen[f"torch.backends.cuda.{flag}"] = getattr(cuda, flag)()
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            seen[f"logging.getLogger({name!r}).filters"] = list(logger.filters)
    return seen


def forked_child_sigint():
    """What Ctrl-C does in a process this one forks (``os.register_at_fork`` hooks are not listed anywhere)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, getattr(signal.getsignal(signal.SIGINT), "__qualname__", "?").encode())
        os._exit(0)
    os.close(w)
    found = os.read(r, 200).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return found


def differ(before, after):
    if isinstance(before, list):
        return len(before) != len(after) or any(a is not b and a != b for a, b in zip(before, after))
    return before is not after and before != after


def main(what):
    for name in FAIRSEQ:
        importlib.import_module(name)
    if what == "command":
        importlib.import_module("fairseq_fusion")
    before = {**attributes(), **settings()}
    said = None
    if what == "command":
        from fairseq_fusion import command_line

        said = command_line.configure()
    else:
        importlib.import_module({"plugin": "fairseq_fusion", "tools": "fairseq_fusion_tools.cli"}[what])
    after = {**attributes(), **settings()}
    changed = sorted(name for name, value in after.items()
                     if (name in before and differ(before[name], value))
                     or (name not in before and name.startswith("logging.") and value))  # a new logger's filter

    from fairseq_fusion import global_changes

    listed = {}
    scopes = {"plugin": ("import", "fix", "plugin"), "command": ("command",)}.get(what)
    changes = global_changes.TOOLS if scopes is None else [c for c in global_changes.CHANGES if c.scope in scopes]
    for change in changes:
        for target in (change.target,) + change.also:
            if target in before:
                listed[target] = target
            else:
                listed[target] = spelling(*global_changes.owner_and_name(target))
    print(json.dumps({"changed": changed, "listed": listed, "said": said}))


if __name__ == "__main__":
    main(sys.argv[1])
