"""Command-line flags of ``fusion_transformer``, grouped by technique.

Each technique (one module in ``fairseq_fusion/modules``) contributes an ``OptionGroup``:
its flags with their off-defaults, a validation of the combination, and ``attach`` that
installs the technique into a built model through the seams. The base architecture sets
every flag to its off value, so presets only name what they switch on.
"""
from dataclasses import dataclass, field
from typing import Callable, List, Optional


@dataclass
class Flag:
    name: str  # attribute name, e.g. "lexical_shortcuts"
    default: object
    help: str
    type: Optional[Callable] = None
    choices: Optional[List] = None


@dataclass
class OptionGroup:
    title: str
    flags: List[Flag] = field(default_factory=list)
    validate: Optional[Callable] = None  # validate(args) -> raise ValueError naming flags
    attach: Optional[Callable] = None  # attach(model, args) -> None
    finalize: Optional[Callable] = None  # finalize(model, args): after every group's attach (e.g. load weights)


GROUPS: List[OptionGroup] = []


def register(group: OptionGroup) -> OptionGroup:
    GROUPS.append(group)
    return group


def add_args(parser):
    for group in GROUPS:
        argp = parser.add_argument_group(group.title)
        for flag in group.flags:
            opt = "--" + flag.name.replace("_", "-")
            if flag.type is bool:
                argp.add_argument(opt, type=_str2bool, nargs="?", const=True, metavar="BOOL", help=flag.help)
            else:
                argp.add_argument(opt, type=flag.type, choices=flag.choices, metavar=None if flag.choices else "X", help=flag.help)


def set_defaults(args):
    """Fill every technique flag the args lack with its off value (used by every arch)."""
    for group in GROUPS:
        for flag in group.flags:
            if getattr(args, flag.name, None) is None:
                setattr(args, flag.name, flag.default)


def validate(args):
    set_defaults(args)
    for group in GROUPS:
        if group.validate is not None:
            group.validate(args)


def attach(model, args):
    for group in GROUPS:
        if group.attach is not None:
            group.attach(model, args)
    for group in GROUPS:
        if group.finalize is not None:
            group.finalize(model, args)


def _str2bool(value):
    if isinstance(value, bool):
        return value
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected a boolean (true/false), got {value!r}")


# the criterion each named architecture trains with when none is given (contract tests, recipes)
DEFAULT_CRITERION = {}


def default_criterion(arch):
    return DEFAULT_CRITERION.get(arch, "label_smoothed_cross_entropy")
