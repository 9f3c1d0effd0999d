"""Layer aggregation (Dou et al., 2018, "Exploiting Deep Representations for Neural Machine
Translation", §3.1.1, Fig. 1-2, Tables 3-4).

Installed through seam (b) (``encoder.layer_combiner`` / ``decoder.layer_combiner``) of the
stacks chosen by ``--layer-aggregation-in`` (each combiner class below is a ``seams.LayerCombiner``).
H^l is layer l's output (l = 1..L); the embedding layer's output H^0 is not aggregated (the
equations start at l = 1), except by the ``every-layer`` linear combination below (Table 1's
count needs it).

- ``dense`` (Eq. 4): H^l = Layer(H^{l-1}) + sum_{i=1}^{l-1} H^i; no parameters. The sum is
  what the next layer reads and what the stack returns (Eq. 4 defines H^l that way).
  ``--dense-sum`` says what the sum adds: ``layers`` (default) = each lower layer's own
  output R^i = Layer(H^{i-1}), i.e. H^l = sum_{i=1}^{l} R^i (DenseNet's concatenation of the
  layers' outputs, made a sum as §3.1.1 says); ``recursive`` = the H^i of Eq. 4 taken
  literally, each already a sum, so layer 1 weighs 2^{L-2} in the stack output (16, 8, 4, 2,
  1, 1 for L = 6). Both add +0.0M (Table 1 row 2).
- ``linear`` (Eq. 5): learnable d x d matrices, no normalization, no bias.
  ``--linear-combination-at`` (reading): ``every-layer`` (default) = the input of every layer
  l and the stack output are linear combinations of all lower states, embedding layer
  included: x^l = sum_{k=0}^{l-1} W^l_k H^k (an extra first sub-layer of layer l, seam d,
  reading the raw outputs in ``ctx.states``) and Ĥ = sum_{k=0}^{L} W_k H^k; 28 matrices a
  stack for L = 6, 56 in all = Table 1's +14.7M (the structure of DLCL, Wang et al. 2019,
  with matrices for its scalars and without its LayerNorm); ``output`` = Eq. 5 as written,
  Ĥ = sum_{l=1}^{L} W_l H^l at the stack output only (+3.1M). Both start as the vanilla stack
  (the matrix of the state the vanilla model reads there is the identity, the others zero),
  so a model started from a vanilla checkpoint (§4.1) computes the vanilla model.
- ``iterative`` (Eq. 6): Ĥ^1 = H^1, Ĥ^l = AGG(H^l, Ĥ^{l-1}); Ĥ^L is the stack output; the
  backbone is unchanged (Fig. 1d: nothing is fed back).
- ``hierarchical`` (§3.1.1, Fig. 2b): node Ĥ^i = AGG(H^{2i-1}, H^{2i}) for i = 1 and
  AGG(H^{2i-1}, H^{2i}, Ĥ^{i-1}) for i >= 2; each node is fed back into the backbone as the
  input of layer 2i+1 and the top node is the stack output. Odd depth L (the paper uses
  L = 6): the last layer has no partner, so the last node is AGG(H^L, Ĥ^{(L-1)/2}) with two
  inputs (e.g. L = 3: Ĥ^1 = AGG(H^1, H^2), Ĥ^2 = AGG(H^3, Ĥ^1)).

AGG (Eq. 7, and its three-input form in §3.1.1): AGG(x_1..x_n) = LN(FF([x_1; ...; x_n]) + R)
with FF = W_2 act(W_1 z + b_1) + b_2 (W_1: n*d -> ffn, W_2: ffn -> d, ffn = the stack's FFN
size; these sizes give Table 1's +31.5M / +23.1M for the base model). ``--aggregation-function``
(Table 4): act = sigmoid (paper's default) or relu; ``attention`` replaces FF by fairseq's
multi-head self-attention over the n inputs of each position, averaged over the n outputs
(reading: the paper only names "multi-head self-attention layer"; attending over the inputs
keeps AGG position-wise, like FF). ``--aggregation-residual`` (Table 4): R = sum of all inputs
(``all``, default), the input from the highest backbone layer only (``top``: H^l for
iterative, H^{2i} for hierarchical), or none. The FF/attention output gets --dropout before
the residual, as every Transformer sub-layer (the equations omit dropout, as Eq. 1 does).
"""
from typing import List, Optional, Sequence

