"""fairseq's options that name modules by class, refused in one line where the names would do nothing.

``--retain-dropout-modules NAMES`` (with ``--retain-dropout``: Monte Carlo dropout) keeps dropout on in the modules
whose class name is listed; a name no module of the model carries keeps it on nowhere, without a word, and fairseq
tests the command line's text as text, so a near name keeps it on somewhere else: ``TransformerEncoderLayer`` (the
layers of fairseq's transformer carry ``TransformerEncoderLayerBase``) keeps on only the encoder's embedding dropout,
whose ``TransformerEncoder`` is part of that text. In a command-line run, a name that no dropout module of the model
answers to (``models/dropout_names.py``: the plugin's modules answer to fairseq's names too) is refused, naming those
the model has, and so are the names without ``--retain-dropout``, which fairseq ignores.
"""
import functools
import re

from ..errors import FusionError
from ..models.dropout_names import FAIRSEQ_NAMES


def dropout_names(model):
    """The class names the model's dropout modules answer to."""
    from fairseq.modules import FairseqDropout

    names = set()
    for module in model.modules():
        if isinstance(module, FairseqDropout) and module.module_name is not None:
            names.add(module.module_name)
            names.add(FAIRSEQ_NAMES.get(module.module_name, module.module_name))
    return names


def listed(value):
    """The names of ``--retain-dropout-modules``: a list (Python, YAML) or the command line's text."""
    if value is None:
        return []
    if isinstance(value, str):
        return [name for name in re.split(r"[\s,\[\]'\"]+", value) if name]
    return [str(name) for name in value]


def check_retain_dropout_modules(model, cfg):
    generation = getattr(cfg, "generation", None)
    names = listed(getattr(generation, "retain_dropout_modules", None))
    if not names:
        return
    if not getattr(generation, "retain_dropout", False):
        raise FusionError(f"--retain-dropout-modules {' '.join(names)} without --retain-dropout: fairseq ignores the "
                          "names; add --retain-dropout (Monte Carlo dropout), or leave the names out")
    have = dropout_names(model)
    unknown = [name for name in names if name not in have]
    if unknown:
        raise FusionError(f"--retain-dropout-modules: no dropout module of this model ({type(model).__name__}) is "
                          f"named {', '.join(unknown)}, so its dropout would stay off; its dropout modules are named "
                          f"{', '.join(sorted(have))}")


def _checked_prepare(prepare_for_inference_):
    """``BaseFairseqModel.prepare_for_inference_`` (fairseq-generate, -interactive, the hub), its
    ``--retain-dropout-modules`` names checked first."""
    @functools.wraps(prepare_for_inference_)
    def wrapper(self, cfg, *args, **kwargs):
        check_retain_dropout_modules(self, cfg)
        return prepare_for_inference_(self, cfg, *args, **kwargs)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper
