"""Presets of Emelin et al. 2019 (lexical shortcuts): base, small (Table 3) and big (Table 1),
with gated shortcuts (Eq. 5-12) or shortcuts + feature-fusion (Eq. 13-14).

All tie the encoder, decoder and output embeddings (A.1). The training settings of A.1
(Adam, inverse square root schedule, warm-up 6000 with shortcuts / 8000 with feature-fusion /
16000 big, 25,000-token batches) are the recipes' (``recipes/common/settings.py``, paper
"emelin"). Variants (§4.2, Table 4, Fig. 5) are flags (--lexical-shortcuts-enc-dec,
--lexical-shortcuts-sides, --lexical-shortcuts-nonlexical) and, as the paper trains them,
presets on the feature-fusion model (``transformer_lexical_shortcuts_ff_<variant>``).
"""
from fairseq.models import register_model_architecture

from .archs_base import fusion_base_architecture, fusion_big_architecture
from .catalog import describe


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


@describe(
    source="emelin",
    speed_ratios=(26423 / 29698, None),
    paper="Emelin et al. 2019, base (Table 1)",
    equations="§2.2 Eq. 5-12",
    key_flags="`--lexical-shortcuts`, `--share-all-embeddings`",
)
@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts")
def transformer_lexical_shortcuts(args):
    _shortcuts(args, False)
    fusion_base_architecture(args)


@describe(
    source="emelin",
    speed_ratios=(23601 / 29698, None),
    paper="Emelin et al. 2019, base + feature-fusion (Table 1)",
    equations="Eq. 5-12 with Eq. 13-14",
    key_flags="`--lexical-shortcuts --lexical-shortcuts-feature-fusion`",
)
@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_ff")
def transformer_lexical_shortcuts_ff(args):
    _shortcuts(args, True)
    fusion_base_architecture(args)


@describe(
    source="emelin",
    paper="Emelin et al. 2019, small (Table 3: d 256, FFN 1024)",
    equations="Eq. 5-12",
    key_flags="as base, halved sizes",
)
@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_small")
def transformer_lexical_shortcuts_small(args):
    _small(args)
    _shortcuts(args, False)
    fusion_base_architecture(args)


@describe(
    source="emelin",
    paper="Emelin et al. 2019, small + feature-fusion (Table 3)",
    equations="Eq. 5-14",
    key_flags="as `_ff`, halved sizes",
)
@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_ff_small")
def transformer_lexical_shortcuts_ff_small(args):
    _small(args)
    _shortcuts(args, True)
    fusion_base_architecture(args)


@describe(
    source="emelin",
    speed_ratios=(6769 / 10215, None),
    paper="Emelin et al. 2019, big + shortcuts + feature-fusion (Table 1)",
    equations="Eq. 5-14",
    key_flags="`_ff` on `fusion_transformer_big`",
)
@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_ff_big")
def transformer_lexical_shortcuts_ff_big(args):
    _shortcuts(args, True)
    fusion_big_architecture(args)



# §4.2 variants (Table 4, Fig. 5). The paper trains them on the feature-fusion model: Table 4's
# "+ self-attn. shortcuts" row (27.7 / 41.6 / 32) is Table 1's "+ feature-fusion" row, and §4
# analyses "the model incorporating lexical shortcuts as well as feature-fusion".

def _variant(args, self_attention=True, enc_dec=False, sides="both", nonlexical=False):
    args.lexical_shortcuts = getattr(args, "lexical_shortcuts", self_attention)
    args.lexical_shortcuts_enc_dec = getattr(args, "lexical_shortcuts_enc_dec", enc_dec)
    if self_attention:
        args.lexical_shortcuts_sides = getattr(args, "lexical_shortcuts_sides", sides)
        args.lexical_shortcuts_nonlexical = getattr(args, "lexical_shortcuts_nonlexical", nonlexical)
    _shortcuts(args, True)
    fusion_base_architecture(args)


@describe(
    source="emelin",
    paper='Emelin et al. 2019, Table 4 "dec-to-enc shortcuts" (on the feature-fusion model, as trained)',
    equations="§4.2, Eq. 5-14 with E = E^enc",
    key_flags="`--lexical-shortcuts-enc-dec --lexical-shortcuts-feature-fusion`",
)
@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_ff_enc_dec")
def transformer_lexical_shortcuts_ff_enc_dec(args):
    """Table 4 "dec-to-enc shortcuts": E = E^enc in decoder-to-encoder attention only."""
    _variant(args, self_attention=False, enc_dec=True)


@describe(
    source="emelin",
    paper='Emelin et al. 2019, Table 4 "dec-to-enc + self-attn. shortcuts"',
    equations="§4.2",
    key_flags="`_ff` + `--lexical-shortcuts-enc-dec`",
)
@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_ff_enc_dec_self")
def transformer_lexical_shortcuts_ff_enc_dec_self(args):
    """Table 4 "dec-to-enc shortcuts + self-attn. shortcuts"."""
    _variant(args, self_attention=True, enc_dec=True)


@describe(
    source="emelin",
    paper='Emelin et al. 2019, Table 4 "non-lexical shortcuts"',
    equations="§4.2, footnote 5",
    key_flags="`_ff` + `--lexical-shortcuts-nonlexical`",
)
@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_ff_nonlexical")
def transformer_lexical_shortcuts_ff_nonlexical(args):
    """Table 4 "non-lexical shortcuts": layer n reads layer n-2 (footnote 5)."""
    _variant(args, nonlexical=True)


@describe(
    source="emelin",
    paper="Emelin et al. 2019, Fig. 5 (decoder shortcuts disabled)",
    equations="§4.2",
    key_flags="`_ff` + `--lexical-shortcuts-sides encoder`",
)
@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_ff_encoder_only")
def transformer_lexical_shortcuts_ff_encoder_only(args):
    """Fig. 5: shortcuts disabled in the decoder."""
    _variant(args, sides="encoder")


@describe(
    source="emelin",
    paper="Emelin et al. 2019, Fig. 5 (encoder shortcuts disabled)",
    equations="§4.2",
    key_flags="`_ff` + `--lexical-shortcuts-sides decoder`",
)
@register_model_architecture("fusion_transformer", "transformer_lexical_shortcuts_ff_decoder_only")
def transformer_lexical_shortcuts_ff_decoder_only(args):
    """Fig. 5: shortcuts disabled in the encoder."""
    _variant(args, sides="decoder")