import torch
from fairseq.modules import FairseqDropout, LayerNorm, MultiheadAttention
from torch import Tensor, nn

from .. import fusion_options
from . import internals
from ..fusion_options import EXTENDS, REMOVES, REPLACES, Claim, Flag, OptionGroup
from ..errors import FusionError
from ..seams import LayerCombiner, LayerContext

KINDS = ("none", "dense", "linear", "iterative", "hierarchical")
# the options that build AGG (Eq. 7) and so read --aggregation-function/--aggregation-residual
AGG_USERS = [("layer_aggregation", ("iterative", "hierarchical")), "multilayer_attention"]
FUNCTIONS = ("sigmoid", "relu", "attention")
RESIDUALS = ("all", "top", "none")
SIDES = ("both", "encoder", "decoder")
DENSE_SUMS = ("layers", "recursive")
LINEAR_AT = ("every-layer", "output")
LAYER_INPUT = "linear_combination"  # name of LayerInputCombination in a layer's plan


class Aggregation(nn.Module):
    """AGG(x_1, ..., x_n) = LN(FF([x_1; ...; x_n]) + residual) (Eq. 7; §3.1.1 for n = 3).

    ``top``: index of the input from the highest backbone layer (``residual="top"``);
    ``input_names``: labels of the inputs (exploitation score, Eq. 11).
    """

    def __init__(self, num_inputs: int, dim: int, ffn_dim: int, function: str = "sigmoid",
                 residual: str = "all", top: int = 0, dropout: float = 0.0, num_heads: int = 1,
                 input_names: Optional[Sequence[str]] = None, name: str = ""):
        super().__init__()
        self.num_inputs, self.dim = num_inputs, dim
        self.function, self.residual, self.top = function, residual, top
        self.input_names = list(input_names or [f"x{j + 1}" for j in range(num_inputs)])
        self.name = name
        if function == "attention":
            self.attn = MultiheadAttention(dim, num_heads, self_attention=True)
        else:
            self.fc1 = nn.Linear(num_inputs * dim, ffn_dim)
            self.fc2 = nn.Linear(ffn_dim, dim)
            for fc in (self.fc1, self.fc2):
                nn.init.xavier_uniform_(fc.weight)
                nn.init.zeros_(fc.bias)
        self.dropout_module = FairseqDropout(dropout, module_name=type(self).__name__)
        self.layer_norm = LayerNorm(dim)
        self.internals_sink = None  # --fusion-log-internals (internals.py): Eq. 11's share of each input
        self.internals_name = "agg"  # set by attach, e.g. layer_aggregation/encoder_agg1

    def transform(self, inputs: List[Tensor]) -> Tensor:
        if self.function == "attention":
            shape = inputs[0].shape
            seq = torch.stack(inputs, 0).reshape(len(inputs), -1, shape[-1])  # n x (T*B) x C
            out, _ = self.attn(seq, seq, seq, need_weights=False)
            return out.mean(0).reshape(shape)
        hidden = self.fc1(torch.cat(inputs, dim=-1))
        hidden = torch.sigmoid(hidden) if self.function == "sigmoid" else torch.relu(hidden)
        return self.fc2(hidden)

    def residual_of(self, inputs: List[Tensor]):
        if self.residual == "all":
            return sum(inputs)
        if self.residual == "top":
            return inputs[self.top]
        return 0

    def forward(self, inputs: List[Tensor]) -> Tensor:
        if len(inputs) != self.num_inputs:
            raise ValueError(f"{self.name or 'AGG'} expects {self.num_inputs} inputs, got {len(inputs)}")
        if self.internals_sink is not None and self.function != "attention":  # attention: no per-input weights
            for j, share in enumerate(internals.exploitation(self.input_weights()).unbind(0)):
                internals.record(self, f"{self.internals_name}_x{j + 1}", share)
        return self.layer_norm(self.dropout_module(self.transform(inputs)) + self.residual_of(inputs))

    def input_weights(self) -> List[Tensor]:
        """W_j of Eq. 11: the columns of FF's first matrix that multiply input j."""
        if self.function == "attention":
            raise FusionError(
                f"{self.name}: the exploitation score (Eq. 11) needs FF's per-input matrices; "
                "--aggregation-function attention has none"
            )
        return list(self.fc1.weight.split(self.dim, dim=1))


