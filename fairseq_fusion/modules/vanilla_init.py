"""Start a ``fusion_transformer`` arch from a trained vanilla model (Dou et al., 2018, §4.1:
"the parameters of the proposed models were initialized by the pre-trained model").

``fairseq-train ... --arch transformer_hierarchical_aggregation --init-from-vanilla vanilla.pt``
loads every parameter of a fairseq ``transformer`` (or ``fusion_transformer``) checkpoint of
the same sizes and dictionaries; the parameters the options added keep their fresh
initialization. It runs when the model is built (``finalize``, after every option attached),
refuses a checkpoint that lacks a transformer parameter of this size or has parameters this
model lacks, and is then cleared in the model's args, so the checkpoints written by this
training do not read the vanilla file again (generation, reloading). fairseq's own
``--restore-file`` still wins: resuming from ``checkpoint_last.pt`` overwrites everything.
"""
import copy
import logging
import os
from types import SimpleNamespace

import torch
from torch import nn

from .. import fusion_options
from ..fusion_options import Flag, OptionGroup
from ..errors import FusionError

logger = logging.getLogger(__name__)


def vanilla_parameter_names(model, args):
    """State-dict names of a fairseq ``transformer`` with these sizes (built on the meta device)."""
    from fairseq.models.transformer import TransformerModel

    task = SimpleNamespace(source_dictionary=model.encoder.dictionary, target_dictionary=model.decoder.dictionary)
    with torch.device("meta"):
        vanilla = TransformerModel.build_model(copy.deepcopy(args), task)
    return set(vanilla.state_dict())


def load_vanilla(model, path, args):
    """Load ``path``'s parameters into ``model``; returns the names left freshly initialized."""
    from fairseq import checkpoint_utils

    if not os.path.isfile(path):
        raise FusionError(f"--init-from-vanilla {path}: no such checkpoint file")
    state = checkpoint_utils.load_checkpoint_to_cpu(path)
    if "model" not in state:
        raise FusionError(f"--init-from-vanilla {path}: not a fairseq checkpoint (no 'model' entry)")
    params = state["model"]
    model.upgrade_state_dict(params)
    own = model.state_dict()
    unexpected = sorted(set(params) - set(own))
    if unexpected:
        raise FusionError(
            f"--init-from-vanilla {path}: the checkpoint has {len(unexpected)} parameters this model "
            f"lacks, e.g. {unexpected[:4]}; expected a transformer of the same sizes"
        )
    lacking = sorted(vanilla_parameter_names(model, args) - set(params))
    if lacking:
        raise FusionError(
            f"--init-from-vanilla {path}: the checkpoint lacks {len(lacking)} transformer parameters "
            f"of this model, e.g. {lacking[:4]}; expected a transformer of the same sizes "
            "(--encoder-layers, --decoder-layers, ...)"
        )
    for name, tensor in params.items():
        if tensor.shape != own[name].shape:
            raise FusionError(
                f"--init-from-vanilla {path}: {name} has shape {tuple(tensor.shape)} in the checkpoint "
                f"but {tuple(own[name].shape)} here; expected a transformer of the same sizes"
                + (" and dictionaries (binarize with the checkpoint's: fairseq-preprocess --srcdict/--tgtdict)"
                   if "embed_tokens" in name or "output_projection" in name else "")
            )
    nn.Module.load_state_dict(model, params, strict=False)
    return sorted(set(own) - set(params))


def finalize(model, args):
    path = getattr(args, "init_from_vanilla", None)
    if not path:
        return
    fresh = load_vanilla(model, path, args)
    logger.info(f"--init-from-vanilla {path}: loaded; {len(fresh)} new tensors freshly initialized: {fresh}")
    args.init_from_vanilla = None  # consumed: checkpoints of this training do not read it again


fusion_options.register(
    OptionGroup(
        title="initialization from a vanilla model (Dou et al. 2018, §4.1)",
        name="vanilla_init",  # claims no seam: it loads weights after every attach
        flags=[
            Flag("init_from_vanilla", None,
                 "checkpoint of a fairseq transformer / fusion_transformer of the same sizes: load its "
                 "parameters when the model is built; parameters the options add stay freshly initialized",
                 type=str, switch=True),
        ],
        finalize=finalize,
    )
)
