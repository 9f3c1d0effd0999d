"""``fairseq-train --arch ARCH --help`` lists the arch's model flags, the technique flags under their titles.

fairseq's ``parse_args_and_arch`` parses twice: first to learn ``--arch``, ``--task``, ..., then,
after adding their flags, for real. ``--help`` in the first parse prints the help and exits before
any model flag exists, so fairseq's help never shows them. With a registered ``--arch`` on the
command line, the first parse here leaves ``--help`` out, so the second one prints it, model flags
included. ``fusion_transformer``'s technique flags are argument groups inside fairseq's
"Model-specific configuration" group, which argparse's help skips (it only lists a parser's own
groups); the help shows them as groups of their own. Without ``--arch`` fairseq cannot know the
model: fairseq-train's help ends with a line saying how to see them.

A mistyped ``--arch`` gets one line with the nearest names (argparse's own refusal prints the usage
and all ~200 choices); argparse's other errors in fairseq's parsers (an unknown flag, a flag of another command, a
bad value) are one line too, without fairseq's 115-line usage, an unknown flag with the nearest flags.
"""
import argparse
import difflib
import functools
import re
import sys

from . import option_checks
from ..errors import FusionError

HELP = ("-h", "--help")
NO_ARCH_HINT = (
    "fairseq-fusion: add --arch ARCH to see the model's flags, among them fusion_transformer's technique flags "
    "under their titles; fusion-archs lists the archs, fusion-archs ARCH the flags of one."
)


def _arch(argv):
    probe = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    probe.add_argument("--arch", "-a")
    return probe.parse_known_args(argv)[0].arch


def _chooses_the_model(parser):
    """--arch is an option without a default (fairseq-train's; fairseq-generate's defaults to another model)."""
    return "--arch" in parser._option_string_actions and parser.get_default("arch") is None


def _first_parse_without_help(parser, argv):
    """The next ``parser.parse_known_args`` (fairseq's first parse) sees the arguments without --help."""
    first = parser.parse_known_args

    def without_help(args=None, namespace=None):
        del parser.parse_known_args  # later parses are argparse's own again
        return first([a for a in (argv if args is None else args) if a not in HELP], namespace)

    parser.parse_known_args = without_help


def _nested_groups_shown(parser):
    """``format_help`` lists the argument groups made inside other groups after their container."""
    format_help = parser.format_help

    def flattened(groups):
        for group in groups:
            yield group
            yield from flattened(getattr(group, "_action_groups", []))

    def format_with_nested_groups():
        own = parser._action_groups
        parser._action_groups = list(flattened(own))
        try:
            return format_help()
        finally:
            parser._action_groups = own

    parser.format_help = format_with_nested_groups


def check_arch_name(name, registry):
    """Refuse an ``--arch`` that no model registered, naming the nearest registered ones."""
    if name is None or name in registry:
        return
    near = difflib.get_close_matches(name, sorted(registry), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise FusionError(f"--arch {name}: no such arch{hint} (fusion-archs lists the plugin's archs)")


def _one_line_errors(parser):
    """argparse's ``parser.error`` without the usage: ``fairseq-fusion: error: PROG: MESSAGE`` and exit status 2."""
    def error(message):
        missing = re.match(r"argument (--[\w-]+): invalid \w+ value: '\?\?\?'", message)
        if missing:  # a field of fairseq's without a default (omegaconf's MISSING, '???') that was not given
            message = f"{missing.group(1)} is required here: it has no default"
        if message.startswith("unrecognized arguments: "):
            flags = [a.split("=")[0] for a in message.split(": ", 1)[1].split() if a.startswith("--")]
            near = [n for f in flags for n in difflib.get_close_matches(f, parser._option_string_actions, n=2, cutoff=0.75)]
            if near:
                message += f" (did you mean {', '.join(dict.fromkeys(near))}?)"
        parser.exit(2, f"{FusionError(f'{parser.prog}: {message}; {parser.prog} --help lists the options')}\n")

    parser.error = error


def _with_arch_help(parse_args_and_arch):
    @functools.wraps(parse_args_and_arch)
    def wrapper(parser, input_args=None, *args, **kwargs):
        argv = sys.argv[1:] if input_args is None else list(input_args)
        _one_line_errors(parser)
        task = parser._option_string_actions.get("--task")
        if task is not None and task.default is None and not any(a == "--task" or a.startswith("--task=") for a in argv):
            raise FusionError(f"{parser.prog}: expected --task TASK, which this command has no default for "
                              "(--task translation for the plugin's archs)")  # fairseq-validate: KeyError
        if "--arch" in parser._option_string_actions:
            from fairseq.models import ARCH_MODEL_REGISTRY

            check_arch_name(_arch(argv), ARCH_MODEL_REGISTRY)
        if any(a in HELP for a in argv) and "format_help" not in vars(parser):  # once (it recurses)
            from fairseq.models import ARCH_MODEL_REGISTRY

            if _arch(argv) in ARCH_MODEL_REGISTRY:
                _first_parse_without_help(parser, argv)
            elif _chooses_the_model(parser) and not parser.epilog:
                parser.epilog = NO_ARCH_HINT
            _nested_groups_shown(parser)
        parsed = parse_args_and_arch(parser, input_args, *args, **kwargs)
        namespace = parsed[0] if isinstance(parsed, tuple) else parsed
        if input_args is None and hasattr(namespace, "max_update") and getattr(namespace, "optimizer", "") is None:
            # fairseq-train's own command line (its parser alone has --max-update): fairseq would end in a ValueError
            raise FusionError("--optimizer is required: fairseq-train has no default optimizer (--optimizer adam for "
                              "the papers' settings)")
        option_checks.check_namespace(namespace, parser, argv=argv)
        return parsed

    wrapper.patched_by_fairseq_fusion = True
    return wrapper