class DenseConnection(nn.Module):
    """Eq. 4, additive, no parameters: H^l = Layer(H^{l-1}) + the sum over the lower layers i < l
    of their own outputs Layer(H^{i-1}) (``recursive=False``, so H^l = sum_{i<=l} Layer(H^{i-1}))
    or of the H^i themselves (``recursive=True``, Eq. 4's symbols taken literally)."""

    def __init__(self, recursive: bool = False):
        super().__init__()
        self.recursive = recursive

    def combine_layers(self, idx, x, states, ctx):
        # states = [embedding layer, H^1, ..., H^{l-1}], x = Layer(H^{l-1})
        if self.recursive:
            return x + sum(states[1:])
        return x if idx == 0 else x + states[-1]  # H^{l-1} = sum of the lower layers' own outputs

    def stack_output(self, states, ctx):
        return states[-1]

    def nodes(self):
        return []


def linear_weights(num_inputs: int, dim: int) -> nn.ModuleList:
    """Unnormalized d x d matrices without bias, the last the identity and the others zero (the
    combination starts as its last input: the state the vanilla model reads there)."""
    weights = nn.ModuleList(nn.Linear(dim, dim, bias=False) for _ in range(num_inputs))
    with torch.no_grad():
        for w in weights:
            w.weight.zero_()
        weights[-1].weight.copy_(torch.eye(dim))
    return weights


