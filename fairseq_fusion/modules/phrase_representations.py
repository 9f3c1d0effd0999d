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

"+TA" in the presets is also the token side of the authors' code: every decoder layer's
encoder attention reads its own mixture of the encoder layers (``--layer-attention coarse``,
Bapna et al. 2018's transparent attention, ``layer_attention``).

Installs (seam d) the sub-layer "phrase_attn" first in every encoder layer and between
self-attention and encoder attention in every decoder layer, and adds the phrase
representations to the encoder output (``extra_output_hooks``, batch dims registered so
beam search reorders them). See ``phrase_layers`` for the equations.
"""
from torch import nn

from .. import fusion_options
from ..fusion_options import EXTENDS, Claim, Flag, OptionGroup, Range
from .phrase_layers import (
    COMBINERS,
    PHRASE_PADDING_MASK,
    PHRASE_REPS,
    PhraseDecoderSublayer,
    PhraseEncoderOutput,
    PhraseEncoderSublayer,
)
from .phrase_segmentation import ROUNDINGS, PhraseSegmenter
from ..errors import FusionError
from ..seams import SubLayer

SUBLAYER = "phrase_attn"
ON = ["phrase_representations"]
DEFAULTS = {"phrase_glance": "max", "phrase_attentive": False,
            "phrase_transparent_attention": False, "phrase_segmentation": "ngram",
            "phrase_combiner": "residue", "phrase_size_rounding": "ceil", "phrase_transparent_dropconnect": 0.0}


def validate(args):
    if not getattr(args, "phrase_representations", False):  # sub-flags alone: fusion_options refuses them
        return
    if getattr(args, "no_cross_attention", False):
        raise FusionError(
            "--phrase-representations attends source phrases next to the encoder attention, "
            "which --no-cross-attention removes: use one or the other"
        )
    if args.encoder_embed_dim != args.decoder_embed_dim:
        raise FusionError(
            "--phrase-representations: the decoder attends encoder phrase vectors, so "
            f"--encoder-embed-dim ({args.encoder_embed_dim}) must equal --decoder-embed-dim ({args.decoder_embed_dim})"
        )
    if getattr(args, "encoder_layerdrop", 0) and option(args, "phrase_transparent_attention"):
        raise FusionError(
            "--encoder-layerdrop skips encoder layers, but --phrase-transparent-attention mixes the "
            "phrase representations that every encoder layer builds (Eq. 6): use one of them"
        )
    segmentation = option(args, "phrase_segmentation")
    fresh = (getattr(args, fusion_options.VERSION_KEY, None) or 1) >= fusion_options.OPTIONS_VERSION
    if fresh and segmentation == "parse" and option(args, "phrase_size_rounding") != DEFAULTS["phrase_size_rounding"]:
        raise FusionError(
            "--phrase-size-rounding sizes n-gram phrases; with --phrase-segmentation parse the phrase "
            "sizes come from the span file: give --phrase-size-rounding to fusion-parse-spans instead"
        )
    task = getattr(args, "task", None)
    if segmentation == "parse" and task is not None and task != "translation_with_phrases":
        raise FusionError(
            f"--phrase-segmentation parse reads phrase spans that --task {task} does not load: "
            "use --task translation_with_phrases (spans written by fusion-parse-spans)"
        )


def option(args, name):
    value = getattr(args, name, None)
    return DEFAULTS[name] if value is None else value


def insert_before(plan, name, anchor):
    if anchor not in plan:
        raise FusionError(f"--phrase-representations: no '{anchor}' sub-layer in plan {list(plan)} to put '{name}' before")
    i = plan.index(anchor)
    return tuple(plan[:i]) + (name,) + tuple(plan[i:])


def add_sublayer(layer, name: str, module: SubLayer, anchor: str):
    if layer.extra_sublayers is None:
        layer.extra_sublayers = nn.ModuleDict()
    layer.extra_sublayers[name] = module
    layer.set_plan(insert_before(layer.plan, name, anchor))


def claims(args):
    if not getattr(args, "phrase_representations", False):
        return []
    return [Claim(f"{side}.plan", EXTENDS, "--phrase-representations") for side in ("encoder", "decoder")]


def attach(model, args):
    if not getattr(args, "phrase_representations", False):
        return
    from fairseq.models.transformer import TransformerConfig

    cfg = TransformerConfig.from_namespace(args)
    glance, attentive = option(args, "phrase_glance"), bool(option(args, "phrase_attentive"))
    transparent = bool(option(args, "phrase_transparent_attention"))
    combiner = option(args, "phrase_combiner")
    encoder, decoder = model.encoder, model.decoder
    segmenter = PhraseSegmenter(option(args, "phrase_segmentation"), encoder.padding_idx, option(args, "phrase_size_rounding"))
    for layer in encoder.layers:
        sub = PhraseEncoderSublayer(cfg, segmenter, glance, attentive, combiner)
        sub.combine.internals_name = f"enc{layer.layer_idx}"
        add_sublayer(layer, SUBLAYER, sub, "self_attn")
    encoder.phrase_output = PhraseEncoderOutput(cfg.encoder.embed_dim, segmenter, glance, attentive, transparent)
    encoder.extra_output_hooks.append(encoder.phrase_output)
    encoder.eager_input_hooks.append(segmenter.eager_input)  # --fusion-compile: no graph break on the phrase count
    encoder.extra_out_batch_dims.update({PHRASE_REPS: 1, PHRASE_PADDING_MASK: 0})
    num_states = len(encoder.layers) + 1  # Eq. 6: i = 0 (embedding layer) .. d
    for layer in decoder.layers:
        sub = PhraseDecoderSublayer(cfg, num_states, transparent, combiner, option(args, "phrase_transparent_dropconnect"))
        sub.combine.internals_name = f"dec{layer.layer_idx}"
        add_sublayer(layer, SUBLAYER, sub, "encoder_attn")


fusion_options.register(OptionGroup(
    title="source phrase representations (Xu et al. 2020)",
    name="phrase_representations",
    flags=[
        Flag("phrase_representations", False, "attend source phrase representations in every encoder and decoder layer", type=bool, switch=True),
        Flag("phrase_glance", None, "F_glance of Eq. 2 (default max)", choices=["mean", "max"], requires=ON),
        Flag("phrase_attentive", False, "attentive phrase representation, Eq. 3-5 (else F_glance alone)", type=bool,
             requires=ON),
        Flag("phrase_transparent_attention", False, "decoder layers mix all encoder layers' phrases, Eq. 6 (else the last)",
             type=bool, requires=ON),
        Flag("phrase_segmentation", None, "ngram (footnote 2, default) or parse (Algorithm 1, --task translation_with_phrases)",
             choices=["ngram", "parse"], requires=ON),
        Flag("phrase_combiner", "residue",
             "Eq. 8: 'residue' (the authors' code: W3 2d -> FFN dim, dropout on the sigmoid, residual x + out_phrase "
             "before the LayerNorm) or 'narrow' (W3 2d -> d, residual x)",
             choices=list(COMBINERS), requires=ON, legacy="narrow"),
        Flag("phrase_size_rounding", "ceil",
             "footnote 2's n-gram size max(min(8, seql / 6), 3): seql / 6 rounded up (ceil, the authors' code) or down",
             choices=list(ROUNDINGS), requires=ON, legacy="floor"),
        Flag("phrase_transparent_dropconnect", 0.0,
             "DropConnect on Eq. 6's weights w^j in training (the authors' code and the presets: --dropout)",
             type=float, bounds=Range(0, 1, high_open=True, what="a probability"), requires=["phrase_transparent_attention"]),
    ],
    validate=validate,
    claims=claims,
    attach=attach,
))
