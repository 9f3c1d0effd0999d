"""Base presets: ``fusion_transformer`` (= fairseq ``transformer``) and ``fusion_transformer_big``."""
from fairseq.models import register_model_architecture
from fairseq.models.transformer.transformer_legacy import (
    base_architecture,
    transformer_vaswani_wmt_en_de_big,
)

from .. import compile_training, fusion_options
from .catalog import describe


@describe(
    source="vaswani",
    paper="Vaswani et al. 2017 (fairseq `transformer`, base)",
    equations="-",
    key_flags="every technique flag off: identical to `transformer` (names, count, outputs)",
)
@register_model_architecture("fusion_transformer", "fusion_transformer")
def fusion_base_architecture(args):
    base_architecture(args)
    fusion_options.set_defaults(args)
    fusion_options.check_values(args)  # at parse time: before fairseq-train writes anything
    compile_training.backend(args)  # --fusion-compile's backend, as early


@describe(
    source="vaswani",
    paper="Vaswani et al. 2017 (`transformer_vaswani_wmt_en_de_big`)",
    equations="-",
    key_flags="as above, big",
)
@register_model_architecture("fusion_transformer", "fusion_transformer_big")
def fusion_big_architecture(args):
    transformer_vaswani_wmt_en_de_big(args)
    fusion_options.set_defaults(args)
    fusion_options.check_values(args)  # at parse time: before fairseq-train writes anything
    compile_training.backend(args)  # --fusion-compile's backend, as early
