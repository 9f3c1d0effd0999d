"""What each named architecture is: its paper, the equations it implements, notes on its flags, the paper's speed.

Every ``archs_*.py`` file declares each preset's entry with ``@describe(...)`` right above its
``@register_model_architecture``; ``fusion-archs`` and the README's architecture table (between
its ``ARCH TABLE`` markers, written by ``fusion-archs --readme README.md``) are generated from
them. The flags a preset sets are never written here: ``preset_flags`` computes them by running
the preset and comparing with the base ``fusion_transformer``.
"""
import argparse
import inspect
import os
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from .. import fusion_options

BASE = "fusion_transformer"
README_BEGIN, README_END = "<!-- ARCH TABLE -->", "<!-- /ARCH TABLE -->"


@dataclass
class ArchInfo:
    name: str
    paper: str  # paper, table/row and the readings chosen
    equations: str  # the equations (sections, figures) it implements; "-" for none
    key_flags: str  # markdown notes: the flags that make it (outside parentheses: what it sets) and alternatives
    # the paper whose settings it trains with in the recipes (fairseq_fusion_tools/recipe_settings/tables.py PAPERS);
    # "vaswani": a baseline, which trains with the setting of the task's first paper
    source: str = "vaswani"
    # the paper's own speed of the arch relative to its transformer, (training, decoding), None where it gives none
    # (the benchmark report shows them beside the measured ratios): Emelin et al. Table 5 (words/s, 4 P100); Dou et
    # al. Table 1 (train steps/s, decode sentences/s, P40); Yang et al. Table 4 (En-De base) and Table 6 (En-De big),
    # words/s and sentences/s; Liu et al. 4.1: "an additional 10% inference latency" with SurfaceFusion
    speed_ratios: Tuple[Optional[float], Optional[float]] = (None, None)


CATALOG: Dict[str, ArchInfo] = {}


def describe(*, paper, equations, key_flags, source, speed_ratios=(None, None)):
    """Decorator of a preset, placed right above its ``@register_model_architecture``: declares its entry."""
    def declare(fn):
        from fairseq.models import ARCH_CONFIG_REGISTRY

        names = [name for name, registered in ARCH_CONFIG_REGISTRY.items() if registered is fn]
        if len(names) != 1:
            raise ValueError(f"@describe above {fn.__name__}: expected it right above one @register_model_architecture")
        if names[0] in CATALOG:
            raise ValueError(f"@describe: {names[0]} is described twice")
        CATALOG[names[0]] = ArchInfo(names[0], paper, equations, key_flags, source, tuple(speed_ratios))
        return fn

    return declare


def fusion_archs():
    """Every registered ``fusion_transformer`` arch, in registration order."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    from .fusion_transformer import FusionTransformerModel

    return [a for a, model in ARCH_MODEL_REGISTRY.items() if model is FusionTransformerModel]


def preset_file(arch):
    """The file that registers ``arch`` (repo-relative)."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    fn = inspect.unwrap(ARCH_CONFIG_REGISTRY[arch])
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.relpath(inspect.getsourcefile(fn), package_root)


def info(arch) -> ArchInfo:
    if arch not in CATALOG:
        raise ValueError(
            f"arch {arch} has no catalog entry: add @describe(paper=..., equations=..., key_flags=...) right above "
            f"its @register_model_architecture in {preset_file(arch)} (see fairseq_fusion/models/catalog.py)"
        )
    return CATALOG[arch]


def preset_args(arch) -> argparse.Namespace:
    """The arguments ``--arch ARCH`` gives when no flag is on the command line (fairseq's parser adds
    the options version; every other value comes from the preset)."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    args = argparse.Namespace(**{fusion_options.VERSION_KEY: fusion_options.OPTIONS_VERSION})
    ARCH_CONFIG_REGISTRY[arch](args)
    return args


def preset_flags(arch) -> Dict[str, object]:
    """{flag name: value} of every flag whose value ``arch`` changes from the base ``fusion_transformer``."""
    base, own = vars(preset_args(BASE)), vars(preset_args(arch))
    return {k: v for k, v in own.items() if k not in base or base[k] != v}


def flag_text(name, value):
    """A flag setting as on the command line: ``--lexical-shortcuts``, ``--surface-fusion hard``."""
    option = fusion_options.option_name(name)
    return option if value is True else f"{option} {value}"


def readme_table():
    """The README's architecture table (the lines between its markers)."""
    lines = ["| arch | paper | equations | key flags |", "|---|---|---|---|"]
    for arch in fusion_archs():
        entry = info(arch)
        lines.append(f"| `{arch}` | {entry.paper} | {entry.equations} | {entry.key_flags} |")
    return "\n".join(lines)
