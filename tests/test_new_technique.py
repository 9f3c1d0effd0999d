"""Adding a technique touches no file but its own: a toy technique, defined and registered here alone, is covered
by the contract suite, the catalog (``fusion-archs``), the conflict matrix and the TorchScript refusal (ARCHITECTURE.md,
Adding a technique).

The toy scales the decoder's layer outputs by (1 + a_l), one learned scalar per layer, through seam (b): it claims
``decoder.layer_combiner``, which ``--layer-aggregation`` also claims, so the registry must refuse that pair.
"""
import json

import pytest
import torch
from fairseq.models import (ARCH_CONFIG_REGISTRY, ARCH_MODEL_INV_REGISTRY, ARCH_MODEL_NAME_REGISTRY, ARCH_MODEL_REGISTRY,
                            register_model_architecture)
from torch import nn

import test_contracts as contracts
from fairseq_fusion import fusion_options
from fairseq_fusion.errors import PREFIX, FusionError
from fairseq_fusion_tools.archs import command
from fairseq_fusion_tools.cli import archs as cli
from fairseq_fusion.fusion_options import REPLACES, Claim, Flag, OptionGroup
from fairseq_fusion.models import catalog, conflicts
from fairseq_fusion.models.archs_base import fusion_base_architecture

ARCH = "transformer_toy_scaled_decoder"


class ToyCombiner(nn.Module):
    def __init__(self, num_layers):
        super().__init__()
        self.scale = nn.Parameter(torch.zeros(num_layers))

    def combine_layers(self, idx, x, states, ctx):
        return x * (1 + self.scale[idx])

    def stack_output(self, states, ctx):
        return states[-1]


def attach(model, args):
    if args.toy_scale:
        model.decoder.layer_combiner = ToyCombiner(len(model.decoder.layers))


TOY = OptionGroup(
    title="toy: scaled decoder layers (a test)", name="toy_scale",
    flags=[Flag("toy_scale", False, "Scale each decoder layer's output by a learned 1 + a_l.", type=bool, switch=True)],
    claims=lambda args: [Claim("decoder.layer_combiner", REPLACES, "--toy-scale")] if args.toy_scale else [],
    attach=attach,
)


@pytest.fixture(scope="module")
def toy():
    fusion_options.register(TOY)

    @catalog.describe(source="vaswani", paper="none (a test's toy)", equations="x_l (1 + a_l)", key_flags="`--toy-scale`")
    @register_model_architecture("fusion_transformer", ARCH)
    def toy_architecture(args):
        args.toy_scale = getattr(args, "toy_scale", True)
        fusion_base_architecture(args)

    yield ARCH
    fusion_options.unregister("toy_scale")
    for registry in (ARCH_MODEL_REGISTRY, ARCH_CONFIG_REGISTRY, ARCH_MODEL_NAME_REGISTRY, catalog.CATALOG):
        registry.pop(ARCH, None)
    ARCH_MODEL_INV_REGISTRY["fusion_transformer"].remove(ARCH)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return contracts.write_dicts(tmp_path_factory.mktemp("toy_dicts"), contracts.VOCAB)


@pytest.mark.parametrize("contract", [
    "test_incremental_equals_full", "test_padding_invariance", "test_beam_search_batch_equals_alone",
    "test_training_step_reaches_every_parameter", "test_save_load_round_trip", "test_layerdrop_training_steps",
])
def test_the_contract_suite_covers_it(toy, data_dir, contract):
    model, _, _ = contracts.build(toy, data_dir)
    assert isinstance(model.decoder.layer_combiner, ToyCombiner)  # the technique is on in its preset
    getattr(contracts, contract)(toy, data_dir)


def test_the_attach_order_puts_it_after_the_declared_techniques(toy):
    names = [g.name for g in fusion_options.GROUPS]
    assert names[:len(fusion_options.ATTACH_ORDER)] == list(fusion_options.ATTACH_ORDER) and names[-1] == "toy_scale"


def test_the_catalog_lists_it_with_its_flag(toy, capsys):
    listed = json.loads(cli_output(["--format", "json"]))
    assert any(r["arch"] == toy and r["paper"] == "none (a test's toy)" for r in listed)
    shown = cli_output([toy])
    assert "--toy-scale" in shown and "toy: scaled decoder layers" in shown


def test_the_conflict_matrix_refuses_it_with_layer_aggregation(toy, data_dir):
    _, _, pairs = conflicts.pairs()
    verdicts = {frozenset((p.a.text(), p.b.text())): p.refusal for p in pairs}
    assert verdicts[frozenset(("--toy-scale", "--layer-attention fine"))] is None
    refusal = verdicts[frozenset(("--toy-scale", "--layer-aggregation dense"))]
    assert refusal == "--layer-aggregation dense and --toy-scale both replace the decoder's layer combination (seam b): " \
        "use one of them"
    with pytest.raises(ValueError, match="--layer-aggregation dense and --toy-scale both replace"):
        contracts.build(toy, data_dir, extra=["--layer-aggregation", "dense"])


def test_torchscript_refuses_it_in_one_line(toy, data_dir):
    model, _, _ = contracts.build(toy, data_dir)
    with pytest.raises(FusionError, match=f"^{PREFIX}torch.jit.script: {toy} with --toy-scale does not script: [^\n]*$"):
        torch.jit.script(model)


def cli_output(argv):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        command.main(cli.get_parser().parse_args(argv))
    return out.getvalue()
