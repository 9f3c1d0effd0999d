"""Presets of Yang et al. 2020 (decoder sub-layers): the simplified decoder (§3.3, Table 4, A.2)
and the sub-layer orders of Table 1."""
from fairseq.models import register_model_architecture

from ..modules import decoder_sublayers  # noqa: F401  (registers the flags)
from .archs_base import fusion_base_architecture, fusion_big_architecture


@register_model_architecture("fusion_transformer", "transformer_simplified_decoder")
def transformer_simplified_decoder(args):
    args.simplified_decoder = getattr(args, "simplified_decoder", True)
    fusion_base_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_simplified_decoder_big")
def transformer_simplified_decoder_big(args):
    args.simplified_decoder = getattr(args, "simplified_decoder", True)
    fusion_big_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_sem_tem_ifm")
def transformer_sem_tem_ifm(args):
    args.decoder_sublayer_order = getattr(args, "decoder_sublayer_order", "sem-tem-ifm")
    fusion_base_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_sem_ifm")
def transformer_sem_ifm(args):
    args.decoder_sublayer_order = getattr(args, "decoder_sublayer_order", "sem-ifm")
    fusion_base_architecture(args)
