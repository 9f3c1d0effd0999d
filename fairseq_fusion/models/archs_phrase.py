"""Presets of Xu et al. (2020), "Learning Source Phrase Representations for NMT" (ACL).

``transformer_phrase`` is the paper's main model ("+Max+Attn+TA", n-gram phrases, Table 1)
on Transformer Base, ``transformer_phrase_big`` on Transformer Big; the other presets are
rows of Table 2 (ablation). "+Parse" is ``--phrase-segmentation parse`` on any of them with
``--task translation_with_phrases``.
"""
from fairseq.models import register_model_architecture

from ..modules import phrase_representations  # noqa: F401  (registers the flags)
from .archs_base import fusion_base_architecture, fusion_big_architecture


def _phrase_flags(args, glance="max", attentive=True, transparent=True):
    args.phrase_representations = getattr(args, "phrase_representations", True)
    args.phrase_glance = getattr(args, "phrase_glance", glance)
    args.phrase_attentive = getattr(args, "phrase_attentive", attentive)
    args.phrase_transparent_attention = getattr(args, "phrase_transparent_attention", transparent)
    args.phrase_segmentation = getattr(args, "phrase_segmentation", "ngram")


@register_model_architecture("fusion_transformer", "transformer_phrase")
def transformer_phrase(args):
    _phrase_flags(args)
    fusion_base_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_phrase_big")
def transformer_phrase_big(args):
    _phrase_flags(args)
    fusion_big_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_phrase_mean")
def transformer_phrase_mean(args):
    """Table 2 "+Mean": mean-pooled phrases, last encoder layer's phrases in the decoder."""
    _phrase_flags(args, glance="mean", attentive=False, transparent=False)
    fusion_base_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_phrase_max")
def transformer_phrase_max(args):
    """Table 2 "+Max": max-over-time phrases."""
    _phrase_flags(args, glance="max", attentive=False, transparent=False)
    fusion_base_architecture(args)


@register_model_architecture("fusion_transformer", "transformer_phrase_max_attn")
def transformer_phrase_max_attn(args):
    """Table 2 "+Max+Attn": attentive phrases (Eq. 2-5), no transparent attention."""
    _phrase_flags(args, glance="max", attentive=True, transparent=False)
    fusion_base_architecture(args)
