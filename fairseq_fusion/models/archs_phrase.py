"""Presets of Xu et al. (2020), "Learning Source Phrase Representations for NMT" (ACL).

``transformer_phrase`` is the paper's main model ("+Max+Attn+TA", n-gram phrases, Table 1)
on Transformer Base, ``transformer_phrase_big`` on Transformer Big; the other presets are
rows of Table 2 (ablation). "+Parse" is ``--phrase-segmentation parse`` on any of them with
``--task translation_with_phrases``.

"+TA" follows the authors' code (hfxunlp/transformer, ``transformer/LD``): the phrases (Eq. 6)
and the tokens each decoder layer's encoder attention reads are per-decoder-layer softmax
mixtures of the embedding layer and every encoder layer, with dropout (the model's
``--dropout``) on the mixing weights; the token side is ``--layer-attention coarse`` (Bapna et
al. 2018's transparent attention, ``--layer-attention none`` gives the phrase-only reading).
"""
from fairseq.models import register_model_architecture
from fairseq.models.transformer.transformer_legacy import base_architecture, transformer_vaswani_wmt_en_de_big

from .. import fusion_options
from .archs_base import fusion_base_architecture, fusion_big_architecture
from .catalog import describe

# options version in which the presets' Eq. 6 DropConnect (a new flag) became the authors' code
TRANSPARENT_DROPCONNECT_SINCE = 3


def _phrase_flags(args, glance="max", attentive=True, transparent=True):
    args.phrase_representations = getattr(args, "phrase_representations", True)
    args.phrase_glance = getattr(args, "phrase_glance", glance)
    args.phrase_attentive = getattr(args, "phrase_attentive", attentive)
    args.phrase_transparent_attention = getattr(args, "phrase_transparent_attention", transparent)
    args.phrase_segmentation = getattr(args, "phrase_segmentation", "ngram")


def _transparent_attention(args, size_defaults):
    """"+TA" as the authors' code: token transparent attention and DropConnect p = --dropout on
    both mixtures' weights (``size_defaults`` fills --dropout: 0.1 Base, 0.3 Big)."""
    size_defaults(args)
    args.layer_attention = getattr(args, "layer_attention", "coarse")
    # configure only what is on: a user's --layer-attention none or --phrase-transparent-attention
    # false must not leave a dependent flag set (that is refused)
    if args.layer_attention != "none":
        args.layer_attention_dropconnect = getattr(args, "layer_attention_dropconnect", args.dropout)
    if args.phrase_transparent_attention:
        fusion_options.preset_default(args, "phrase_transparent_dropconnect", args.dropout,
                                      since=TRANSPARENT_DROPCONNECT_SINCE)


@describe(
    source="xu",
    paper="Xu et al. 2020, Table 1 / Table 2 \"+Max+Attn+TA\" (Base); the open choices as the authors' code (Eq. 8 "
          "of FFN width, token and phrase transparent attention, footnote 2 rounded up)",
    equations="§3 footnote 2, Eq. 2-8",
    key_flags="`--phrase-representations --phrase-glance max --phrase-attentive --phrase-transparent-attention "
              "--layer-attention coarse`",
)
@register_model_architecture("fusion_transformer", "transformer_phrase")
def transformer_phrase(args):
    _phrase_flags(args)
    _transparent_attention(args, base_architecture)
    fusion_base_architecture(args)


@describe(
    source="xu",
    paper="Xu et al. 2020, Table 1 (Big)",
    equations="as above",
    key_flags="as above, on `fusion_transformer_big`",
)
@register_model_architecture("fusion_transformer", "transformer_phrase_big")
def transformer_phrase_big(args):
    _phrase_flags(args)
    _transparent_attention(args, transformer_vaswani_wmt_en_de_big)
    fusion_big_architecture(args)


@describe(
    source="xu",
    paper='Xu et al. 2020, Table 2 "+Mean"',
    equations="Eq. 2 (mean), 7-8",
    key_flags="`--phrase-representations --phrase-glance mean`",
)
@register_model_architecture("fusion_transformer", "transformer_phrase_mean")
def transformer_phrase_mean(args):
    """Table 2 "+Mean": mean-pooled phrases, last encoder layer's phrases in the decoder."""
    _phrase_flags(args, glance="mean", attentive=False, transparent=False)
    fusion_base_architecture(args)


@describe(
    source="xu",
    paper='Xu et al. 2020, Table 2 "+Max"',
    equations="Eq. 2 (max), 7-8",
    key_flags="`--phrase-representations --phrase-glance max`",
)
@register_model_architecture("fusion_transformer", "transformer_phrase_max")
def transformer_phrase_max(args):
    """Table 2 "+Max": max-over-time phrases."""
    _phrase_flags(args, glance="max", attentive=False, transparent=False)
    fusion_base_architecture(args)


@describe(
    source="xu",
    paper='Xu et al. 2020, Table 2 "+Max+Attn"',
    equations="Eq. 2-5, 7-8",
    key_flags="`... --phrase-attentive`",
)
@register_model_architecture("fusion_transformer", "transformer_phrase_max_attn")
def transformer_phrase_max_attn(args):
    """Table 2 "+Max+Attn": attentive phrases (Eq. 2-5), no transparent attention."""
    _phrase_flags(args, glance="max", attentive=True, transparent=False)
    fusion_base_architecture(args)
