"""Contracts every architecture of ``fusion_transformer`` keeps.

The archs are discovered from fairseq's registry, so an arch added later is covered with
no edit here; the documented combinations of techniques (``models/combinations.py``) are
checked the same way. Models are built at small sizes the way ``fairseq-train`` builds them (task
from a data directory with dictionaries, argparse with the arch's preset), on CPU.
"""
import argparse
import copy
import io
import logging
import os
import re

import pytest
import torch
from torch import nn
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
from fairseq.modules import LayerDropModuleList
from fairseq.sequence_generator import SequenceGenerator

from fairseq_fusion import fusion_options
from fairseq_fusion.models import FusionTransformerModel
from fairseq_fusion.models.combinations import COMBINATIONS
from conftest import build_model, write_dicts

ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel)
# every registered arch, then every documented combination of techniques (arch + flags)
CASES = ARCHS + sorted(COMBINATIONS)

SMALL = [
    "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
    "--encoder-layers", "3", "--decoder-layers", "3",
]
VOCAB = 40


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A data directory with a joined dictionary (what fairseq-preprocess writes)."""
    return write_dicts(tmp_path_factory.mktemp("contract_dicts"), VOCAB)


def build(arch, data_dir, seed=1, dropout="0.1", extra=(), criterion=None):
    arch, flags = COMBINATIONS.get(arch, (arch, []))
    extra = [*flags, *extra]
    criterion = criterion or fusion_options.default_criterion(arch)
    smoothing = ["--label-smoothing", "0.1"] if "label_smoothed" in criterion else []
    return build_model(data_dir, arch, *smoothing, "--dropout", dropout, "--attention-dropout", "0.1", *SMALL, *extra,
                       seed=seed, criterion=criterion)


def sentences(task, lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    d = task.source_dictionary
    return [torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g), torch.tensor([d.eos()])]) for n in lengths]


def collate(task, srcs, tgts=None):
    """Left-padded sources, right-padded targets, as fairseq's LanguagePairDataset."""
    from fairseq.data import data_utils

    d = task.source_dictionary
    batch = {
        "src_tokens": data_utils.collate_tokens(srcs, d.pad(), d.eos(), left_pad=True),
        "src_lengths": torch.tensor([len(s) for s in srcs]),
    }
    if tgts is not None:
        batch["prev_output_tokens"] = data_utils.collate_tokens(tgts, d.pad(), d.eos(), left_pad=False, move_eos_to_beginning=True)
        batch["target"] = data_utils.collate_tokens(tgts, d.pad(), d.eos(), left_pad=False)
    return batch


def full_log_probs(model, batch):
    net_out = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])
    return model.get_normalized_probs(net_out, log_probs=True)


def incremental_log_probs(model, batch):
    """Step by step, the way fairseq's SequenceGenerator (EnsembleModel.forward_decoder) calls the model."""
    encoder_out = model.encoder.forward_torchscript({"src_tokens": batch["src_tokens"], "src_lengths": batch["src_lengths"]})
    state = torch.jit.annotate(dict, {})
    prev = batch["prev_output_tokens"]
    steps = []
    for t in range(prev.size(1)):
        out = model.decoder.forward(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
        out = (out[0][:, -1:, :], out[1])
        steps.append(model.get_normalized_probs(out, log_probs=True)[:, -1, :])
    return torch.stack(steps, dim=1)


def test_archs_discovered():
    assert "fusion_transformer" in ARCHS and "fusion_transformer_big" in ARCHS


@pytest.mark.parametrize("arch", CASES)
@torch.no_grad()
def test_incremental_equals_full(arch, data_dir):
    model, task, _ = build(arch, data_dir)
    model.eval()
    srcs = sentences(task, [7, 4, 9])
    tgts = sentences(task, [6, 6, 6], seed=1)
    batch = collate(task, srcs, tgts)
    full = full_log_probs(model, batch)
    inc = incremental_log_probs(model, batch)
    assert torch.isfinite(full).all()
    assert (full - inc).abs().max().item() <= 1e-5


@pytest.mark.parametrize("arch", CASES)
@torch.no_grad()
def test_padding_invariance(arch, data_dir):
    model, task, _ = build(arch, data_dir)
    model.eval()
    srcs = sentences(task, [5, 11, 8])
    tgts = sentences(task, [4, 9, 6], seed=2)
    batched = full_log_probs(model, collate(task, srcs, tgts))
    for i in range(len(srcs)):
        alone = full_log_probs(model, collate(task, [srcs[i]], [tgts[i]]))[0]
        n = len(tgts[i])
        assert (batched[i, :n] - alone[:n]).abs().max().item() <= 1e-5, f"sentence {i}"


@pytest.mark.parametrize("arch", CASES)
@torch.no_grad()
def test_beam_search_batch_equals_alone(arch, data_dir):
    model, task, _ = build(arch, data_dir)
    model.eval()
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=4, max_len_a=0, max_len_b=8)
    srcs = sentences(task, [6, 10, 3])
    batched = generator.generate([model], {"net_input": collate(task, srcs)})
    for i in range(len(srcs)):
        alone = generator.generate([model], {"net_input": collate(task, [srcs[i]])})[0]
        assert [h["tokens"].tolist() for h in batched[i]] == [h["tokens"].tolist() for h in alone], f"sentence {i}"
        for hb, ha in zip(batched[i], alone):
            assert abs(hb["score"].item() - ha["score"].item()) <= 1e-4


