"""The seams' Protocols (``fairseq_fusion/seams.py``) type the extension points: each is used in an annotation of
``fairseq_fusion/models/`` (read with ``ast``), and every object a technique attaches at a seam satisfies that seam's
Protocol: ``isinstance`` (the Protocols are ``runtime_checkable``: names only) and by signature, each Protocol
method's parameters bound to the technique's method positionally and by name, as the core calls it.

The techniques are found through the registry: for every (technique, seam, how) that a registered arch claims, the
first such arch is built at a tiny size and everything it holds at a seam is checked.
"""
import ast
import inspect
import os

import pytest
from fairseq import options
from fairseq.models import ARCH_MODEL_REGISTRY
from torch import nn

from fairseq_fusion import fusion_options, seams
from fairseq_fusion.models import FusionTransformerModel
from fairseq_fusion.seams import EncoderReader, LayerCombiner, LayerStateAttention, OutputFusion, SubLayer
from conftest import REPO, build_model, write_dicts

PROTOCOLS = sorted(name for name, obj in vars(seams).items()
                   if getattr(obj, "_is_protocol", False) and getattr(obj, "__module__", "") == seams.__name__)
ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel)
TINY = ["--encoder-embed-dim", "8", "--decoder-embed-dim", "8", "--encoder-ffn-embed-dim", "16",
        "--decoder-ffn-embed-dim", "16", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
        "--encoder-layers", "3", "--decoder-layers", "3"]
# the seams whose claim (replaces/extends) puts an object there: the Protocol it must satisfy
SEAM_PROTOCOLS = {
    "encoder.self_attn": LayerStateAttention, "decoder.self_attn": LayerStateAttention,
    "decoder.encoder_attn": LayerStateAttention, "encoder.plan": SubLayer, "decoder.plan": SubLayer,
    "encoder.layer_combiner": LayerCombiner, "decoder.layer_combiner": LayerCombiner,
    "decoder.encoder_reader": EncoderReader, "decoder.output_fusion": OutputFusion,
}


