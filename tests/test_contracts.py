"""Contracts every architecture of ``fusion_transformer`` keeps.

The archs are discovered from fairseq's registry, so an arch added later is covered with
no edit here. Models are built at small sizes the way ``fairseq-train`` builds them (task
from a data directory with dictionaries, argparse with the arch's preset), on CPU.
"""
import io
import os

import pytest
import torch
from fairseq import options, tasks
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.sequence_generator import SequenceGenerator

from fairseq_fusion import fusion_options
from fairseq_fusion.models import FusionTransformerModel
from conftest import write_dicts

ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel)

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


def build(arch, data_dir, seed=1, dropout="0.1"):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        data_dir, "--task", "translation", "-s", "src", "-t", "tgt", "--arch", arch,
        "--criterion", fusion_options.default_criterion(arch), "--label-smoothing", "0.1",
        "--dropout", dropout, "--attention-dropout", "0.1", "--cpu", *SMALL,
    ])
    task = tasks.setup_task(args)
    torch.manual_seed(seed)
    model = task.build_model(args)
    return model, task, args


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


@pytest.mark.parametrize("arch", ARCHS)
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


@pytest.mark.parametrize("arch", ARCHS)
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


@pytest.mark.parametrize("arch", ARCHS)
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


@pytest.mark.parametrize("arch", ARCHS)
def test_training_step_reaches_every_parameter(arch, data_dir):
    model, task, args = build(arch, data_dir)
    criterion = task.build_criterion(args)
    model.train()
    srcs = sentences(task, [7, 5, 9, 4])
    tgts = sentences(task, [5, 8, 3, 6], seed=3)
    net_input = collate(task, srcs, tgts)
    target = net_input.pop("target")
    sample = {
        "id": torch.arange(len(srcs)), "net_input": net_input, "target": target,
        "ntokens": int(target.ne(task.target_dictionary.pad()).sum()), "nsentences": len(srcs),
    }
    loss, sample_size, logging_output = criterion(model, sample)
    assert torch.isfinite(loss)
    loss.backward()
    no_grad = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not no_grad, f"parameters without gradient (DDP would need find_unused_parameters): {no_grad}"
    zero = [n for n, p in model.named_parameters() if p.requires_grad and not p.grad.abs().sum() > 0]
    assert not zero, f"parameters with an all-zero gradient: {zero}"


@pytest.mark.parametrize("arch", ARCHS)
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