class LayerInputCombination(nn.Module):
    """``--linear-combination-at every-layer``: the first sub-layer (seam d, a ``seams.SubLayer``) of layer l
    (1-based) replaces its input by x^l = sum_{k=0}^{l-1} W^l_k H^k over the raw outputs of the
    embedding layer and the lower layers (``ctx.states``; the layer's own input is H^{l-1})."""

    def __init__(self, layer_idx: int, dim: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.weights = linear_weights(layer_idx + 1, dim)
        self.input_names = [f"H^{k}" for k in range(layer_idx + 1)]
        self.name = f"x^{layer_idx + 1}"

    def forward(self, x, st: LayerContext):
        # indexed from the bottom: a checkpointed layer recomputes in backward, when the stack
        # has appended the states above it
        lower = st.ctx.states[: self.layer_idx]  # H^0..H^{l-2}; x = H^{l-1}
        if len(lower) != self.layer_idx:
            raise RuntimeError(
                f"--linear-combination-at every-layer: layer {self.layer_idx + 1} expects the "
                f"{self.layer_idx} states below its input, got {len(lower)}"
            )
        return sum(w(h) for w, h in zip(self.weights, list(lower) + [x]))

    def input_weights(self):
        return [w.weight for w in self.weights]


class LinearCombination(nn.Module):
    """Eq. 5: Ĥ = sum_l W_l H^l with learnable, unnormalized d x d matrices W_l, over H^1..H^L
    (``every_layer=False``, Eq. 5 as written) or over H^0..H^L with every layer's input
    combined too (``every_layer=True``: the layers' ``LayerInputCombination``, installed by
    ``attach``; they are registered in the layers, listed here for ``nodes``)."""

    def __init__(self, num_layers: int, dim: int, every_layer: bool = False):
        super().__init__()
        self.every_layer = every_layer
        self.first = 0 if every_layer else 1  # the lowest state combined: embedding layer or H^1
        self.weights = linear_weights(num_layers + 1 - self.first, dim)
        self.input_names = [f"H^{l}" for l in range(self.first, num_layers + 1)]
        self.__dict__["layer_inputs"] = []  # plain list: the modules belong to the layers
        self.internals_sink = None  # --fusion-log-internals (internals.py): each state's share of the weights
        self.internals_name = "stack"  # set by attach: encoder or decoder

    def combine_layers(self, idx, x, states, ctx):
        return x

    def stack_output(self, states, ctx):
        if self.internals_sink is not None:
            self.record_internals()
        return sum(w(h) for w, h in zip(self.weights, states[self.first:]))

    def record_internals(self):
        """The weight on each combined state H^l: its matrix's share of the L1 mass (Eq. 11's exploitation)."""
        shares = internals.exploitation(self.input_weights())
        for l, share in zip(range(self.first, self.first + len(self.weights)), shares.unbind(0)):
            internals.record(self, f"layer_aggregation/{self.internals_name}_on_H{l}", share)

    def install_layer_inputs(self, layers, dim):
        """Put a ``LayerInputCombination`` first in every layer's plan (``every_layer`` only)."""
        for layer in layers:
            node = LayerInputCombination(layer.layer_idx, dim)
            if layer.extra_sublayers is None:
                layer.extra_sublayers = nn.ModuleDict()
            layer.extra_sublayers[LAYER_INPUT] = node
            layer.set_plan((LAYER_INPUT,) + tuple(layer.plan))
            self.layer_inputs.append(node)

    def nodes(self):
        return list(self.layer_inputs) + [self]

    @property
    def name(self):
        return "Ĥ"

    def input_weights(self):
        return [w.weight for w in self.weights]


class IterativeAggregation(nn.Module):
    """Eq. 6: Ĥ^1 = H^1, Ĥ^l = AGG(H^l, Ĥ^{l-1}); the stack outputs Ĥ^L."""

    def __init__(self, num_layers: int, make_agg):
        super().__init__()
        self.aggs = nn.ModuleList(
            make_agg(2, top=0, input_names=["H^l", "Ĥ^{l-1}"], name=f"Ĥ^{l}") for l in range(2, num_layers + 1)
        )

    def combine_layers(self, idx, x, states, ctx):
        return x

    def stack_output(self, states, ctx):
        agg = states[1]
        for node, h in zip(self.aggs, states[2:]):
            agg = node([h, agg])
        return agg

    def nodes(self):
        return list(self.aggs)


class HierarchicalAggregation(nn.Module):
    """§3.1.1 / Fig. 2b: a tree of filter size two whose nodes are fed back into the backbone.

    Node i is computed after layer 2i: AGG(H^{2i-1}, H^{2i}[, Ĥ^{i-1}]); for odd L the last
    node, after layer L, is AGG(H^L, Ĥ^{(L-1)/2}). The node replaces the layer's output as
    the next layer's input, so ``states`` holds Ĥ^i at depth 2i and the top node at depth L.
    """

    def __init__(self, num_layers: int, make_agg):
        super().__init__()
        self.num_layers = num_layers
        aggs = []
        for i in range(1, num_layers // 2 + 1):
            names = ["H^{2i-1}", "H^{2i}"] + (["Ĥ^{i-1}"] if i > 1 else [])
            aggs.append(make_agg(len(names), top=1, input_names=names, name=f"Ĥ^{i}"))
        if num_layers % 2 == 1:
            i = num_layers // 2 + 1
            aggs.append(make_agg(2, top=0, input_names=["H^{2i-1}", "Ĥ^{i-1}"], name=f"Ĥ^{i}"))
        self.aggs = nn.ModuleList(aggs)

    def combine_layers(self, idx, x, states, ctx):
        depth = idx + 1  # x = H^depth; states[depth - 1] is the input of this layer
        if depth % 2 == 0:
            i = depth // 2
            inputs = [states[depth - 1], x] + ([states[depth - 2]] if i > 1 else [])
            return self.aggs[i - 1](inputs)
        if depth == self.num_layers and depth > 1:
            return self.aggs[-1]([x, states[depth - 1]])
        return x

    def stack_output(self, states, ctx):
        return states[-1]

    def nodes(self):
        return list(self.aggs)


def build_combiner(kind: str, num_layers: int, dim: int, ffn_dim: int, args, num_heads: int) -> LayerCombiner:
    def make_agg(n, **kwargs):
        return Aggregation(n, dim, ffn_dim, function=args.aggregation_function,
                           residual=args.aggregation_residual, dropout=args.dropout,
                           num_heads=num_heads, **kwargs)

    builders = {  # the kinds of KINDS but "none" (the flag's choices, checked by fusion_options.check_values)
        "dense": lambda: DenseConnection(recursive=args.dense_sum == "recursive"),
        "linear": lambda: LinearCombination(num_layers, dim, every_layer=args.linear_combination_at == "every-layer"),
        "iterative": lambda: IterativeAggregation(num_layers, make_agg),
        "hierarchical": lambda: HierarchicalAggregation(num_layers, make_agg),
    }
    return builders[kind]()


def sides(choice: str) -> List[str]:
    return [s for s in ("encoder", "decoder") if choice in ("both", s)]


def validate(args):
    kind = args.layer_aggregation  # the flags' choices: fusion_options.check_values
    if kind in ("none", "dense"):
        return
    for side in sides(args.layer_aggregation_in):
        layers = getattr(args, f"{side}_layers")
        if layers < 2:
            raise FusionError(
                f"--layer-aggregation {kind} aggregates at least 2 layers, got --{side}-layers {layers}"
            )


def claims(args):
    kind = args.layer_aggregation
    if kind == "none":
        return []
    found = []
    for side in sides(args.layer_aggregation_in):
        found.append(Claim(f"{side}.layer_combiner", REPLACES, f"--layer-aggregation {kind}"))
        if kind == "linear" and args.linear_combination_at == "every-layer":  # a combination before every layer
            found.append(Claim(f"{side}.plan", EXTENDS, f"--layer-aggregation {kind}"))
    return found


def attach(model, args):
    kind = args.layer_aggregation
    if kind == "none":
        return
    for side in sides(args.layer_aggregation_in):
        stack = getattr(model, side)
        stack.layer_combiner = build_combiner(
            kind, len(stack.layers), getattr(args, f"{side}_embed_dim"),
            getattr(args, f"{side}_ffn_embed_dim"), args, getattr(args, f"{side}_attention_heads"),
        )
        stack.layer_combiner.internals_name = side
        for i, node in enumerate(getattr(stack.layer_combiner, "aggs", [])):
            node.internals_name = f"layer_aggregation/{side}_agg{i + 1}"
        if kind == "linear" and stack.layer_combiner.every_layer:
            stack.layer_combiner.install_layer_inputs(stack.layers, getattr(args, f"{side}_embed_dim"))


fusion_options.register(
    OptionGroup(
        title="layer aggregation (Dou et al. 2018)",
        name="layer_aggregation",
        flags=[
            Flag("layer_aggregation", "none",
                 "combine the layers of a stack (Dou et al. 2018, §3.1.1): dense (Eq. 4), linear "
                 "(Eq. 5), iterative (Eq. 6-7) or hierarchical (Fig. 2)", type=str, choices=list(KINDS), switch=True),
            Flag("layer_aggregation_in", "both",
                 "which stacks aggregate their layers (Table 3)", type=str, choices=list(SIDES),
                 requires=["layer_aggregation"]),
            Flag("dense_sum", "layers",
                 "what the sum of dense connection (Eq. 4) adds: each lower layer's own output "
                 "(layers, default) or the lower H^i, themselves sums (recursive: layer 1 weighs 2^(L-2))",
                 type=str, choices=list(DENSE_SUMS), requires=[("layer_aggregation", ("dense",))], legacy="recursive"),
            Flag("linear_combination_at", "every-layer",
                 "where the linear combination (Eq. 5) applies: every layer's input and the stack "
                 "output, over all lower states incl. the embedding layer (every-layer, default: Table 1's "
                 "+14.7M), or the stack output only, over H^1..H^L (output: Eq. 5 as written)",
                 type=str, choices=list(LINEAR_AT), requires=[("layer_aggregation", ("linear",))], legacy="output"),
            Flag("aggregation_function", "sigmoid",
                 "FF of AGG (Eq. 7, Table 4): sigmoid or relu feed-forward, or multi-head attention "
                 "over the inputs; also used by --multilayer-attention", type=str, choices=list(FUNCTIONS),
                 requires=AGG_USERS),
            Flag("aggregation_residual", "all",
                 "residual of AGG (Table 4): all inputs, the top input only, or none", type=str,
                 choices=list(RESIDUALS), requires=AGG_USERS),
        ],
        validate=validate,
        claims=claims,
        attach=attach,
    )
)