def seams_imported_and_annotated(path):
    """The names ``path`` imports from ``seams`` and uses in an annotation (a variable's, an attribute's, a
    parameter's, a return's)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    imported, annotated = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == "seams":
            imported.update(a.asname or a.name for a in node.names)
        annotations = []
        if isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = a.posonlyargs + a.args + a.kwonlyargs + [p for p in (a.vararg, a.kwarg) if p]
            annotations += [p.annotation for p in params] + [node.returns]
        for annotation in filter(None, annotations):
            annotated.update(n.id for n in ast.walk(annotation) if isinstance(n, ast.Name))
    return imported & annotated


def test_every_protocol_types_an_extension_point_of_the_core():
    folder = os.path.join(REPO, "fairseq_fusion", "models")
    used = set()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            used |= seams_imported_and_annotated(os.path.join(folder, name))
    missing = sorted(set(PROTOCOLS) - used)
    assert PROTOCOLS and not missing, f"Protocols of seams.py in no annotation of models/: {missing}"


def protocol_errors(obj, protocol):
    """How ``obj`` fails ``protocol``: a missing attribute, ``isinstance``, or a method that does not take the
    Protocol's parameters (positional-or-keyword ones bound by position and by name, keyword-only ones by name;
    ``__call__`` of a module is its ``forward``)."""
    errors = [f"no attribute {name}" for name in vars(protocol).get("__annotations__", {}) if not hasattr(obj, name)]
    if not isinstance(obj, protocol):
        errors.append(f"not an instance of {protocol.__name__}")
    methods = [n for n, v in vars(protocol).items() if inspect.isfunction(v) and (n == "__call__" or n[0] != "_")]
    for name in methods:
        method = obj.forward if name == "__call__" and isinstance(obj, nn.Module) else getattr(obj, name, None)
        if method is None:
            errors.append(f"no method {name}")
            continue
        params = list(inspect.signature(getattr(protocol, name)).parameters.values())[1:]
        positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        keywords = {p.name: p.name for p in params if p.kind is p.KEYWORD_ONLY}
        # each argument bound to the parameter of its name: by position (the order too), then all by name
        for args, kwargs in ((positional, keywords), ([], dict(zip(positional, positional), **keywords))):
            try:
                bound = inspect.signature(method).bind(*args, **kwargs).arguments
            except TypeError as e:
                bound = {"": str(e)}
            if any(bound.get(n) != n for n in [*args, *kwargs]):
                call = ", ".join([*args, *(f"{k}=" for k in kwargs)])
                errors.append(f"{name}{inspect.signature(method)} is not called as {protocol.__name__}'s ({call})"
                              + (f": {bound['']}" if "" in bound else ""))
    return errors


def seam_objects(model):
    """(seam, object) for every technique object the model holds at a seam."""
    found = []
    for side in ("encoder", "decoder"):
        stack = getattr(model, side)
        if stack.layer_combiner is not None:
            found.append((f"{side}.layer_combiner", stack.layer_combiner))
        for layer in stack.layers:
            for name in ("self_attn", "encoder_attn"):  # seam (a) types the attentions called with ``st``
                attn = getattr(layer, name, None)
                if getattr(attn, "wants_layer_state", False):
                    found.append((f"{side}.{name}", attn))
            found += [(f"{side}.plan", sub) for sub in (layer.extra_sublayers or {}).values()]
    for name in ("encoder_reader", "output_fusion"):
        if getattr(model.decoder, name) is not None:
            found.append((f"decoder.{name}", getattr(model.decoder, name)))
    return found


def claimed_archs():
    """(technique, seam, how) -> the first registered arch whose preset claims it (from the parsed flags alone)."""
    found = {}
    for arch in ARCHS:
        args = options.parse_args_and_arch(options.get_training_parser(), ["/nonexistent", "--arch", arch, *TINY])
        for group, claim in fusion_options.claims(args):
            found.setdefault((group.name, claim.seam, claim.how), arch)
    return found


CLAIMED = claimed_archs()


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    """arch -> (its args, what it holds at a seam), for every arch of ``CLAIMED``, built once."""
    data_dir = write_dicts(tmp_path_factory.mktemp("seam_dicts"), 40)
    built = {}
    for arch in sorted(set(CLAIMED.values())):
        model, _, args = build_model(data_dir, arch, *TINY, criterion=fusion_options.default_criterion(arch))
        built[arch] = args, seam_objects(model)
    return built


def test_a_wrong_object_fails_its_protocol():
    """The check finds arguments in another order, a keyword the core passes that is not taken, no method."""
    class SwappedCombiner(nn.Module):
        def combine_layers(self, x, idx, states, ctx):  # the core passes (idx, x, states, ctx) by position
            return x

        def stack_output(self, states, ctx):
            return states[-1]

    class NoLayerState(nn.Module):
        wants_layer_state = True

        def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None):
            return query, None

    assert protocol_errors(SwappedCombiner(), LayerCombiner)
    assert protocol_errors(NoLayerState(), LayerStateAttention)
    assert protocol_errors(nn.Linear(2, 2), OutputFusion)


@pytest.mark.parametrize("arch", sorted(set(CLAIMED.values())))
def test_every_object_a_technique_attaches_satisfies_its_seams_protocol(arch, held):
    args, objects = held[arch]
    wrong = {f"{seam}: {type(obj).__name__}": protocol_errors(obj, SEAM_PROTOCOLS[seam]) for seam, obj in objects}
    assert not {k: v for k, v in wrong.items() if v}
    for group, claim in fusion_options.claims(args):
        # what replaces a seam is there (a plan may be extended by a reorder alone, with no object)
        if claim.how == fusion_options.REPLACES and claim.seam in SEAM_PROTOCOLS:
            assert claim.seam in {seam for seam, _ in objects}, f"{group.name} claims {claim.seam}: nothing there"


def test_the_presets_exercise_every_protocol(held):
    """A technique object behind every Protocol, so the test above checks each at least once."""
    exercised = {SEAM_PROTOCOLS[seam].__name__ for _, objects in held.values() for seam, _ in objects}
    assert exercised == set(PROTOCOLS)
