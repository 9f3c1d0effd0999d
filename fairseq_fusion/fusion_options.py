"""The technique registry of ``fusion_transformer``: flags, seams claimed, attach order.

Each technique (a module in ``fairseq_fusion/modules``) registers one ``OptionGroup``: its
flags with their off-defaults, a validation of its own values, the seams it claims for given
arguments (``claims``: which seam, and whether it replaces, removes or extends it), and
``attach`` that installs it into a built model through those seams. The registry keeps the
groups in the declared ``ATTACH_ORDER`` (never the order of imports), refuses two techniques
whose claims on one seam do not stack (``check_claims``, naming both flags), and gives the
conflict matrix that ``fusion-archs --conflicts`` shows. The base architecture sets every flag
to its off value, so presets only name what they switch on.
"""
import argparse
import logging
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple, Union

from .errors import FusionError

logger = logging.getLogger(__name__)

# a technique switch a flag depends on: a flag name (on = not its off value) or
# (flag name, values that switch it on)
Requirement = Union[str, Tuple[str, Sequence]]


@dataclass(frozen=True)
class Range:
    """The numbers a flag takes: ``low``/``high`` (None: unbounded), each included unless ``*_open``."""
    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    what: str = "a number"  # the value in words, e.g. "a probability"

    def __contains__(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, int if self.integer else (int, float)):
            return False
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{self.what} in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{self.what} {'>' if self.low_open else '>='} {self.low:g}"
        return f"{self.what} {'<' if self.high_open else '<='} {self.high:g}"


@dataclass
class Flag:
    name: str  # attribute name, e.g. "lexical_shortcuts"
    default: object
    help: str
    type: Optional[Callable] = None
    choices: Optional[List] = None  # the values it takes (``check_values`` refuses others)
    bounds: Optional[Range] = None  # or the numbers it takes
    # the technique(s) this flag configures: setting it while none is on is an error
    requires: Sequence[Requirement] = ()
    switch: bool = False  # turns a technique on by itself (every other flag has ``requires``)
    # what checkpoints written before the flag existed computed (OPTIONS_VERSION 1), when that
    # differs from ``default``; such a checkpoint gets this value, never silently the new default
    legacy: object = None
    # whether it changes the model by layer (what --encoder/decoder-layers-to-keep pruning would break); a flag that
    # only reports (--fusion-log-internals) does not
    per_layer: bool = True


# The seams a technique can claim (ARCHITECTURE.md, "Seams"), by stack where a technique can take one side
SEAMS = {
    "encoder.self_attn": "encoder self-attention",
    "decoder.self_attn": "decoder self-attention",
    "decoder.encoder_attn": "decoder-to-encoder attention",
    "decoder.ffn": "the decoder feed-forward sub-layers",
    "encoder.plan": "the encoder layers' sub-layer plan (seam d)",
    "decoder.plan": "the decoder layers' sub-layer plan (seam d)",
    "encoder.layer_combiner": "the encoder's layer combination (seam b)",
    "decoder.layer_combiner": "the decoder's layer combination (seam b)",
    "decoder.encoder_reader": "what each decoder layer reads of the encoder (seam c)",
    "decoder.output_fusion": "the output distribution (seam e)",
}
REPLACES, REMOVES, EXTENDS = "replaces", "removes", "extends"  # only EXTENDS stacks with another claimant


@dataclass(frozen=True)
class Claim:
    """What a switched-on technique does to one seam."""
    seam: str  # a key of SEAMS
    how: str  # REPLACES, REMOVES or EXTENDS
    by: str  # the setting that makes the claim, as a user writes it (e.g. "--lexical-shortcuts (decoder side)")
    verb: str = ""  # what it does there, in a refusal (default: ``how``), e.g. "gates"
    why: str = ""  # what it puts there, in a refusal, e.g. "Eq. 8 attends lower layers"
    hint: str = ""  # how to combine anyway, in a refusal


@dataclass
class OptionGroup:
    title: str
    flags: List[Flag] = field(default_factory=list)
    validate: Optional[Callable] = None  # validate(args) -> raise FusionError naming flags (its own values)
    attach: Optional[Callable] = None  # attach(model, args) -> None
    finalize: Optional[Callable] = None  # finalize(model, args): after every group's attach (e.g. load weights)
    name: str = ""  # the technique's name: its place in ATTACH_ORDER
    claims: Optional[Callable] = None  # claims(args) -> [Claim]: the seams it takes with these (validated) arguments


# The order in which build_model validates and attaches the techniques (the parameters a technique adds are created
# in this order, so it is part of what a seed reproduces). A technique not named here attaches after these, in the
# order it was registered.
ATTACH_ORDER = (
    "decoder_sublayers", "layer_aggregation", "multilayer_attention", "vanilla_init", "layer_attention",
    "surface_fusion", "lexical_shortcuts", "phrase_representations",
)

GROUPS: List[OptionGroup] = []

