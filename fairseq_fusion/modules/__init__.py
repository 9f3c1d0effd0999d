"""The techniques of ``fusion_transformer``, one registered ``OptionGroup`` each (``fusion_options``).

Importing this package registers all of them; the registry orders them by ``fusion_options.ATTACH_ORDER``,
whatever the order of these imports. Phrase representations span ``phrase_representations`` (the technique)
and its parts ``phrase_layers``, ``phrase_segmentation``, ``phrase_parse_tree``. ``internals`` is no technique: its
flag, ``--fusion-log-internals``, has every technique report its figures to fairseq's metrics.
"""
from . import (  # noqa: F401
    decoder_sublayers,
    internals,
    layer_aggregation,
    layer_attention,
    lexical_shortcuts,
    multilayer_attention,
    phrase_representations,
    surface_fusion,
    vanilla_init,
)
