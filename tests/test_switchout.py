"""SwitchOut (Wang et al. 2018): the replacement rate against P(n) computed here, special symbols untouched,
target and decoder input corrupted alike, training only; through fairseq-train with --user-dir."""
import math
import os

import pytest
import torch
from conftest import run_cli, train_args
from fairseq.data import Dictionary

from fairseq_fusion.tasks.switchout import switchout, switchout_sample


def dictionary(words=40):
    d = Dictionary()
    for i in range(words):
        d.add_symbol(f"w{i}")
    d.pad_to_multiple_(8)  # fairseq's madeupwordNNNN entries, never to be drawn
    return d


def expected_n(length, tau, reading):
    """E[n] under P(n) ~ exp(-n * tau) (or exp(-n / tau)) on {0, ..., length}."""
    w = [math.exp(-n * tau if reading == "multiply" else -n / tau) for n in range(length + 1)]
    return sum(n * x for n, x in enumerate(w)) / sum(w), w[0] / sum(w)


@pytest.mark.parametrize("path", ["cpu", "cuda"])
@pytest.mark.parametrize("tau,reading", [(0.2, "multiply"), (1.0, "multiply"), (0.8, "divide"), (3.0, "divide")])
def test_replacement_rate_follows_the_temperature(tau, reading, path, monkeypatch):
    """Both paths: the CPU's (n drawn over 0..longest, read on the host) and CUDA's (0..padded length, no read)."""
    if path == "cuda":
        from fairseq_fusion import host_sync

        monkeypatch.setattr(host_sync, "host_reads_are_free", lambda tensor: False)
    d = dictionary()
    rows, length = 20000, 12
    tokens = torch.randint(d.nspecial, d.nspecial + 40, (rows, length))
    tokens[:, -1] = d.eos()
    tokens[:, :2] = d.pad()  # the padded length, above every sentence's, matters on the CUDA path
    g = torch.Generator().manual_seed(0)
    out, replaced = switchout(tokens, tau, d, reading, generator=g)
    words = length - 3
    mean, p0 = expected_n(words, tau, reading)
    counts = replaced.sum(1).double()
    # n ~ P(n), then Binomial(words, n / words) replacements: mean E[n]; P(no replacement) >= P(n = 0)
    assert counts.mean().item() == pytest.approx(mean, abs=4 * counts.std().item() / math.sqrt(rows))
    assert (counts == 0).double().mean().item() >= p0 - 0.02
    assert torch.equal(out != tokens, replaced)  # a replaced word always changes


def test_special_symbols_are_neither_replaced_nor_drawn():
    d = dictionary(words=5)
    row = [d.pad(), d.pad(), d.bos(), d.unk(), 4, 5, 6, 7, 8, d.eos()]
    tokens = torch.tensor([row] * 3000)
    out, replaced = switchout(tokens, 0.05, d, generator=torch.Generator().manual_seed(1))
    special = tokens < d.nspecial
    assert torch.equal(out[special], tokens[special]) and not replaced[special].any()
    drawn = out[replaced]
    assert drawn.numel() > 1000
    assert set(drawn.tolist()) == {4, 5, 6, 7, 8}  # every real word, no madeupword, no special
    assert not any(d[i].startswith("madeupword") for i in drawn.tolist())


def test_target_and_decoder_input_get_the_same_words():
    d = dictionary()
    target = torch.tensor([[4, 5, 6, 7, d.eos()], [8, 9, d.eos(), d.pad(), d.pad()]])
    prev = torch.tensor([[d.eos(), 4, 5, 6, 7], [d.eos(), 8, 9, d.pad(), d.pad()]])
    src = torch.tensor([[d.pad(), 10, 11, d.eos()], [12, 13, 14, d.eos()]])
    sample = {"id": torch.tensor([0, 1]), "net_input": {"src_tokens": src, "src_lengths": torch.tensor([3, 4]),
                                                        "prev_output_tokens": prev}, "target": target}
    out = switchout_sample(sample, 0.01, 0.01, d, d, generator=torch.Generator().manual_seed(3))
    t, p = out["target"], out["net_input"]["prev_output_tokens"]
    assert not torch.equal(t, target) and not torch.equal(out["net_input"]["src_tokens"], src)
    assert torch.equal(p[:, 0], prev[:, 0])
    assert torch.equal(p[:, 1:][prev[:, 1:] != d.pad()], t[:, :-1][prev[:, 1:] != d.pad()])
    assert torch.equal(sample["target"], target) and torch.equal(sample["net_input"]["src_tokens"], src)  # a copy


def test_switchout_trains_through_fairseq_and_leaves_validation_alone(multi30k_slice, tmp_path):
    """fairseq-train --task translation_switchout; the task's valid_step (and decoding) sees the batch as it is,
    its train_step a corrupted one."""
    import copy

    from fairseq import checkpoint_utils

    save = str(tmp_path / "ckpt")
    proc = run_cli(train_args(multi30k_slice, save, arch="transformer_surface_fusion", max_update=3,
                              extra=["--task", "translation_switchout", "--switchout-tau-src", "0.8", "--switchout-tau-tgt", "0.9",
                                     "--no-epoch-checkpoints"]))
    assert "switchout_tau_src=0.8" in (proc.stdout + proc.stderr).replace("'", "").replace(": ", "=")
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([os.path.join(save, "checkpoint_last.pt")])
    model = models[0]
    task.load_dataset("valid")
    data = task.dataset("valid")
    sample = data.collater([data[i] for i in range(8)])
    seen = []
    model.register_forward_pre_hook(lambda m, args, kwargs: seen.append(kwargs.get("src_tokens", args[0] if args else None).clone()),
                                    with_kwargs=True)
    criterion = task.build_criterion(cfg.criterion)
    task.valid_step(sample, model, criterion)
    assert torch.equal(seen[-1], sample["net_input"]["src_tokens"])

    class NoOpt:
        def backward(self, loss):
            pass

    torch.manual_seed(0)
    task.train_step(sample, model, criterion, NoOpt(), 0)
    assert not torch.equal(seen[-1], sample["net_input"]["src_tokens"])
    assert torch.equal(seen[-1] < task.source_dictionary.nspecial, sample["net_input"]["src_tokens"] < task.source_dictionary.nspecial)
    bad = copy.deepcopy(task.cfg)
    bad.switchout_tau_src = -1.0
    with pytest.raises(ValueError, match="--switchout-tau-src must be >= 0"):
        type(task)(bad, task.source_dictionary, task.target_dictionary)
