"""Named architectures of Dou et al. (2018), "Exploiting Deep Representations for Neural Machine
Translation": Table 1 (base, applied to encoder and decoder) and Table 2 ("deep
representations" = hierarchical aggregation + layer diversity, big model). The flags'
defaults are the readings that reproduce the paper's parameter counts
(docs/deep_representations.md); the other readings stay reachable through the same flags."""
from fairseq.models import register_model_architecture

from .. import fusion_options
from .archs_base import fusion_base_architecture, fusion_big_architecture
from .catalog import describe

DIVERSITY_CRITERION = "label_smoothed_cross_entropy_with_diversity"


def _aggregation(args, kind):
    args.layer_aggregation = getattr(args, "layer_aggregation", kind)
    args.layer_aggregation_in = getattr(args, "layer_aggregation_in", "both")


@describe(
    source="dou",
    speed_ratios=(1.69 / 1.82, 1.28 / 1.33),
    paper="Dou et al. 2018, Table 1 row 2",
    equations="Eq. 4",
    key_flags="`--layer-aggregation dense` (sum of the layers' own outputs; `--dense-sum recursive` for the other "
              "reading)",
)
@register_model_architecture("fusion_transformer", "transformer_dense")
def transformer_dense(args):
    """Table 1 row 2: dense connection (Eq. 4), +0.0M; the sum adds the lower layers' own outputs."""
    _aggregation(args, "dense")
    fusion_base_architecture(args)


@describe(
    source="dou",
    speed_ratios=(1.59 / 1.82, 1.26 / 1.33),
    paper="Dou et al. 2018, Table 1 row 3",
    equations="Eq. 5",
    key_flags="`--layer-aggregation linear` (at every layer's input and the output: Table 1's +14.7M; "
              "`--linear-combination-at output`)",
)
@register_model_architecture("fusion_transformer", "transformer_linear_combination")
def transformer_linear_combination(args):
    """Table 1 row 3: linear combination (Eq. 5) at every layer's input and the output, +14.7M."""
    _aggregation(args, "linear")
    fusion_base_architecture(args)


@describe(
    source="dou",
    speed_ratios=(1.32 / 1.82, 1.22 / 1.33),
    paper="Dou et al. 2018, Table 1 row 4",
    equations="Eq. 6-7",
    key_flags="`--layer-aggregation iterative`",
)
@register_model_architecture("fusion_transformer", "transformer_iterative_aggregation")
def transformer_iterative_aggregation(args):
    """Table 1 row 4: iterative aggregation (Eq. 6-7), +31.5M."""
    _aggregation(args, "iterative")
    fusion_base_architecture(args)


@describe(
    source="dou",
    speed_ratios=(1.46 / 1.82, 1.25 / 1.33),
    paper="Dou et al. 2018, Table 1 row 5",
    equations="§3.1.1, Fig. 2, Eq. 7",
    key_flags="`--layer-aggregation hierarchical`",
)
@register_model_architecture("fusion_transformer", "transformer_hierarchical_aggregation")
def transformer_hierarchical_aggregation(args):
    """Table 1 row 5: hierarchical aggregation (§3.1.1, Fig. 2), +23.1M."""
    _aggregation(args, "hierarchical")
    fusion_base_architecture(args)


@describe(
    source="dou",
    speed_ratios=(1.19 / 1.82, 1.05 / 1.33),
    paper="Dou et al. 2018, Table 1 row 6 (k=2)",
    equations="Eq. 8",
    key_flags="`--multilayer-attention 2` (a full attention per attended layer, layers above k: Table 1's +33.6M)",
)
@register_model_architecture("fusion_transformer", "transformer_multilayer_attention")
def transformer_multilayer_attention(args):
    """Table 1 row 6: multi-layer attention with k = 2 (Eq. 8), the paper's default k, +33.6M."""
    args.multilayer_attention = getattr(args, "multilayer_attention", 2)
    fusion_base_architecture(args)


@describe(
    source="dou",
    speed_ratios=(1.12 / 1.82, 1.00 / 1.33),
    paper="Dou et al. 2018, Table 1 row 7 (k=3)",
    equations="Eq. 8",
    key_flags="`--multilayer-attention 3` (+37.8M)",
)
@register_model_architecture("fusion_transformer", "transformer_multilayer_attention_k3")
def transformer_multilayer_attention_k3(args):
    """Table 1 row 7: multi-layer attention with k = 3, +37.8M."""
    args.multilayer_attention = getattr(args, "multilayer_attention", 3)
    fusion_base_architecture(args)


@describe(
    source="dou",
    speed_ratios=(1.41 / 1.82, 1.25 / 1.33),
    paper='Dou et al. 2018, Table 2 "+ Deep Representations" (big)',
    equations="Fig. 2 + Eq. 9-10",
    key_flags="`--layer-aggregation hierarchical`, default criterion `label_smoothed_cross_entropy_with_diversity`",
)
@register_model_architecture("fusion_transformer", "transformer_hierarchical_aggregation_big")
def transformer_hierarchical_aggregation_big(args):
    """Table 2 "+ Deep Representations": big model, hierarchical aggregation, trained with L_diversity."""
    _aggregation(args, "hierarchical")
    fusion_big_architecture(args)


fusion_options.declare_criterion(
    "transformer_hierarchical_aggregation_big", DIVERSITY_CRITERION,
    "Dou et al. 2018, §3.3 and Table 2: label-smoothed cross-entropy with the layer diversity term of "
    "Eq. 9-10, lambda 1.0",
)
