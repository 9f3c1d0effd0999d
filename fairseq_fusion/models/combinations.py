"""Documented combinations of techniques from different papers, and the papers' other readings.

Each entry is a named architecture plus flags of other papers' techniques, or plus the flags
that give another reading of one of its paper's open choices. The contract
suite (``tests/test_contracts.py``) and the half-precision suite check every entry as they
check every registered arch, so a combination listed here is one that keeps the contracts.
The papers' docs (``docs/*.md``, "Composition") name the combinations they rely on; refused
combinations are tested where the refusal is (each names both flags).
"""

COMBINATIONS = {
    # Emelin et al. (feature-fusion shortcuts) with each other paper
    "shortcuts_ff+fine_layer_attention": ("transformer_lexical_shortcuts_ff", ["--layer-attention", "fine"]),
    "shortcuts_ff+surface_fusion": ("transformer_lexical_shortcuts_ff", ["--surface-fusion", "hard"]),
    "shortcuts_ff+hierarchical": ("transformer_lexical_shortcuts_ff", ["--layer-aggregation", "hierarchical"]),
    "shortcuts_ff+phrase": ("transformer_lexical_shortcuts_ff", ["--phrase-representations", "--phrase-attentive"]),
    "shortcuts_ff+sem_tem_ifm": ("transformer_lexical_shortcuts_ff", ["--decoder-sublayer-order", "sem-tem-ifm"]),
    "enc_dec_shortcuts+multilayer_attention": ("transformer_multilayer_attention", ["--lexical-shortcuts-enc-dec"]),
    # each replaces the self-attention of one stack: their claims do not overlap
    "multilayer_attention_encoder+shortcuts_decoder": (
        "transformer_multilayer_attention",
        ["--multilayer-attention-in", "encoder", "--lexical-shortcuts", "--lexical-shortcuts-sides", "decoder"],
    ),
    # Dou et al. within the paper
    "multilayer_attention+hierarchical": ("transformer_multilayer_attention", ["--layer-aggregation", "hierarchical"]),
    # Liu et al. with Yang et al. and Xu et al.
    "surface_fusion+simplified_decoder": ("transformer_surface_fusion", ["--simplified-decoder"]),
    "surface_fusion+fine_layer_attention": ("transformer_surface_fusion", ["--layer-attention", "fine"]),
    "phrase+fine_layer_attention": ("transformer_phrase", ["--layer-attention", "fine"]),
    # Xu et al.'s earlier readings (docs/phrase_representations.md, choices table): Eq. 8 of width d
    # with a residual of x only, footnote 2 rounded down, phrase-only transparent attention
    "phrase_narrow_floor_phrase_only_ta": (
        "transformer_phrase", ["--phrase-combiner", "narrow", "--phrase-size-rounding", "floor", "--layer-attention", "none"],
    ),
    # three papers at once: Dou (hierarchical) + Yang (simplified decoder) + Liu (SurfaceFusion)
    "hierarchical+simplified_decoder+surface_fusion": (
        "transformer_hierarchical_aggregation", ["--simplified-decoder", "--surface-fusion", "hard"],
    ),
}