# Version of the flags' meaning, stored in every checkpoint's args (fairseq's parser adds it to
# fresh arguments). 2: flags with a ``legacy`` value exist (deep representations, layer fusion);
# 3: the phrase flags with a ``legacy`` value. Arguments without a version are version 1. A
# checkpoint of an older version lacks the flags added since and gets their legacy values.
OPTIONS_VERSION = 3
VERSION_KEY = "fusion_options_version"


def register(group: OptionGroup) -> OptionGroup:
    """Adds a technique at its place in ATTACH_ORDER (after the declared ones when it is not named there)."""
    if not group.name or any(g.name == group.name for g in GROUPS):
        raise ValueError(f"technique {group.title!r}: expected a unique name, got {group.name!r}")
    GROUPS.append(group)
    rank = {name: i for i, name in enumerate(ATTACH_ORDER)}
    GROUPS.sort(key=lambda g: rank.get(g.name, len(ATTACH_ORDER)))  # stable: undeclared ones keep their order
    return group


def unregister(name: str):
    """Removes a technique (a toy one registered by a test)."""
    GROUPS[:] = [g for g in GROUPS if g.name != name]


def claims(args) -> List[Tuple[OptionGroup, Claim]]:
    """Every seam claim of the techniques these (validated) arguments switch on, in attach order."""
    found = []
    for group in GROUPS:
        for claim in (group.claims(args) if group.claims is not None else []):
            if claim.seam not in SEAMS or claim.how not in (REPLACES, REMOVES, EXTENDS):
                raise ValueError(f"technique {group.name}: unknown seam or kind in {claim}")
            found.append((group, claim))
    return found


def claim_conflict(args) -> Optional[str]:
    """The refusal of the first seam two techniques claim without both extending it, or None."""
    taken = {}
    for group, claim in claims(args):
        for other_group, other in taken.get(claim.seam, []):
            if other_group is group or (claim.how == EXTENDS and other.how == EXTENDS):
                continue
            return conflict_message(other, claim)
        taken.setdefault(claim.seam, []).append((group, claim))
    return None


def conflict_message(a: Claim, b: Claim) -> str:
    where = SEAMS[a.seam]
    if REMOVES in (a.how, b.how) and a.how != b.how:
        gone, user = (a, b) if a.how == REMOVES else (b, a)
        return f"{user.by} {user.verb or user.how} {where}, which {gone.by} removes; {user.hint or 'use one of them'}"
    why = "; ".join(c.why for c in (a, b) if c.why)
    hint = "use one of them"  # a claim's hint says how to keep a seam that another removes
    both = {REPLACES: "replace", EXTENDS: "extend"}.get(a.how) if a.how == b.how else "take"
    return f"{a.by} and {b.by} both {both} {where}{f' ({why})' if why else ''}: {hint}"


def check_claims(args):
    message = claim_conflict(args)
    if message is not None:
        raise FusionError(message)


def check_cross_self_attention(args):
    """fairseq's ``--cross-self-attention`` puts the encoder's output before the target in the decoder
    self-attention's keys and values; a technique that replaces or removes that attention has none of it."""
    if not getattr(args, "cross_self_attention", False):
        return
    for _, claim in claims(args):
        if claim.seam == "decoder.self_attn":
            raise FusionError(
                f"--cross-self-attention attends the encoder output through {SEAMS[claim.seam]}, which {claim.by} "
                f"{claim.verb or claim.how}{f' ({claim.why})' if claim.why else ''}: use one of them"
            )


def add_args(parser):
    parser.add_argument("--" + VERSION_KEY.replace("_", "-"), type=int, default=OPTIONS_VERSION, help=argparse.SUPPRESS)
    for group in GROUPS:
        argp = parser.add_argument_group(group.title)
        for flag in group.flags:
            opt = "--" + flag.name.replace("_", "-")
            if flag.type is bool:
                argp.add_argument(opt, type=_str2bool, nargs="?", const=True, metavar="BOOL", help=flag.help)
            else:
                # the choices are checked by check_values (the arch function runs it on the parsed arguments), so that
                # the command line, YAML, --model-overrides and the hub get one refusal
                metavar = "{" + ",".join(map(str, flag.choices)) + "}" if flag.choices else "X"
                argp.add_argument(opt, type=flag.type, metavar=metavar, help=flag.help)


def set_defaults(args):
    """Fill every technique flag the args lack with its off value (used by every arch); the
    arguments of a checkpoint written before a flag existed get the flag's ``legacy`` value."""
    version = getattr(args, VERSION_KEY, None) or 1
    flags = [f for g in GROUPS for f in g.flags]
    unset = [f for f in flags if getattr(args, f.name, None) is None]
    for flag in unset:
        if flag.legacy is None:
            setattr(args, flag.name, flag.default)
    for flag in unset:  # after the switches they depend on are filled in
        if flag.legacy is None:
            continue
        value = flag.default
        if version < OPTIONS_VERSION and any(_is_on(args, req) for req in flag.requires):
            value = flag.legacy
            logger.warning(
                f"arguments of fairseq-fusion options version {version} (an older checkpoint): "
                f"{option_name(flag.name)} {value}, what that version computed"
            )
        setattr(args, flag.name, value)
    setattr(args, VERSION_KEY, version)


