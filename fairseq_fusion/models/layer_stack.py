"""What the encoder and decoder of ``fusion_transformer`` share: how a layer is built and seam (b).

``LayerStackMixin`` comes before fairseq's ``TransformerEncoderBase`` / ``TransformerDecoderBase``;
the class sets ``self._layers_built = 0`` before fairseq's ``__init__`` builds the layers and
``self.layer_combiner = None`` after it.
"""
from typing import List, Optional

from fairseq.distributed import fsdp_wrap
from torch import Tensor

from .layer_checkpoint import checkpoint_layer
from ..seams import LayerCombiner, StackContext


class LayerStackMixin:
    layer_combiner: Optional[LayerCombiner]  # seam (b): set by a technique's attach, None keeps the plain stack

    def build_fusion_layer(self, layer_class, cfg, *args):
        """``layer_class(cfg, *args, layer_idx=...)`` with fairseq's activation checkpointing
        (ours, ``layer_checkpoint``) and FSDP wrapping, as fairseq's ``build_*_layer``."""
        layer = layer_class(cfg, *args, layer_idx=self._layers_built)
        self._layers_built += 1
        if cfg.checkpoint_activations:
            layer = checkpoint_layer(layer, offload_to_cpu=cfg.offload_activations)
        min_params_to_wrap = cfg.min_params_to_wrap if not cfg.checkpoint_activations else 0
        return fsdp_wrap(layer, min_num_params=min_params_to_wrap)

    # seam (b): layer combination; identity with options off
    def combine_layers(self, idx: int, x: Tensor, states: List[Tensor], ctx: StackContext) -> Tensor:
        if self.layer_combiner is None:
            return x
        return self.layer_combiner.combine_layers(idx, x, states, ctx)

    def stack_output(self, states: List[Tensor], ctx: StackContext) -> Tensor:
        if self.layer_combiner is None:
            return states[-1]
        return self.layer_combiner.stack_output(states, ctx)
