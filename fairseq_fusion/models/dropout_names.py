"""fairseq's options that name modules by class, answered by the plugin's modules as by fairseq's.

fairseq-generate's ``--retain-dropout --retain-dropout-modules NAMES`` (Monte Carlo dropout) keeps dropout on at
inference in the modules named: each ``FairseqDropout`` carries the class name of the module that built it
(``module_name``), and ``FairseqDropout.make_generation_fast_`` keeps it on where ``module_name in NAMES`` (NAMES a
list from Python; from the command line fairseq passes the text as it is, so the test is on text: ``TransformerEncoder``
is in ``TransformerEncoderLayerBase``). The plugin's modules are fairseq's under other class names; each answers to
the name fairseq's module of the same role carries (``FAIRSEQ_NAMES``), by fairseq's own test, so a list of fairseq's
names keeps dropout on in the same places of a plugin arch as of ``transformer``; the plugin's own class names count
too. The techniques' own modules with a dropout (``TECHNIQUE_ONLY``) have no fairseq counterpart: their own name.
"""
import logging

logger = logging.getLogger(__name__)

# the plugin's class -> the dropout name fairseq's module of the same role carries in fairseq's transformer
FAIRSEQ_NAMES = {
    "FusionTransformerEncoder": "TransformerEncoder",
    "FusionTransformerDecoder": "TransformerDecoder",
    "FusionEncoderLayer": "TransformerEncoderLayerBase",
    "FusionDecoderLayer": "TransformerDecoderLayerBase",
    "ShortcutMultiheadAttention": "MultiheadAttention",  # lexical shortcuts' attention
    "MultiLayerSelfAttention": "MultiheadAttention",  # multi-layer attention
}
TECHNIQUE_ONLY = ("Aggregation", "PhraseAttentiveCombination")


def retained(name, retain_dropout_modules):
    """fairseq's test (``FairseqDropout.make_generation_fast_``): no names keep every dropout on."""
    return retain_dropout_modules is None or name in retain_dropout_modules


def retain_as_fairseq(model, retain_dropout=False, retain_dropout_modules=None, **kwargs):
    """After fairseq's ``make_generation_fast_``: the plugin's dropout modules that fairseq's test keeps on under the
    name of fairseq's module of the same role, on (fairseq's test on their own name has run already)."""
    from fairseq.modules import FairseqDropout

    if not retain_dropout:
        return
    for name, module in model.named_modules():
        theirs = FAIRSEQ_NAMES.get(getattr(module, "module_name", None)) if isinstance(module, FairseqDropout) else None
        if theirs is not None and not module.apply_during_inference and retained(theirs, retain_dropout_modules):
            logger.info(f"Enabling dropout during inference for module: {name} (fairseq's {theirs})")
            module.apply_during_inference = True