def preset_default(args, name, value, since: int):
    """A preset's default for a flag added in options version ``since``: fresh arguments (and
    checkpoints of that version or later) get ``value``; an older checkpoint's arguments, which
    lack the flag, keep the flag's off value (set by ``set_defaults``), i.e. what it computed."""
    if (getattr(args, VERSION_KEY, None) or 1) >= since:
        setattr(args, name, getattr(args, name, value))


def option_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def _flag(name: str) -> Flag:
    return next(f for g in GROUPS for f in g.flags if f.name == name)


def _is_on(args, req: Requirement) -> bool:
    if isinstance(req, str):
        return getattr(args, req, None) not in (None, _flag(req).default)
    name, values = req
    return getattr(args, name, None) in values


def _describe(req: Requirement) -> str:
    if isinstance(req, str):
        return option_name(req)
    name, values = req
    return f"{option_name(name)} {'|'.join(map(str, values))}"


def expected(flag: Flag, value) -> Optional[str]:
    """What ``flag`` takes, in words, when ``value`` is outside its declared choices or range, else None.
    None (unset) and the flag's off value are always taken."""
    if value is None or value == flag.default:
        return None
    if flag.choices is not None and value not in flag.choices:
        return "one of " + ", ".join(map(str, flag.choices))
    if flag.bounds is not None and value not in flag.bounds:
        off = "" if flag.default is None or flag.default in flag.bounds else f"{flag.default} (off) or "
        return off + str(flag.bounds)
    return None


def check_values(args, name: Callable[[str], str] = None):
    """Refuse a flag's value outside its declared choices or range, naming the flag: the one check of every entry
    point (the arch functions on the command line's and hydra's arguments, ``validate`` on every model built, from
    checkpoints, ``--model-overrides`` and the hub too). ``name(flag)`` says how the refusal names it."""
    for group in GROUPS:
        for flag in group.flags:
            value = getattr(args, flag.name, None)
            wanted = expected(flag, value)
            if wanted is not None:
                shown = name(flag.name) if name is not None else option_name(flag.name)
                raise FusionError(f"{shown} {value!r}: expected {wanted}")


def check_requirements(args):
    """Refuse a flag set away from its off value while the technique it configures is off."""
    for group in GROUPS:
        for flag in group.flags:
            if not flag.requires or getattr(args, flag.name, None) in (None, flag.default):
                continue
            if not any(_is_on(args, req) for req in flag.requires):
                raise FusionError(
                    f"{option_name(flag.name)} {getattr(args, flag.name)!r} configures a technique that is off: "
                    f"it needs {' or '.join(_describe(r) for r in flag.requires)} (without it the flag does nothing)"
                )


def check_layers_to_keep(args):
    """fairseq's LayerDrop pruning renumbers the kept layers; the techniques index and size
    their parameters by layer, so pruning is for the plain transformer only."""
    for side in ("encoder", "decoder"):
        if not getattr(args, f"{side}_layers_to_keep", None):
            continue
        on = [f.name for g in GROUPS for f in g.flags
              if f.per_layer and getattr(args, f.name, None) not in (None, f.default)]
        if on:
            raise FusionError(
                f"--{side}-layers-to-keep prunes and renumbers layers, which {option_name(on[0])} "
                "indexes by layer: prune a fusion_transformer without techniques only"
            )


def validate(args):
    set_defaults(args)
    check_values(args)
    check_requirements(args)
    check_layers_to_keep(args)
    for group in GROUPS:
        if group.validate is not None:
            group.validate(args)
    check_claims(args)
    check_cross_self_attention(args)


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


# the criterion each named architecture trains with (contract tests, recipes, the warning below)
DEFAULT_CRITERION = {}
PAPER_CRITERION_SETTING = {}  # arch -> the paper's training objective, in words


def declare_criterion(arch, criterion, paper_setting):
    DEFAULT_CRITERION[arch] = criterion
    PAPER_CRITERION_SETTING[arch] = paper_setting


def default_criterion(arch):
    return DEFAULT_CRITERION.get(arch, "label_smoothed_cross_entropy")


def check_criterion(args):
    """Warn when an arch that declares its criterion is trained with another one."""
    arch, given = getattr(args, "arch", None), getattr(args, "criterion", None)
    declared = DEFAULT_CRITERION.get(arch)
    if declared is None or given is None or given == declared:
        return False
    logger.warning(
        f"--arch {arch} trains with --criterion {declared} ({PAPER_CRITERION_SETTING[arch]}), "
        f"but --criterion {given} is in use: this is not the paper's training objective"
    )
    return True
