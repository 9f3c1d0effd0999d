"""Decoder sub-layer orders and the simplified decoder (Yang et al. 2020, "On the Sub-layer
Functionalities of Transformer Decoder").

§2.2 splits a decoder layer into three modules (paper Eq. of §2.1, post-norm):
  TEM  C = LN(ATT(L^{n-1}) + L^{n-1})           self-attention + Add&Norm (``self_attn`` block)
  SEM  ATT(C, K_e^N, V_e^N)                       encoder attention only
  IFM  D = LN(SEM + C)        (Add&Norm I)         the rest: Add&Norm I + FFN + Add&Norm II;
       L^n = LN(FFN(D) + D)    (Add&Norm II)
In fairseq's layer, SEM + Add&Norm I is the ``encoder_attn`` block and FFN + Add&Norm II the
``ffn`` block, so the plan ``(self_attn, encoder_attn, ffn)`` is TEM => SEM => IFM.

- ``--decoder-sublayer-order`` (Table 1): ``tem-sem-ifm`` (standard), ``sem-tem-ifm`` (the
  encoder attention block runs before the self-attention block, each keeping its own
  residual Add&Norm), ``sem-ifm`` (no TEM: the self-attention block and its parameters are
  removed). Reading: the paper only names the stacking orders; we move whole fairseq blocks
  (each with its Add&Norm), which is what "reordering the stacking of TEM and SEM" does to
  the standard implementation.
- ``--simplified-decoder`` (§3.3, Fig. 9b): IFM reduced to a single Add&Norm (Add&Norm I):
  the FFN and Add&Norm II are removed, parameters included (``fc1``, ``fc2``,
  ``final_layer_norm``, and NormFormer's ``ffn_layernorm``/``w_resid`` when present), so the
  parameter count drops by exactly the decoder FFNs (Table 3: 12.6M at base size, 50.4M big;
  the two LayerNorm vectors of Add&Norm II, 2d per layer, go too and are below the table's
  rounding). A standard checkpoint therefore does not load strictly into a simplified model.

The plan transformation is general: sub-layers added by other techniques (e.g. phrase
cross-attention before encoder attention) move with the standard block they precede, in any
order, whichever technique attaches first.
"""
from typing import Sequence, Tuple

from .. import fusion_options
from ..fusion_options import EXTENDS, REMOVES, REPLACES, Claim, Flag, OptionGroup
from ..errors import FusionError

TEM, SEM, IFM = "self_attn", "encoder_attn", "ffn"
STANDARD_PLAN = (TEM, SEM, IFM)
# order name -> (blocks in stacking order, blocks removed)
ORDERS = {
    "tem-sem-ifm": ((TEM, SEM, IFM), ()),
    "sem-tem-ifm": ((SEM, TEM, IFM), ()),
    "sem-ifm": ((TEM, SEM, IFM), (TEM,)),
}
# the parameters each removable block owns in fairseq's decoder layer
BLOCK_PARAMETERS = {
    TEM: ("self_attn", "self_attn_layer_norm", "c_attn", "attn_ln"),
    IFM: ("fc1", "fc2", "final_layer_norm", "ffn_layernorm", "w_resid"),
}


def decoder_plan(plan: Sequence[str], order: str, simplified: bool) -> Tuple[str, ...]:
    """The layer plan for ``order`` (and without the FFN block if ``simplified``).

    Any non-standard sub-layer stays attached to the standard block that follows it (or to
    the end of the layer); it is kept even when that block is removed.
    """
    missing = [b for b in STANDARD_PLAN if list(plan).count(b) != 1]
    if missing:
        raise FusionError(
            f"--decoder-sublayer-order/--simplified-decoder need each of {list(STANDARD_PLAN)} once "
            f"in the decoder layer plan; got {list(plan)}"
        )
    groups, pending = {}, []
    for name in plan:
        if name in STANDARD_PLAN:
            groups[name], pending = pending, []
        else:
            pending.append(name)
    stacking, removed = ORDERS[order]
    removed = set(removed) | ({IFM} if simplified else set())
    new_plan = []
    for block in stacking:
        new_plan += groups[block]
        if block not in removed:
            new_plan.append(block)
    return tuple(new_plan + pending)


def removed_blocks(order: str, simplified: bool):
    return set(ORDERS[order][1]) | ({IFM} if simplified else set())


def validate(args):
    order = args.decoder_sublayer_order  # the flag's choices: fusion_options.check_values
    changed = order != "tem-sem-ifm" or args.simplified_decoder
    if changed and getattr(args, "no_cross_attention", False):
        raise FusionError(
            "--decoder-sublayer-order/--simplified-decoder rearrange the decoder's encoder attention "
            "(SEM), which --no-cross-attention removes; drop one of them"
        )


def claims(args):
    order, simplified = args.decoder_sublayer_order, bool(args.simplified_decoder)
    found = []
    if order == "sem-ifm":
        found.append(Claim("decoder.self_attn", REMOVES, "--decoder-sublayer-order sem-ifm"))
    if simplified:
        found.append(Claim("decoder.ffn", REMOVES, "--simplified-decoder"))
    if order != "tem-sem-ifm" or simplified:  # rearranged first: later techniques insert next to named sub-layers
        by = f"--decoder-sublayer-order {order}" if order != "tem-sem-ifm" else "--simplified-decoder"
        found.append(Claim("decoder.plan", EXTENDS, by))
    return found


def attach(model, args):
    order, simplified = args.decoder_sublayer_order, bool(args.simplified_decoder)
    if order == "tem-sem-ifm" and not simplified:
        return
    drop = removed_blocks(order, simplified)
    for layer in model.decoder.layers:
        layer.set_plan(decoder_plan(layer.plan, order, simplified))
        for block in drop:
            for name in BLOCK_PARAMETERS[block]:
                remove_submodule(layer, name)


def remove_submodule(layer, name):
    """Unregister a sub-module/parameter (so its keys are unexpected in a strict load); the
    attribute stays, as None."""
    if getattr(layer, name, None) is None:
        return
    delattr(layer, name)
    object.__setattr__(layer, name, None)


fusion_options.register(
    OptionGroup(
        title="decoder sub-layers (Yang et al. 2020)",
        name="decoder_sublayers",
        flags=[
            Flag(
                "decoder_sublayer_order", "tem-sem-ifm",
                "stacking order of the decoder sub-layers (Table 1): tem-sem-ifm (standard), "
                "sem-tem-ifm, or sem-ifm (no self-attention)",
                type=str, choices=sorted(ORDERS), switch=True,
            ),
            Flag(
                "simplified_decoder", False,
                "simplified decoder (§3.3): IFM is a single Add&Norm, the decoder FFNs are removed",
                type=bool, switch=True,
            ),
        ],
        validate=validate,
        claims=claims,
        attach=attach,
    )
)
