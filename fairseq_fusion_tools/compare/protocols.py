"""fusion-compare's systems and protocols: a ``--system`` spec, the paper whose protocol a system follows (stages,
the tested checkpoint), the baseline continued for a second stage and what each system is tested against."""
import re
import shlex

from .. import recipe_settings


def parse_system(spec):
    """``NAME=ARCH --flag value ...`` or ``ARCH`` (named after the arch) -> {name, arch, flags}."""
    name, sep, rest = spec.partition("=")
    if not sep:
        name, rest = None, spec
    words = shlex.split(rest)
    if not words or words[0].startswith("-"):
        raise ValueError(f"--system {spec!r}: expected NAME=ARCH [FLAGS...] or ARCH")
    name = (name or words[0]).strip()
    if not re.fullmatch(r"[\w.+-]+", name):
        raise ValueError(f"--system {spec!r}: the name {name!r} must be letters, digits, _ . + - (it names a folder)")
    return {"name": name, "arch": words[0], "flags": words[1:]}


def criterion_of(arch):
    from fairseq_fusion import fusion_options
    return fusion_options.default_criterion(arch)  # label_smoothed_cross_entropy unless the arch declares another


CONTINUED = "+continued"  # the name of the baseline continued for a second stage: BASELINE+continued


def paper_of(arch):
    """The paper whose protocol an arch follows: its preset's source; Vaswani et al. for fairseq's own archs and
    for fusion_transformer*."""
    return recipe_settings.source_of(arch) or "vaswani"


def protocol_of(args, system):
    """{paper, stages, select} of a system: select is ``last``, ``best`` (validation loss) or ``averageN``."""
    if system.get("continues"):  # the baseline continued: its baseline's selection, a second stage
        return dict(protocol_of(args, system["continues"]), stages=2)
    if args.protocol == "same":
        return {"paper": None, "stages": 1, "select": "last"}
    paper = paper_of(system["arch"])
    average = recipe_settings.PAPERS[paper]["train"]["average"]  # None: best validation loss
    n = average["big" if args.size == "big" else "base"] if average else None
    return {"paper": paper, "stages": 2 if paper == "dou" else 1, "select": f"average{n}" if n else "best"}


def with_continued_baseline(args, systems, baseline):
    """The systems, plus the baseline continued for a second stage when a system trains in two stages."""
    if not any(protocol_of(args, s)["stages"] == 2 for s in systems):
        return systems
    base = next(s for s in systems if s["name"] == baseline)
    continued = dict(base, name=baseline + CONTINUED, continues=base)
    i = systems.index(base)
    return systems[:i + 1] + [continued] + systems[i + 1:]


def compared_with(args, system, baseline):
    """The run a system's bootstrap is against: the baseline, or the baseline continued for two-stage systems."""
    if system["name"] == baseline or system.get("continues"):
        return None
    return baseline + CONTINUED if args.protocols[system["name"]]["stages"] == 2 else baseline
