"""Which techniques combine and which refuse each other: declared by the techniques' seam claims.

A technique setting is a switch flag (``Flag.switch``) with an "on" value a preset gives it: every
value a preset gives a flag with choices, the first preset's value of any other flag. Each pair of
settings of two different switches is judged by the registry (``fusion_options.claim_conflict``:
two claims on one seam refuse each other unless both extend it), without building a model.
``refusal`` builds the pair as a tiny model, as ``fairseq-train`` builds it
(``FusionTransformerModel.build_model``: ``fusion_options.validate``, fairseq's build, every
technique's ``attach``); tests/test_catalog.py builds every pair and requires the same verdicts.
"""
import argparse
import itertools
import logging
from dataclasses import dataclass
from typing import List, Optional

import torch

from .. import fusion_options
from ..errors import PREFIX
from . import catalog

# small enough that ~100 builds take a few seconds; 3 layers so --multilayer-attention 2 has a layer above k
TINY = dict(
    encoder_embed_dim=8, decoder_embed_dim=8, encoder_ffn_embed_dim=16, decoder_ffn_embed_dim=16,
    encoder_attention_heads=2, decoder_attention_heads=2, encoder_layers=3, decoder_layers=3,
    max_source_positions=16, max_target_positions=16,
)


@dataclass(frozen=True)
class Setting:
    flag: str
    value: object

    def text(self):
        return catalog.flag_text(self.flag, self.value)


@dataclass
class Pair:
    a: Setting
    b: Setting
    refusal: Optional[str]  # None: they combine


def settings():
    """(the settings tried, the switches no preset turns on)."""
    presets = [catalog.preset_args(arch) for arch in catalog.fusion_archs()]
    tried, untried = [], []
    for flag in (f for g in fusion_options.GROUPS for f in g.flags if f.switch):
        values = []
        for args in presets:
            value = getattr(args, flag.name, flag.default)
            if value != flag.default and value not in values and (flag.choices or not values):
                values.append(value)
        tried += [Setting(flag.name, v) for v in values]
        if not values:
            untried.append(flag.name)
    return tried, untried


class _TinyTask:
    """What building a translation model reads of its task: one joined dictionary."""

    def __init__(self):
        from fairseq.data import Dictionary

        self.source_dictionary = self.target_dictionary = Dictionary()
        for i in range(8):
            self.source_dictionary.add_symbol(f"w{i}")


def tiny_args(chosen: List[Setting]):
    """The arguments of a tiny ``fusion_transformer`` with these settings (every other flag off)."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    args = argparse.Namespace(**{fusion_options.VERSION_KEY: fusion_options.OPTIONS_VERSION}, **TINY,
                              **{s.flag: s.value for s in chosen})
    ARCH_CONFIG_REGISTRY[catalog.BASE](args)
    return args


def declared(chosen: List[Setting]) -> Optional[str]:
    """The registry's refusal of these settings (their seam claims), or None when they combine."""
    message = fusion_options.claim_conflict(tiny_args(chosen))
    return message[len(PREFIX):] if message and message.startswith(PREFIX) else message


def refusal(chosen: List[Setting], task=None) -> Optional[str]:
    """The refusal message of a tiny model with these settings, or None when it builds."""
    from .fusion_transformer import FusionTransformerModel

    args = tiny_args(chosen)
    with torch.random.fork_rng(devices=[]):  # the caller's random numbers stay as they were
        try:
            FusionTransformerModel.build_model(args, task or _TinyTask())
        except ValueError as e:
            message = str(e)
            return message[len(PREFIX):] if message.startswith(PREFIX) else message
    return None


def pairs(build=False):
    """(settings tried, switches not tried, every ``Pair`` of settings of two different switches): the registry's
    verdicts, or with ``build`` those of a tiny model built with each pair."""
    tried, untried = settings()
    if not build:
        found = [Pair(a, b, declared([a, b])) for a, b in itertools.combinations(tried, 2) if a.flag != b.flag]
        return tried, untried, found
    task = _TinyTask()
    quiet = logging.getLogger("fairseq_fusion")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the techniques' notices about tiny sizes
    try:
        for s in tried:
            alone = refusal([s], task)
            if alone is not None:
                raise RuntimeError(f"{s.text()} alone is refused in the tiny model {TINY}: {alone}")
        found = [Pair(a, b, refusal([a, b], task)) for a, b in itertools.combinations(tried, 2) if a.flag != b.flag]
    finally:
        quiet.setLevel(level)
    return tried, untried, found
