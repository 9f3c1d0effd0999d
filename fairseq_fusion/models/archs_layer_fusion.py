"""Presets of Liu et al., ICLR 2021 (encoder layer fusion): fine-grained and coarse layer
attention (§3.2, Table 1) and SurfaceFusion (§4.1, Table 2)."""
from fairseq.models import register_model_architecture

from .. import fusion_options
from .archs_base import fusion_base_architecture, fusion_big_architecture
from .catalog import describe


# the authors'-code defaults below exist since fairseq-fusion options version 2; the arguments of
# an older checkpoint (no version) keep the flags' off values, i.e. what that checkpoint computed
AUTHORS_DEFAULTS_SINCE = 2


def _authors_default(args, name, value):
    fusion_options.preset_default(args, name, value, since=AUTHORS_DEFAULTS_SINCE)


def _layer_attention(args, granularity):
    args.layer_attention = getattr(args, "layer_attention", granularity)
    args.layer_attention_dropconnect = getattr(args, "layer_attention_dropconnect", 0.3)
    # the paper is silent; the authors' code (fairseq/models/transformer.py) drops X^0 with the
    # model's dropout and LayerNorms it (post-norm), LayerNorms S^m and drops it with p = 0.1
    _authors_default(args, "layer_attention_embed_dropout", True)
    _authors_default(args, "layer_attention_layernorm", True)
    _authors_default(args, "layer_attention_dropout", 0.1)


@describe(
    source="liu",
    paper="Liu et al. 2021 §3.2",
    equations="S^m = Σ_n softmax_n(w^{m,n,d}) ⊙ X^n, W ∈ R^{M×(N+1)×D}, DropConnect p=0.3",
    key_flags="`--layer-attention fine --layer-attention-dropconnect 0.3`; as the authors' code: "
              "`--layer-attention-embed-dropout --layer-attention-layernorm --layer-attention-dropout 0.1`",
)
@register_model_architecture("fusion_transformer", "transformer_fine_grained_layer_attention")
def transformer_fine_grained_layer_attention(args):
    _layer_attention(args, "fine")
    fusion_base_architecture(args)


@describe(
    source="liu",
    paper="Liu et al. 2021 Table 2/4 (En-De, En-Fr big)",
    equations="as above",
    key_flags="as above, Transformer-Big",
)
@register_model_architecture("fusion_transformer", "transformer_fine_grained_layer_attention_big")
def transformer_fine_grained_layer_attention_big(args):
    """Transformer-Big with FGLA: Table 2's En-De and En-Fr rows (Table 4: Big)."""
    _layer_attention(args, "fine")
    fusion_big_architecture(args)


@describe(
    source="liu",
    paper="Bapna et al. 2018 (Liu et al. Table 1 baseline)",
    equations="S^m = Σ_n softmax_n(w^{m,n}) X^n, W ∈ R^{M×(N+1)}",
    key_flags="`--layer-attention coarse`",
)
@register_model_architecture("fusion_transformer", "transformer_coarse_layer_attention")
def transformer_coarse_layer_attention(args):
    _layer_attention(args, "coarse")
    fusion_base_architecture(args)


def _surface_fusion(args, mode, lam, tau):
    args.surface_fusion = getattr(args, "surface_fusion", mode)
    args.surface_fusion_lambda = getattr(args, "surface_fusion_lambda", lam)
    args.surface_fusion_tau = getattr(args, "surface_fusion_tau", tau)
    # the paper is silent; the authors' code (fairseq/models/transformer.py) detaches q and k
    # and drops X_emb with the model's dropout
    _authors_default(args, "surface_fusion_detach", True)
    _authors_default(args, "surface_fusion_embed_dropout", True)


@describe(
    source="liu",
    speed_ratios=(None, 1 / 1.1),
    paper="Liu et al. 2021 §4.1",
    equations="Eq. 5, Eq. 6 (hard), λ=0.9, τ=1",
    key_flags="`--surface-fusion hard --surface-fusion-lambda 0.9 --surface-fusion-tau 1`; as the authors' code: "
              "`--surface-fusion-detach --surface-fusion-embed-dropout`",
)
@register_model_architecture("fusion_transformer", "transformer_surface_fusion")
def transformer_surface_fusion(args):
    """Hard fusion (Eq. 6), lambda = 0.9, tau = 1 (§4.1; use --surface-fusion-lambda 0.8 on small data)."""
    _surface_fusion(args, "hard", 0.9, 1.0)
    fusion_base_architecture(args)


@describe(
    source="liu",
    speed_ratios=(None, 1 / 1.1),
    paper="Liu et al. 2021 §4.1",
    equations="Eq. 5, Eq. 7 (soft), τ=5",
    key_flags="`--surface-fusion soft --surface-fusion-tau 5`",
)
@register_model_architecture("fusion_transformer", "transformer_surface_fusion_soft")
def transformer_surface_fusion_soft(args):
    """Soft fusion (Eq. 7), tau = 5 (§4.1)."""
    _surface_fusion(args, "soft", 0.9, 5.0)
    fusion_base_architecture(args)


@describe(
    source="liu",
    speed_ratios=(None, 1 / 1.1),
    paper="Liu et al. 2021 Table 2/4 (En-De, En-Fr big)",
    equations="Eq. 5, Eq. 6, λ=0.9, τ=1",
    key_flags="as `transformer_surface_fusion`, Transformer-Big",
)
@register_model_architecture("fusion_transformer", "transformer_surface_fusion_big")
def transformer_surface_fusion_big(args):
    """Transformer-Big with hard fusion, lambda = 0.9, tau = 1 (WMT14 En-De / En-Fr, Table 2, 4)."""
    _surface_fusion(args, "hard", 0.9, 1.0)
    fusion_big_architecture(args)


@describe(
    source="liu",
    speed_ratios=(None, 1 / 1.1),
    paper="Liu et al. 2021 Table 2/4 (En-De, En-Fr big)",
    equations="Eq. 5, Eq. 7, τ=5",
    key_flags="as `transformer_surface_fusion_soft`, Transformer-Big",
)
@register_model_architecture("fusion_transformer", "transformer_surface_fusion_soft_big")
def transformer_surface_fusion_soft_big(args):
    """Transformer-Big with soft fusion (Eq. 7), tau = 5: Table 2's En-De and En-Fr rows."""
    _surface_fusion(args, "soft", 0.9, 5.0)
    fusion_big_architecture(args)