def training_sample(task, src_lengths=(7, 5, 9, 4), tgt_lengths=(5, 8, 3, 6)):
    srcs = sentences(task, src_lengths)
    tgts = sentences(task, tgt_lengths, seed=3)
    net_input = collate(task, srcs, tgts)
    target = net_input.pop("target")
    return {
        "id": torch.arange(len(srcs)), "net_input": net_input, "target": target,
        "ntokens": int(target.ne(task.target_dictionary.pad()).sum()), "nsentences": len(srcs),
    }


def training_step(model, task, args, seed=5):
    """Loss and gradients of one training step (dropout on, seeded)."""
    criterion = task.build_criterion(args)
    model.train()
    torch.manual_seed(seed)
    loss, _, _ = criterion(model, training_sample(task))
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("arch", CASES)
def test_training_step_reaches_every_parameter(arch, data_dir):
    model, task, args = build(arch, data_dir)
    loss, _ = training_step(model, task, args)
    assert torch.isfinite(loss)
    no_grad = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not no_grad, f"parameters without gradient (DDP would need find_unused_parameters): {no_grad}"
    zero = [n for n, p in model.named_parameters() if p.requires_grad and not p.grad.abs().sum() > 0]
    assert not zero, f"parameters with an all-zero gradient: {zero}"


@pytest.mark.parametrize("arch", CASES)
@torch.no_grad()
def test_save_load_round_trip(arch, data_dir):
    model, task, args = build(arch, data_dir, seed=1)
    model.eval()
    buf = io.BytesIO()
    torch.save({"args": args, "model": model.state_dict()}, buf)
    buf.seek(0)
    state = torch.load(buf)  # torch's safe (weights_only) loader, as fairseq uses it
    fresh, _, _ = build(arch, data_dir, seed=2)
    fresh.load_state_dict(state["model"], strict=True)
    fresh.eval()
    batch = collate(task, sentences(task, [6, 9]), sentences(task, [5, 5], seed=4))
    assert torch.equal(full_log_probs(model, batch), full_log_probs(fresh, batch))


# --- fairseq features a WMT-scale user turns on -------------------------------------------


@pytest.mark.parametrize("flag", ["--checkpoint-activations", "--offload-activations"])
@pytest.mark.parametrize("arch", CASES)
def test_checkpoint_activations_same_loss_and_gradients(arch, flag, data_dir):
    """Layers recomputed in backward give the loss and gradients of the plain model (same seed, dropout on)."""
    model, task, args = build(arch, data_dir)
    loss, grads = training_step(model, task, args)
    model_ckpt, task, args_ckpt = build(arch, data_dir, extra=[flag])
    assert args_ckpt.checkpoint_activations
    loss_ckpt, grads_ckpt = training_step(model_ckpt, task, args_ckpt)
    assert abs(loss.item() - loss_ckpt.item()) <= 1e-6 * abs(loss.item())
    assert [n for n, g in grads.items() if g is None] == [n for n, g in grads_ckpt.items() if g is None]
    for name, g in grads.items():
        if g is not None:
            assert (g - grads_ckpt[name]).abs().max().item() <= 1e-6, name


