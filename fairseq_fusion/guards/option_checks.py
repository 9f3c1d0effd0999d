"""The one check of every option's value against its domain (``option_domains.py``, the table in
``option_domain_table.py``; issue 58): a value outside it is refused in one line naming the option as the user wrote
it, the value and the domain, before any work.

It runs in command-line runs on what each entry point parsed (``check_namespace``: fairseq-train, -generate,
-interactive, -validate where ``parse_args_and_arch`` returns, fairseq-preprocess before its main; ``check_config``:
fairseq-hydra-train's configuration, where ``save_dir_lock`` sees it whole; ``check_parsed``: the ``fusion-*``
commands), and on the hub's keyword arguments wherever it loads a plugin model (``check_kwargs``). Standard library
only at import.
"""
import argparse
import sys
from typing import Callable

from . import option_domain_table as table
from .option_domains import By, Path, as_number, shown
from ..errors import FusionError

COMPONENTS = ("task", "arch", "optimizer", "lr_scheduler", "criterion", "bpe", "tokenizer", "scoring")


# --- the table's lookup --------------------------------------------------------------------------------------------

def domain_of(name, components=None, command=None):
    """The domain of option ``name`` (argparse's dest, a config field) for these ``components`` (``{"lr_scheduler":
    "inverse_sqrt", ...}``) in ``command`` (a ``fusion-*`` command, or None for fairseq's), or None where the table has
    none. The plugin's model flags take their domain from ``fusion_options`` (their choices and ranges)."""
    components = dict(components or {})
    domain = table.BY_COMMAND.get((command, name)) if command else None
    if domain is None:
        domain = table.BY_NAME.get(name)
    if domain is None:
        domain = next((d for match, d in table.RULES if match(name)), None)
    while isinstance(domain, By):
        domain = domain.pick(dict(components, command=command))
    return domain


def plugin_flags():
    """The plugin's model flags by name, as registered now."""
    from ..fusion_options import GROUPS

    return {f.name: f for g in reversed(GROUPS) for f in g.flags}  # a name in two groups: the first group's flag


def plugin_flag(name):
    return plugin_flags().get(name)


def refusal(name, value, components=None, command=None):
    """What is wrong with ``value`` of option ``name`` (None: nothing, unset, or no domain known)."""
    return _refusal(name, value, components or {}, command, plugin_flag(name), domain_of(name, components, command))


def _refusal(name, value, components, command, flag, domain):
    if value is None:
        return None
    if flag is not None and (flag.choices is not None or flag.bounds is not None):
        from ..fusion_options import expected

        wanted = expected(flag, value)
        return None if wanted is None else "expected " + wanted
    if domain is None or (command and isinstance(domain, Path)):  # a fusion-* command's paths: path_roles.py
        return None
    wrong = domain.refusal(value)
    return None if wrong is None else wrong + _component_note(name, components, command)


def _component_note(name, components, command):
    """" with --lr-scheduler inverse_sqrt" where the domain is that component's own."""
    entry = table.BY_NAME.get(name)
    if isinstance(entry, By) and entry.kind != "command" and components.get(entry.kind) in entry.domains:
        return f" with --{entry.kind.replace('_', '-')} {components[entry.kind]}"
    return ""


def check(values, components=None, label: Callable[[str], str] = None, command=None):
    """Refuse the first value of ``values`` (option name -> value) outside its domain, then the first broken relation
    between options (``option_domain_table.RELATIONS``), in one line naming the option by ``label(name)``."""
    label = label or (lambda name: "--" + name.replace("_", "-"))
    components = components or {}
    flags = plugin_flags()
    domains = {name: domain_of(name, components, command) for name in values}
    paths_last = sorted(values.items(), key=lambda item: isinstance(domains[item[0]], Path))
    for name, value in paths_last:  # the numbers first: they need no file system
        if name.startswith("_") or value is argparse.SUPPRESS or isinstance(value, bool):
            continue  # a flag: its type says all
        wrong = _refusal(name, value, components, command, flags.get(name), domains[name])
        if wrong is not None:
            raise FusionError(f"{_given(label(name), value)}: {wrong}")
    for names, holds, expected in table.RELATIONS:
        got = [values.get(n) for n in names]
        if all(as_number(v, False) is not None for v in got) and not holds(*(float(v) for v in got)):
            shown = ", ".join(_given(label(n), v) for n, v in zip(names, got))
            raise FusionError(f"{shown}: expected {expected}")


def _given(label, value):
    """``--beam 0``, ``beam=0``, ``generation.beam=0``."""
    return f"{label}{shown(value)}" if label.endswith("=") else f"{label} {shown(value)}"


def components_of(namespace):
    return {k: getattr(namespace, k, None) for k in COMPONENTS if getattr(namespace, k, None) is not None}


def _option_labels(parser, argv=()):
    """dest -> the option as the user wrote it in ``argv`` (of several spellings, the last given), else its first long
    option string (a positional: its name in capitals)."""
    labels, typed = {}, {}
    given = {token.split("=")[0]: i for i, token in enumerate(argv) if token.startswith("-")}  # option -> last place
    for action in getattr(parser, "_actions", []):
        strings = [s for s in action.option_strings if s.startswith("--")] or action.option_strings
        labels.setdefault(action.dest, strings[0] if strings else action.dest.upper())
        spelled = [(given[s], s) for s in action.option_strings if s in given]
        if spelled:
            typed[action.dest] = max(spelled)[1]
    return dict(labels, **typed)


def check_namespace(namespace, parser=None, command=None, argv=()):
    """The options a parser gave (fairseq's namespace, or a ``fusion-*`` command's) from ``argv``."""
    labels = _option_labels(parser, argv)
    check(vars(namespace), components_of(namespace),
          lambda name: labels.get(name, "--" + name.replace("_", "-")), command)


def check_parsed(parser, namespace):
    """A ``fusion-*`` command line, once parsed (``fairseq_fusion_tools/cli/__init__.py``): its typed options (its
    string options, paths and names, have their roles in ``fairseq_fusion_tools/path_roles.py``)."""
    typed = {a.dest for a in parser._actions if a.type not in (None, str)}
    labels = _option_labels(parser, sys.argv[1:])
    check({k: v for k, v in vars(namespace).items() if k in typed}, {},
          lambda name: labels.get(name, "--" + name.replace("_", "-")), parser.prog)


def check_config(cfg):
    """A fairseq configuration (fairseq-hydra-train's; every group's fields, named ``group.field=``)."""
    from omegaconf import DictConfig, OmegaConf

    components, values, labels = {}, {}, {}
    for group in cfg.keys():
        node = cfg.get(group)
        if isinstance(node, argparse.Namespace):  # a legacy model's arguments
            node = vars(node)
        elif isinstance(node, DictConfig):
            node = OmegaConf.to_container(node, resolve=True)
        if not isinstance(node, dict):
            continue
        kind = "arch" if group == "model" else group
        if kind in COMPONENTS and node.get("_name"):
            components[kind] = node["_name"]
        for name, value in node.items():
            values.setdefault(name, value)
            labels.setdefault(name, f"{group}.{name}=")
    check(values, components, labels.get)


def check_kwargs(kwargs, components=None):
    """The hub's keyword arguments (``from_pretrained(..., beam=5)``, ``translate(..., beam=5)``), named ``name=``."""
    check(dict(kwargs), components, lambda name: f"{name}=")
