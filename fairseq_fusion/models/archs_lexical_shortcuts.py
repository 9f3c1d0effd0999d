"""Presets of Emelin et al. 2019 (lexical shortcuts): base, small (Table 3) and big (Table 1),
with gated shortcuts (Eq. 5-12) or shortcuts + feature-fusion (Eq. 13-14).

All tie the encoder, decoder and output embeddings (A.1). The training settings of A.1
(Adam, inverse square root schedule, warm-up 6000 with shortcuts / 8000 with feature-fusion /
16000 big, 25,000-token batches) are the recipes' (``recipes/common/settings.py``, paper
"emelin"). Variants (§4.2) are flags: --lexical-shortcuts-enc-dec, --lexical-shortcuts-sides,
--lexical-shortcuts-nonlexical.
"""
from fairseq.models import register_model_architecture

from ..modules import lexical_shortcuts  # noqa: F401  (registers the flags)
from .archs_base import fusion_base_architecture, fusion_big_architecture


def _shortcuts(args, feature_fusion):
    args.lexical_shortcuts = getattr(args, "lexical_shortcuts", True)
    args.lexical_shortcuts_feature_fusion = getattr(args, "lexical_shortcuts_feature_fusion", feature_fusion)
    args.share_all_embeddings = getattr(args, "share_all_embeddings", True)


def _small(args):
    """Table 3: embeddings, hidden states and feed-forward layers of the base model halved."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 256)
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", 1024)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", 256)
    args.decoder_ffn_embed_dim = getattr(args, "decoder_ffn_embed_dim", 1024)


@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts")
def transformer_lexical_shortcuts(args):
    _shortcuts(args, False)
    fusion_base_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_ff")
def transformer_lexical_shortcuts_ff(args):
    _shortcuts(args, True)
    fusion_base_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_small")
def transformer_lexical_shortcuts_small(args):
    _small(args)
    _shortcuts(args, False)
    fusion_base_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_ff_small")
def transformer_lexical_shortcuts_ff_small(args):
    _small(args)
    _shortcuts(args, True)
    fusion_base_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_ff_big")
def transformer_lexical_shortcuts_ff_big(args):
    _shortcuts(args, True)
    fusion_big_architecture(args)