LAYERDROP = ["--encoder-layerdrop", "0.5", "--decoder-layerdrop", "0.5"]
DROPPED = {"encoder": {1}, "decoder": {0, 2}}  # of 3 + 3 layers


class IdentityEncoderLayer(nn.Module):
    def forward(self, x, encoder_padding_mask=None, attn_mask=None, ctx=None):
        return x


class IdentityDecoderLayer(nn.Module):
    def forward(self, x, *args, **kwargs):
        return x, None, None


def refusal_names_both_flags(error):
    """A layer-drop refusal names the layer-drop flag and the technique's flag."""
    message = str(error)
    flags = set(re.findall(r"--[a-z][a-z-]+", message))
    return bool(flags & {"--encoder-layerdrop", "--decoder-layerdrop"}) and len(flags) >= 2


@pytest.mark.parametrize("arch", CASES)
@torch.no_grad()
def test_layerdrop_drops_to_the_identity_or_is_refused(arch, data_dir, monkeypatch):
    """A layer LayerDrop skips is the identity: the output equals that of the same model whose
    dropped layers are replaced by identity layers (so layer-indexed techniques keep their
    structure); or the arch refuses the flag naming both flags."""
    try:
        model, task, _ = build(arch, data_dir, extra=LAYERDROP)
    except ValueError as e:
        assert refusal_names_both_flags(e), str(e)
        return
    assert isinstance(model.encoder.layers, LayerDropModuleList)
    reference = copy.deepcopy(model)
    for side, dropped in DROPPED.items():
        identity = IdentityEncoderLayer if side == "encoder" else IdentityDecoderLayer
        layers = list(nn.ModuleList.__iter__(getattr(reference, side).layers))
        getattr(reference, side).layers = nn.ModuleList(
            [identity() if i in dropped else m for i, m in enumerate(layers)]
        )
    model.eval()
    reference.eval()
    batch = collate(task, sentences(task, [6, 9, 3]), sentences(task, [5, 7, 4], seed=4))
    undropped = full_log_probs(model, batch)
    drops = {id(model.encoder.layers): DROPPED["encoder"], id(model.decoder.layers): DROPPED["decoder"]}

    def fixed_drop(layers):  # LayerDrop with a fixed choice, also in eval mode
        return (m for i, m in enumerate(nn.ModuleList.__iter__(layers)) if i not in drops[id(layers)])

    monkeypatch.setattr(LayerDropModuleList, "__iter__", fixed_drop)
    dropped = full_log_probs(model, batch)
    assert (dropped - undropped).abs().max().item() > 1e-3  # the layers were really dropped
    assert (dropped - full_log_probs(reference, batch)).abs().max().item() <= 1e-5


@pytest.mark.parametrize("arch", CASES)
def test_layerdrop_training_steps(arch, data_dir):
    """Random LayerDrop over several steps: a finite loss and a backward pass every time."""
    try:
        model, task, args = build(arch, data_dir, extra=LAYERDROP)
    except ValueError as e:
        assert refusal_names_both_flags(e), str(e)
        return
    for seed in range(6):
        model.zero_grad()
        loss, _ = training_step(model, task, args, seed=seed)
        assert torch.isfinite(loss), f"seed {seed}"


def test_declared_criterion_is_warned_about_when_replaced(data_dir, caplog):
    assert fusion_options.DEFAULT_CRITERION, "no arch declares its criterion"
    for arch, declared in fusion_options.DEFAULT_CRITERION.items():
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            build(arch, data_dir, criterion=declared)
        assert not [r for r in caplog.records if "--criterion" in r.getMessage()]
        with caplog.at_level(logging.WARNING):
            build(arch, data_dir, criterion="cross_entropy")
        warnings = [r.getMessage() for r in caplog.records if "--criterion" in r.getMessage()]
        assert len(warnings) == 1
        for part in (arch, declared, "cross_entropy", fusion_options.PAPER_CRITERION_SETTING[arch]):
            assert part in warnings[0]


