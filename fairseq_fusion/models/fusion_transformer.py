"""``fusion_transformer``: fairseq's ``transformer`` with the five papers' extension points.

With every option off it *is* fairseq's transformer: same modules, parameter names and
count, same outputs; a ``transformer`` state dict loads into it strictly. Techniques are
switched on by flags (see ``fusion_options``); named architectures are presets of those
flags (``archs_*.py``). Seams: (a) attention keys/values and (d) sub-layer plans live in
``fusion_layers``; (b) layer combination in the encoder/decoder; (c) what each decoder
layer reads of the encoder in ``FusionTransformerDecoder.encoder_memory``; (e) the output
distribution in ``get_normalized_probs`` (deferring to ``decoder.output_fusion``).
"""
import functools
from typing import Optional

from fairseq.models import register_model
from fairseq.models.transformer import TransformerConfig, TransformerModel

from .attention_kernels import without_cudnn_attention
from .. import compile_training, fusion_options, modules  # noqa: F401  (modules: the techniques, registered in fusion_options)
from .fusion_decoder import FusionTransformerDecoder
from .fusion_encoder import FusionTransformerEncoder
from . import dropout_names, torchscript
from ..modules import internals
from ..seams import OutputFusion


@register_model("fusion_transformer")
class FusionTransformerModel(TransformerModel):
    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        fusion_options.add_args(parser)
        compile_training.add_args(parser)

    @classmethod
    def build_model(cls, args, task):
        fusion_options.validate(args)
        fusion_options.check_criterion(args)
        compile_backend = compile_training.backend(args)  # refused before anything is built
        model = super().build_model(args, task)
        fusion_options.attach(model, args)
        model.compile_backend = compile_backend  # plain attributes: not in the state dict
        model.compile_random = compile_training.random_mode(args)
        return model

    @classmethod
    def hub_models(cls):
        """fairseq's transformer's archive names, as this class's own map (``HubModels``)."""
        return HubModels(super().hub_models())

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """fairseq's hub interface; parse-tree phrase models also take the raw-input span options of
        ``translation_with_phrases`` (``phrase_trees=FILE`` or ``phrase_parser="stanza"``, ...)."""
        from ..tasks.translation_with_phrases import INFERENCE_OPTIONS, configure_inference_spans

        spans = {k: kwargs.pop(k) for k in list(kwargs) if k in INFERENCE_OPTIONS}
        hub = super().from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)
        configure_inference_spans(hub.task, **spans)
        return hub

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return FusionTransformerEncoder(TransformerConfig.from_namespace(args), src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        return FusionTransformerDecoder(
            TransformerConfig.from_namespace(args),
            tgt_dict,
            embed_tokens,
            no_encoder_attn=args.no_cross_attention,
        )

    def forward(
        self,
        src_tokens,
        src_lengths,
        prev_output_tokens,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer=None,
        alignment_heads=None,
        **extra_encoder_inputs,
    ):
        """fairseq's forward; other ``net_input`` keys of a task go to the encoder (``ctx.inputs``). In training mode
        with ``--fusion-compile`` it runs ``eager_forward`` compiled (``compile_training``); otherwise eager. With
        ``--fusion-log-internals`` the figures the techniques recorded join the model's totals, which fairseq's trainer
        reduces across ranks and logs (``modules/internals.py``)."""
        run = self.eager_forward
        backend = getattr(self, "compile_backend", None)
        if backend is not None and self.training and not compile_training.is_compiling():
            random = getattr(self, "compile_random", compile_training.RANDOM_CHOICES[0])
            run = functools.partial(compile_training.compiled(type(self).eager_forward, backend, random), self)
            for hook in self.encoder.eager_input_hooks:  # what sizes tensors from data, computed outside the graph
                extra_encoder_inputs = {**extra_encoder_inputs, **hook(src_tokens, extra_encoder_inputs)}
        with without_cudnn_attention(src_tokens):
            out = run(src_tokens, src_lengths, prev_output_tokens, return_all_hiddens, features_only, alignment_layer,
                      alignment_heads, **extra_encoder_inputs)
        recorded = getattr(self, "fusion_internals", None)  # --fusion-log-internals: this forward's figures
        if recorded and not compile_training.is_compiling():
            internals.collect(self)
        return out

    def eager_forward(
        self,
        src_tokens,
        src_lengths,
        prev_output_tokens,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer=None,
        alignment_heads=None,
        **extra_encoder_inputs,
    ):
        """The model's forward as written (what ``--fusion-compile`` compiles)."""
        encoder_out = self.encoder(
            src_tokens, src_lengths=src_lengths, return_all_hiddens=return_all_hiddens, **extra_encoder_inputs
        )
        return self.decoder(
            prev_output_tokens,
            encoder_out=encoder_out,
            features_only=features_only,
            alignment_layer=alignment_layer,
            alignment_heads=alignment_heads,
            src_lengths=src_lengths,
            return_all_hiddens=return_all_hiddens,
        )

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        fusion: Optional[OutputFusion] = self.decoder.output_fusion  # seam (e)
        if fusion is None:
            return super().get_normalized_probs(net_output, log_probs, sample)
        return fusion.get_normalized_probs(net_output, log_probs)

    def make_generation_fast_(self, **kwargs):
        """fairseq's (``prepare_for_inference_``); ``--retain-dropout-modules`` names fairseq's module classes, which
        the plugin's modules answer to as fairseq's do (``dropout_names.py``)."""
        super().make_generation_fast_(**kwargs)
        dropout_names.retain_as_fairseq(self, **kwargs)

    def __prepare_scriptable__(self):
        """``torch.jit.script``: fairseq's transformer classes over these parameters, or a one-line refusal of a
        technique (``torchscript.py``)."""
        torchscript.check_scriptable(self)
        return torchscript.fairseq_view(self)


class HubModels(dict):
    """The archive map ``from_pretrained`` passes to fairseq's hub for this model family: fairseq's transformer's
    names, as a type of its own, so the hub's checks know the call loads one of this plugin's models."""
