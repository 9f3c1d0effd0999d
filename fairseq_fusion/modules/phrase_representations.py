"""Flags of source phrase representations (Xu et al. 2020) and their installation.

``--phrase-representations`` switches the technique on; the other flags pick a row of the
paper's Table 2 (ablation):

| Table 2 row        | flags                                                                      |
|--------------------|----------------------------------------------------------------------------|
| +Mean              | --phrase-glance mean                                                       |
| +Max               | --phrase-glance max                                                        |
| +Max+Attn          | --phrase-glance max --phrase-attentive                                     |
| +Max+Attn+TA       | --phrase-glance max --phrase-attentive --phrase-transparent-attention      |
| ... +Parse         | ... --phrase-segmentation parse (with --task translation_with_phrases)     |

Installs (seam d) the sub-layer "phrase_attn" first in every encoder layer and between
self-attention and encoder attention in every decoder layer, and adds the phrase
representations to the encoder output (``extra_output_modules``, batch dims registered so
beam search reorders them). See ``phrase_layers`` for the equations.
"""
from torch import nn

from .. import fusion_options
from ..fusion_options import Flag, OptionGroup
from .phrase_layers import (
    PHRASE_PADDING_MASK,
    PHRASE_REPS,
    PhraseDecoderSublayer,
    PhraseEncoderOutput,
    PhraseEncoderSublayer,
)
from .phrase_segmentation import PhraseSegmenter

SUBLAYER = "phrase_attn"
ON = ["phrase_representations"]
DEFAULTS = {"phrase_glance": "max", "phrase_attentive": False,
            "phrase_transparent_attention": False, "phrase_segmentation": "ngram"}


def validate(args):
    if not getattr(args, "phrase_representations", False):  # sub-flags alone: fusion_options refuses them
        return
    if getattr(args, "no_cross_attention", False):
        raise ValueError(
            "--phrase-representations attends source phrases next to the encoder attention, "
            "which --no-cross-attention removes: use one or the other"
        )
    if args.encoder_embed_dim != args.decoder_embed_dim:
        raise ValueError(
            "--phrase-representations: the decoder attends encoder phrase vectors, so "
            f"--encoder-embed-dim ({args.encoder_embed_dim}) must equal --decoder-embed-dim ({args.decoder_embed_dim})"
        )
    if getattr(args, "encoder_layerdrop", 0) and option(args, "phrase_transparent_attention"):
        raise ValueError(
            "--encoder-layerdrop skips encoder layers, but --phrase-transparent-attention mixes the "
            "phrase representations that every encoder layer builds (Eq. 6): use one of them"
        )
    segmentation = option(args, "phrase_segmentation")
    task = getattr(args, "task", None)
    if segmentation == "parse" and task is not None and task != "translation_with_phrases":
        raise ValueError(
            f"--phrase-segmentation parse reads phrase spans that --task {task} does not load: "
            "use --task translation_with_phrases (spans written by fusion-parse-spans)"
        )


def option(args, name):
    value = getattr(args, name, None)
    return DEFAULTS[name] if value is None else value


def insert_before(plan, name, anchor):
    if anchor not in plan:
        raise ValueError(f"--phrase-representations: no '{anchor}' sub-layer in plan {list(plan)} to put '{name}' before")
    i = plan.index(anchor)
    return tuple(plan[:i]) + (name,) + tuple(plan[i:])


def add_sublayer(layer, name, module, anchor):
    if layer.extra_sublayers is None:
        layer.extra_sublayers = nn.ModuleDict()
    layer.extra_sublayers[name] = module
    layer.set_plan(insert_before(layer.plan, name, anchor))


def attach(model, args):
    if not getattr(args, "phrase_representations", False):
        return
    from fairseq.models.transformer import TransformerConfig

    cfg = TransformerConfig.from_namespace(args)
    glance, attentive = option(args, "phrase_glance"), bool(option(args, "phrase_attentive"))
    transparent = bool(option(args, "phrase_transparent_attention"))
    encoder, decoder = model.encoder, model.decoder
    segmenter = PhraseSegmenter(option(args, "phrase_segmentation"), encoder.padding_idx)
    for layer in encoder.layers:
        add_sublayer(layer, SUBLAYER, PhraseEncoderSublayer(cfg, segmenter, glance, attentive), "self_attn")
    encoder.phrase_output = PhraseEncoderOutput(cfg.encoder.embed_dim, segmenter, glance, attentive, transparent)
    encoder.extra_output_modules.append(encoder.phrase_output)
    encoder.extra_out_batch_dims.update({PHRASE_REPS: 1, PHRASE_PADDING_MASK: 0})
    num_states = len(encoder.layers) + 1  # Eq. 6: i = 0 (embedding layer) .. d
    for layer in decoder.layers:
        add_sublayer(layer, SUBLAYER, PhraseDecoderSublayer(cfg, num_states, transparent), "encoder_attn")


fusion_options.register(OptionGroup(
    title="source phrase representations (Xu et al. 2020)",
    flags=[
        Flag("phrase_representations", False, "attend source phrase representations in every encoder and decoder layer", type=bool, switch=True),
        Flag("phrase_glance", None, "F_glance of Eq. 2 (default max)", choices=["mean", "max"], requires=ON),
        Flag("phrase_attentive", False, "attentive phrase representation, Eq. 3-5 (else F_glance alone)", type=bool,
             requires=ON),
        Flag("phrase_transparent_attention", False, "decoder layers mix all encoder layers' phrases, Eq. 6 (else the last)",
             type=bool, requires=ON),
        Flag("phrase_segmentation", None, "ngram (footnote 2, default) or parse (Algorithm 1, --task translation_with_phrases)",
             choices=["ngram", "parse"], requires=ON),
    ],
    validate=validate,
    attach=attach,
))
