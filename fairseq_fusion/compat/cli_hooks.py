"""Patches of fairseq's command modules (``fairseq_cli.interactive``, ``fairseq_cli.generate``), whenever imported.

fairseq-interactive and fairseq-generate import their module before the plugin (``--user-dir``); the hub, the tests
and a process that imports a command module later (or again) import it after. ``when_imported(NAME)`` registers a
patch that is applied to the module at once if it is imported, and otherwise by an import hook when it is.
``wrap_main`` is how a patch wraps a command's ``main(cfg)``.
"""
import functools
import importlib.abc
import importlib.machinery
import sys

PATCHES = {}  # module name -> [patch(module), ...], applied in the order registered


class _PatchingLoader(importlib.abc.Loader):
    """The module's own loader, then its patch."""

    def __init__(self, loader, patches):
        self.loader, self.patches = loader, patches

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        for patch in self.patches:
            patch(module)

    def __getattr__(self, name):  # get_source, get_filename, ...: the module's own loader answers
        return getattr(self.loader, name)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader, PATCHES[name])
        return spec


def install():
    """The import hook (``sys.meta_path``) that runs the patches registered by ``when_imported``."""
    if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())


def when_imported(name):
    """Decorator: ``patch(module)`` runs on module ``name`` now if it is imported, else when it is (``install``)."""
    def register(patch):
        PATCHES.setdefault(name, []).append(patch)
        if name in sys.modules:
            patch(sys.modules[name])
        return patch

    return register


def command_config(cfg):
    """A command's ``main`` argument as fairseq's omegaconf config (fairseq's ``main`` takes a Namespace too)."""
    from argparse import Namespace

    if isinstance(cfg, Namespace):
        from fairseq.dataclass.utils import convert_namespace_to_omegaconf

        return convert_namespace_to_omegaconf(cfg)
    return cfg


def wrap_main(module, marker, run):
    """``module.main(cfg)`` becomes ``run(main, cfg)``, ``cfg`` as an omegaconf config; once per ``marker``."""
    if getattr(module.main, marker, False):
        return
    main = module.main

    @functools.wraps(main)
    def wrapped(cfg):
        return run(main, command_config(cfg))

    setattr(wrapped, marker, True)
    module.main = wrapped
