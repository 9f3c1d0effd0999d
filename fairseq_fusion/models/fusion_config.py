"""``FusionTransformerConfig``: the model config of ``fairseq-hydra-train``, generated from the flags.

fairseq's own ``transformer`` is a legacy (argparse) model whose flags are the flat form of its
``TransformerConfig`` (``encoder.embed_dim`` is ``--encoder-embed-dim``); ``fairseq-hydra-train``
gives such a model its YAML ``model:`` section as is, runs the arch function on it and builds the
model from it. ``fusion_transformer`` does the same, so the YAML keys are the flat flag names of the
command line (``encoder_embed_dim``, ``lexical_shortcuts``) and a preset (``_name:
transformer_lexical_shortcuts_ff``) fills in what the YAML leaves out, exactly as ``--arch``
does. This dataclass is that flat config: fairseq's transformer fields (from ``TransformerConfig``
through fairseq's ``gen_parser_from_dataclass``, as ``TransformerModel.add_args`` builds them)
plus every technique flag of ``fusion_options`` (help and choices from the flag registry; each
field defaults to None: unset, the preset decides). A YAML model section is checked against it
before the preset runs: an unknown key (a typo) or a value of the wrong type or outside the
choices is an error naming the key, never silently ignored (a technique flag's choices and range:
``fusion_options.check_values``, the check of every entry point).
"""
import argparse
import dataclasses
import difflib
from typing import Any, Optional

from fairseq.dataclass import FairseqDataclass
from omegaconf import OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from .. import fusion_options
from ..errors import FusionError


def model_actions():
    """{dest: argparse action} of every flag ``fusion_transformer`` parses (fairseq's transformer and ours)."""
    from .fusion_transformer import FusionTransformerModel

    parser = argparse.ArgumentParser(add_help=False)
    FusionTransformerModel.add_args(parser)
    return {a.dest: a for a in parser._actions if a.dest != argparse.SUPPRESS}


def _field_type(action):
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)) or action.type is fusion_options._str2bool:
        return Optional[bool]
    if action.nargs is None and action.type in (int, float, str):
        return Optional[action.type]
    return Any  # lists and fairseq's own parsers (e.g. comma-separated layer lists): checked by the model


def registry_flags():
    return {f.name: f for g in fusion_options.GROUPS for f in g.flags}


def build_config_class():
    fields, flags = [], registry_flags()
    for dest, action in sorted(model_actions().items()):
        metadata = {"help": action.help or ""}
        choices = flags[dest].choices if dest in flags else action.choices
        if choices:
            metadata["choices"] = list(choices)
        fields.append((dest, _field_type(action), dataclasses.field(default=None, metadata=metadata)))
    return dataclasses.make_dataclass("FusionTransformerConfig", fields, bases=(FairseqDataclass,))


FusionTransformerConfig = build_config_class()


def check_model_config(cfg):
    """Check a YAML ``model:`` section (a DictConfig) against ``FusionTransformerConfig``; raises ValueError."""
    known = {f.name: f for f in dataclasses.fields(FusionTransformerConfig)}
    given = {k: v for k, v in cfg.items() if k != "_name"}
    unknown = sorted(set(given) - set(known))
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, known, n=1)
            hints.append(f"{key}" + (f" (did you mean {close[0]}?)" if close else ""))
        raise FusionError(f"model.{unknown[0]}: not an option of {cfg.get('_name')} (fusion_transformer); unknown model "
                         f"keys: {', '.join(hints)}. Keys are the flag names without dashes (--encoder-embed-dim: "
                         "encoder_embed_dim)")
    try:
        OmegaConf.merge(OmegaConf.structured(FusionTransformerConfig), {k: v for k, v in given.items()})
    except OmegaConfBaseException as e:
        raise FusionError(f"model.{getattr(e, 'key', '?')}: {e.msg if hasattr(e, 'msg') else e}") from None
    flags = registry_flags()
    fusion_options.check_values(argparse.Namespace(**given), name=lambda key: f"model.{key} ({fusion_options.option_name(key)})")
    for key, value in given.items():  # fairseq's own fields with choices (the registry's flags: check_values)
        choices = known[key].metadata.get("choices")
        if key not in flags and choices and value is not None and value not in choices:
            raise FusionError(f"model.{key}: {value!r} is not one of {', '.join(map(str, choices))}")


# what fairseq reads off cfg.model as getattr(cfg.model, key, default) (trainer.py: base_layers)
FAIRSEQ_GETATTR_DEFAULTS = {"base_layers": 0}


def hydra_aware(arch_fn):
    """Wrap a registered arch function: a fresh YAML model section (a DictConfig without the options
    version; command-line and checkpoint arguments are Namespaces or carry it) is checked and
    gets the current options version before the preset runs, as the command line's parser adds it."""
    def arch(args):
        if not OmegaConf.is_config(args):
            return arch_fn(args)
        if fusion_options.VERSION_KEY not in args:
            check_model_config(args)
            with open_dict(args):
                args[fusion_options.VERSION_KEY] = fusion_options.OPTIONS_VERSION
        # the preset runs on a Namespace: omegaconf < 2.1 (fairseq 0.12.2's pin) answers getattr(cfg, "missing_key",
        # default) with None instead of the default; what it sets or changes is written back, with the defaults
        # fairseq itself reads off the model config that way
        ns = argparse.Namespace(**{**FAIRSEQ_GETATTR_DEFAULTS, **dict(args.items())})
        arch_fn(ns)
        with open_dict(args):
            for key, value in vars(ns).items():
                if key not in args or args[key] != value:
                    args[key] = value

    arch.__name__, arch.__doc__, arch.__wrapped__ = arch_fn.__name__, arch_fn.__doc__, arch_fn
    return arch


def wrap_registered_archs():
    """Make every ``fusion_transformer`` arch function hydra-aware (called once the archs are registered)."""
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    from .fusion_transformer import FusionTransformerModel

    for name, model in ARCH_MODEL_REGISTRY.items():
        fn = ARCH_CONFIG_REGISTRY[name]
        if model is FusionTransformerModel and not hasattr(fn, "__wrapped__"):
            ARCH_CONFIG_REGISTRY[name] = hydra_aware(fn)
