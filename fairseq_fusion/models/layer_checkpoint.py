"""Activation checkpointing of fusion layers (``--checkpoint-activations``).

fairseq's ``checkpoint_wrapper`` is a reentrant checkpoint: it runs the layer under
``no_grad`` and re-runs it in backward from the layer's *tensor arguments* only. Fusion
layers also read tensors through the layer context ``ctx`` (embeddings, lower layers'
outputs, the encoder's states) and some write tensors into it (phrase representations):
under fairseq's wrapper the former are backpropagated a second time through the outer
graph ("Trying to backward through the graph a second time") and the latter carry no
gradient. torch's non-reentrant checkpoint recomputes from whatever the layer read, so
the same layer call gives the same loss and gradients with and without checkpointing
(the RNG state is replayed for dropout). The module is patched in place, as fairseq
does, so parameter names do not change.

``--offload-activations``: fairseq moves the checkpointed layer inputs to the CPU. A
fusion stack keeps every layer's output anyway (``ctx.states``, the encoder's
``encoder_states`` that techniques read), so there is nothing more to offload: the layers
are checkpointed as with ``--checkpoint-activations`` and a warning says so.
"""
import functools
import logging

import torch
from torch.utils.checkpoint import checkpoint

logger = logging.getLogger(__name__)
_warned_offload = []


def checkpoint_layer(layer, offload_to_cpu=False):
    if hasattr(layer, "precheckpoint_forward"):
        raise ValueError(f"{type(layer).__name__} is already checkpointed")
    if offload_to_cpu and not _warned_offload:
        _warned_offload.append(True)
        logger.warning(
            "--offload-activations: fusion_transformer keeps every layer's output for its techniques, "
            "so layer inputs stay on the device; layers are checkpointed as with --checkpoint-activations"
        )
    layer.precheckpoint_forward = layer.forward  # the name fairseq's unwrap_checkpoint restores
    layer.forward = functools.partial(_checkpointed_forward, layer.precheckpoint_forward)
    return layer


def _checkpointed_forward(original_forward, *args, **kwargs):
    if not torch.is_grad_enabled():  # inference: nothing to recompute
        return original_forward(*args, **kwargs)
    return checkpoint(original_forward, *args, use_reentrant=False, **kwargs)
