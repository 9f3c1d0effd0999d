"""Presets of Yang et al. 2020 (decoder sub-layers): the simplified decoder (§3.3, Table 4, A.2)
and the sub-layer orders of Table 1.

All share the encoder, decoder and output embeddings: footnote 6's totals (62.9M base, 213.9M
big on En-De) are the fairseq transformer with one shared table of about 36.6K symbols
(44,138,496 + 512 V and 176,357,376 + 1024 V for V = 36,640), which separate tables cannot give
at any one vocabulary. ``--share-all-embeddings`` needs a joined dictionary.
"""
from fairseq.models import register_model_architecture

from ..modules import decoder_sublayers  # noqa: F401  (registers the flags)
from .archs_base import fusion_base_architecture, fusion_big_architecture


def _shared_embeddings(args):
    args.share_all_embeddings = getattr(args, "share_all_embeddings", True)


@register_model_architecture("fusion_transformer", "transformer_simplified_decoder")
def transformer_simplified_decoder(args):
    args.simplified_decoder = getattr(args, "simplified_decoder", True)
    _shared_embeddings(args)
    fusion_base_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_simplified_decoder_big")
def transformer_simplified_decoder_big(args):
    args.simplified_decoder = getattr(args, "simplified_decoder", True)
    _shared_embeddings(args)
    fusion_big_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_sem_tem_ifm")
def transformer_sem_tem_ifm(args):
    args.decoder_sublayer_order = getattr(args, "decoder_sublayer_order", "sem-tem-ifm")
    _shared_embeddings(args)
    fusion_base_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_sem_ifm")
def transformer_sem_ifm(args):
    args.decoder_sublayer_order = getattr(args, "decoder_sublayer_order", "sem-ifm")
    _shared_embeddings(args)
    fusion_base_architecture(args)