def off_value_changed(flag):
    """A value of ``flag`` other than its off value."""
    if flag.choices:
        return next(c for c in flag.choices if c != flag.default)
    if flag.type is bool:
        return not flag.default
    if flag.type is int:
        return (flag.default or 0) + 2
    if flag.type is float:
        return 0.5 if flag.default != 0.5 else 0.25
    return "x"


def switched_on(requirement):
    """Flag settings that satisfy one requirement of ``Flag.requires`` (and, when the required
    flag itself configures a technique, that technique's switch)."""
    name = requirement if isinstance(requirement, str) else requirement[0]
    flag = fusion_options._flag(name)
    settings = {} if flag.switch else switched_on(flag.requires[0])
    value = off_value_changed(flag) if isinstance(requirement, str) else requirement[1][0]
    return {**settings, name: value}


def cli(settings):
    out = []
    for name, value in settings.items():
        out += [fusion_options.option_name(name), str(value)]
    return out


def test_every_flag_is_a_switch_or_depends_on_one():
    """A technique flag either turns a technique on or names what it configures (so it can be refused)."""
    flags = [f for g in fusion_options.GROUPS for f in g.flags]
    unclassified = [f.name for f in flags if f.switch == bool(f.requires)]
    assert not unclassified, unclassified
    switches = {f.name for f in flags if f.switch}
    named = {r if isinstance(r, str) else r[0] for f in flags for r in f.requires}
    # a required flag is a switch, or a flag that itself requires only switches
    # (e.g. --phrase-transparent-dropconnect needs --phrase-transparent-attention)
    second = {n for n in named - switches
              if {r if isinstance(r, str) else r[0] for r in fusion_options._flag(n).requires} <= switches}
    assert named <= switches | second, named - switches - second


DEPENDENT = [(f, r) for g in fusion_options.GROUPS for f in g.flags for r in f.requires]


@pytest.mark.parametrize("flag,requirement", DEPENDENT, ids=[f"{f.name}<-{r if isinstance(r, str) else r[0]}" for f, r in DEPENDENT])
def test_dependent_flag_needs_its_technique(flag, requirement, data_dir):
    """Every flag that configures a technique is refused while the technique is off, and
    accepted with it on."""
    value = {flag.name: off_value_changed(flag)}
    with pytest.raises(ValueError) as refused:
        build("fusion_transformer", data_dir, extra=cli(value))
    message = str(refused.value)
    assert fusion_options.option_name(flag.name) in message
    assert fusion_options.option_name(requirement if isinstance(requirement, str) else requirement[0]) in message
    build("fusion_transformer", data_dir, extra=cli({**switched_on(requirement), **value}))


LEGACY = [f for g in fusion_options.GROUPS for f in g.flags if f.legacy is not None]


@pytest.mark.parametrize("flag", LEGACY, ids=[f.name for f in LEGACY])
def test_checkpoint_arguments_before_a_flag_existed_keep_what_they_computed(flag, data_dir):
    """Arguments without the options version (a checkpoint written before the flag existed) get
    the flag's legacy value, not the new default; fresh arguments get the default."""
    requirement = flag.requires[0]
    switch = switched_on(requirement)
    model, task, args = build("fusion_transformer", data_dir, extra=cli(switch))
    assert getattr(args, flag.name) == flag.default and flag.default != flag.legacy
    old = argparse.Namespace(**{k: v for k, v in vars(args).items() if k not in (flag.name, fusion_options.VERSION_KEY)})
    ARCH_CONFIG_REGISTRY[old.arch](old)
    fusion_options.validate(old)
    assert getattr(old, flag.name) == flag.legacy
    unrelated = argparse.Namespace(**{k: v for k, v in vars(old).items() if k not in [f.name for f in LEGACY]})
    for name in switch:
        delattr(unrelated, name)
    ARCH_CONFIG_REGISTRY[unrelated.arch](unrelated)
    fusion_options.validate(unrelated)  # an old checkpoint without the technique is not refused
    assert getattr(unrelated, flag.name) == flag.default
