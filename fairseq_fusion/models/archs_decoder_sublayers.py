"""Presets of Yang et al. 2020 (decoder sub-layers): the simplified decoder (§3.3, Table 4, A.2)
and the sub-layer orders of Table 1.

All share the encoder, decoder and output embeddings: footnote 6's totals (62.9M base, 213.9M
big on En-De) are the fairseq transformer with one shared table of about 36.6K symbols
(44,138,496 + 512 V and 176,357,376 + 1024 V for V = 36,640), which separate tables cannot give
at any one vocabulary. ``--share-all-embeddings`` needs a joined dictionary.
"""
from fairseq.models import register_model_architecture

from .archs_base import fusion_base_architecture, fusion_big_architecture
from .catalog import describe


def _shared_embeddings(args):
    args.share_all_embeddings = getattr(args, "share_all_embeddings", True)


@describe(
    source="yang",
    speed_ratios=(71.08 / 63.93, 72.93 / 65.35),
    paper="Yang et al. 2020",
    equations="§2.1 eqs. for C, D; §3.3 / Fig. 9b (IFM = one Add&Norm), Table 3–4",
    key_flags="`--simplified-decoder --share-all-embeddings` (footnote 6)",
)
@register_model_architecture("fusion_transformer", "transformer_simplified_decoder")
def transformer_simplified_decoder(args):
    args.simplified_decoder = getattr(args, "simplified_decoder", True)
    _shared_embeddings(args)
    fusion_base_architecture(args)


@describe(
    source="yang",
    speed_ratios=(125.2 / 103.7, 90.5 / 74.3),
    paper="Yang et al. 2020",
    equations="same, Transformer big (A.2, Table 6)",
    key_flags="`--simplified-decoder --share-all-embeddings`",
)
@register_model_architecture("fusion_transformer", "transformer_simplified_decoder_big")
def transformer_simplified_decoder_big(args):
    args.simplified_decoder = getattr(args, "simplified_decoder", True)
    _shared_embeddings(args)
    fusion_big_architecture(args)


@describe(
    source="yang",
    paper="Yang et al. 2020",
    equations="Table 1, SEM ⇒ TEM ⇒ IFM",
    key_flags="`--decoder-sublayer-order sem-tem-ifm --share-all-embeddings`",
)
@register_model_architecture("fusion_transformer", "transformer_sem_tem_ifm")
def transformer_sem_tem_ifm(args):
    args.decoder_sublayer_order = getattr(args, "decoder_sublayer_order", "sem-tem-ifm")
    _shared_embeddings(args)
    fusion_base_architecture(args)


@describe(
    source="yang",
    paper="Yang et al. 2020",
    equations="Table 1, SEM ⇒ IFM (no TEM)",
    key_flags="`--decoder-sublayer-order sem-ifm --share-all-embeddings`",
)
@register_model_architecture("fusion_transformer", "transformer_sem_ifm")
def transformer_sem_ifm(args):
    args.decoder_sublayer_order = getattr(args, "decoder_sublayer_order", "sem-ifm")
    _shared_embeddings(args)
    fusion_base_architecture(args)
