"""Information probe (Yang et al. 2020, §3.1, Eq. 1): captured modules, Eq. 1 by hand, the
learning-rate schedule, early stopping, and a sanity check with planted representations."""
import json
import math
import os

import pytest
import torch
import torch.nn.functional as F
from fairseq.data import data_utils

from conftest import build_model, run_cli, train_args, write_dicts
from fairseq_fusion_tools.analysis import information_probe as probe

SMALL = [
    "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
    "--encoder-layers", "2", "--decoder-layers", "3",
]
VOCAB = 30


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("probe_dicts"), VOCAB)


def build(data_dir, arch, seed=1):
    model, task, args = build_model(data_dir, arch, "--dropout", "0.0", *SMALL, seed=seed)
    return model.eval(), task, args


def ln(x, norm):
    return F.layer_norm(x, x.shape[-1:], norm.weight, norm.bias, norm.eps)


def sample_for(task, srcs, tgts):
    d = task.source_dictionary
    srcs = [torch.tensor(s + [d.eos()]) for s in srcs]
    tgts = [torch.tensor(t + [d.eos()]) for t in tgts]
    return {
        "net_input": {
            "src_tokens": data_utils.collate_tokens(srcs, d.pad(), d.eos(), left_pad=True),
            "src_lengths": torch.tensor([len(s) for s in srcs]),
            "prev_output_tokens": data_utils.collate_tokens(tgts, d.pad(), d.eos(), move_eos_to_beginning=True),
        },
        "target": data_utils.collate_tokens(tgts, d.pad(), d.eos()),
    }


@torch.no_grad()
def test_probe_captures_the_modules(data_dir):
    model, task, _ = build(data_dir, "fusion_transformer")
    sample = sample_for(task, [[5, 6, 7], [8, 9, 10, 11, 12]], [[13, 14], [15, 16, 17, 18]])
    sources = probe.module_sources(model)
    assert {m for m, _ in sources} == set(probe.MODULES)
    reps = probe.representations(model, sample, sources)
    _, extra = model(**sample["net_input"])
    enc = model.encoder(sample["net_input"]["src_tokens"], sample["net_input"]["src_lengths"])
    pad_mask = sample["net_input"]["src_tokens"].eq(task.source_dictionary.pad())
    for i, layer in enumerate(model.decoder.layers, 1):
        assert torch.equal(reps[("IFM", i)], extra["inner_states"][i])
        assert torch.equal(reps[("AddNorm-II", i)], reps[("IFM", i)])
        # SEM = the encoder attention read by TEM's output; Add&Norm I = LN(SEM + TEM)
        sem, _ = layer.encoder_attn(reps[("TEM", i)], enc["encoder_out"][0], enc["encoder_out"][0], key_padding_mask=pad_mask)
        assert (sem - reps[("SEM", i)]).abs().max() < 1e-6
        add_norm_i = ln(sem + reps[("TEM", i)], layer.encoder_attn_layer_norm)
        assert (add_norm_i - reps[("AddNorm-I", i)]).abs().max() < 1e-5
        ffn = F.linear(F.relu(F.linear(add_norm_i, layer.fc1.weight, layer.fc1.bias)), layer.fc2.weight, layer.fc2.bias)
        assert (ffn - reps[("FFN", i)]).abs().max() < 1e-5
    simplified, _, _ = build(data_dir, "transformer_simplified_decoder")
    assert {m for m, _ in probe.module_sources(simplified)} == {"TEM", "SEM", "IFM", "AddNorm-I"}


@torch.no_grad()
def test_probe_nll_is_eq1_and_target_probe_cannot_copy(data_dir):
    model, task, _ = build(data_dir, "fusion_transformer")
    d = task.source_dictionary
    sample = sample_for(task, [[5, 6, 7], [8, 9, 10, 11, 12]], [[13, 14, 20], [15, 16, 17, 18, 19]])
    rep = probe.representations(model, sample, {("IFM", 3): ("module", "decoder.layers.2")})[("IFM", 3)]
    p = probe.RecoveryProbe(len(d), d.pad(), 16, 2, 32, dropout=0.0).eval()
    memory_pad = sample["net_input"]["prev_output_tokens"].eq(d.pad())
    for side in ("source", "target"):
        nll, ntok = probe.recovery_nll(p, rep, sample, side, d.pad(), d.eos())
        # Eq. 1 sentence by sentence, one prefix x_<n at a time, without padding
        expected, count = 0.0, 0
        seqs = sample["target"] if side == "target" else sample["net_input"]["src_tokens"]
        for b, seq in enumerate(seqs):
            x = seq[seq.ne(d.pad())].tolist()
            m = int((~memory_pad[b]).sum())
            for n in range(len(x)):
                prev = torch.tensor([[d.eos()] + x[:n]])
                memory = rep[: (n + 1 if side == "target" else m), b: b + 1]
                logits = p(prev, memory, torch.zeros(1, memory.size(0), dtype=torch.bool), causal_memory=False)
                expected -= logits[0, -1].log_softmax(-1)[x[n]].item()
                count += 1
        assert ntok == count
        assert abs(nll.item() - expected) < 1e-3
    # changing H after position n leaves the target probe's prediction of x_n unchanged
    prev, _, _ = probe.probe_batch(sample, "target", d.pad(), d.eos())
    changed = rep.clone()
    changed[2:] += 1.0
    a = p(prev, rep, memory_pad, causal_memory=True)
    b = p(prev, changed, memory_pad, causal_memory=True)
    assert torch.allclose(a[:, :2], b[:, :2], atol=1e-6) and not torch.allclose(a[:, 2:], b[:, 2:])
    prev_src, _, _ = probe.probe_batch(sample, "source", d.pad(), d.eos())
    a = p(prev_src, rep, memory_pad, causal_memory=False)
    b = p(prev_src, changed, memory_pad, causal_memory=False)
    assert not torch.allclose(a[:, :2], b[:, :2])



def test_lr_schedule_by_hand():
    # linear warm-up to the peak at step 4, then lr * sqrt(4 / step)
    assert [probe.lr_factor(s, 4) for s in (1, 2, 4, 9, 16)] == [0.25, 0.5, 1.0, 2 / 3, 0.5]
    assert probe.lr_factor(7, 0) == 1.0


def random_batches(task, n_batches, seed, batch=8, src_len=4, tgt_len=4):
    """Random sentences over 20 word types (ids of w0..w19)."""
    g = torch.Generator().manual_seed(seed)
    first = task.source_dictionary.nspecial
    out = []
    for _ in range(n_batches):
        srcs = torch.randint(first, first + 20, (batch, src_len), generator=g).tolist()
        tgts = torch.randint(first, first + 20, (batch, tgt_len), generator=g).tolist()
        out.append(sample_for(task, srcs, tgts))
    return out


class Planted:
    """Forward hooks replacing decoder layer outputs: ``answer`` carries the target token of each
    position (what the NMT decoder at position n predicts, x_n) plus its position; ``noise``
    is fresh noise on every call."""

    def __init__(self, model, dim, vocab):
        self.target = None
        self.table = torch.randn(vocab, dim, generator=torch.Generator().manual_seed(5))
        self.model = model

    def feed(self, batches):
        for sample in batches:
            self.target = sample["target"]
            yield sample

    def answer(self, _module, _inp, out):
        x = self.table[self.target].transpose(0, 1)  # T x B x C
        x = x + probe.RecoveryProbe.positions(x.size(0), x.size(2), x.device).unsqueeze(1)
        return (x,) + tuple(out[1:])

    @staticmethod
    def noise(_module, _inp, out):
        return (torch.randn_like(out[0]),) + tuple(out[1:])


def test_probe_sanity_planted_answer_and_noise(data_dir):
    """The probe reading states that carry the answer reaches a PPL near 1; reading noise, it
    stays at the zero baseline (the probe's own language model of random text: about 20)."""
    model, task, _ = build(data_dir, "fusion_transformer")
    planted = Planted(model, 16, len(task.target_dictionary))
    model.decoder.layers[0].register_forward_hook(planted.answer)
    model.decoder.layers[1].register_forward_hook(planted.noise)
    train, valid, test = random_batches(task, 12, 1, batch=16), random_batches(task, 2, 2, batch=16), random_batches(task, 4, 3, batch=16)
    torch.manual_seed(0)
    result = probe.run(
        model, task, lambda epoch: planted.feed(train), lambda: planted.feed(valid), lambda: planted.feed(test),
        modules=["IFM"], sides=["target"], group_size=2, progress=False,
        lr=2e-2, warmup=10, max_epochs=12, eval_interval=12, patience=3, dropout=0.0,
    )
    base = result["baseline_ppl"]["target"]
    answer, noise = result["ppl"]["target"]["IFM"][:2]
    assert 8 < base < 30  # 4 of 5 tokens uniform over 20 types, then </s>: 20 ** (4/5) = 11
    assert answer < 1.5
    assert 0.8 * base < noise < 1.25 * base
    assert result["groups"] == 2 and result["probes"] == 4  # zero + 3 layers, target side


def test_early_stopping_keeps_the_best_state(data_dir):
    model, task, _ = build(data_dir, "transformer_simplified_decoder")
    train, valid = random_batches(task, 4, 1), random_batches(task, 2, 2)
    key = (("module", "decoder.layers.1"), "target")
    torch.manual_seed(0)
    probes, records = probe.train_group(model, task, [key], lambda e: train, lambda: valid, lr=0.05, warmup=1,
                                        max_epochs=50, eval_interval=1, patience=5, dropout=0.0)
    rec = records[key]
    # with a large learning rate the held-out PPL turns up: training stops 5 evaluations after the best
    assert rec["steps"] == rec["best_step"] + 5 and rec["steps"] < 200
    again = probe.evaluate(model, probes, valid, task.source_dictionary.pad(), task.source_dictionary.eos())
    assert math.isclose(probe.ppl_of(again[key]), rec["valid_ppl"], rel_tol=1e-6)


def test_probe_command_two_checkpoints(multi30k_slice, tmp_path):
    save = str(tmp_path / "ckpt")
    run_cli(train_args(multi30k_slice, save, arch="transformer_simplified_decoder", max_update=3))
    ckpt = os.path.join(save, "checkpoint_last.pt")
    out = str(tmp_path / "probe")
    proc = run_cli([
        "fusion-information-probe", "--path", ckpt, ckpt, "--labels", "a,b", "--train-sentences", "40",
        "--valid-sentences", "20", "--split", "valid", "--sentences", "20", "--max-steps", "2", "--eval-interval", "1",
        "--probe-group-size", "5", "--max-tokens", "400", "--out", out, "--cpu",
    ])
    data = json.load(open(out + ".json"))
    assert os.path.getsize(out + ".png") > 0
    a, b = data["checkpoints"]
    assert (a["label"], b["label"]) == ("a", "b")
    # same checkpoint, same seed: nothing of the first run leaks into the second (float noise aside)
    for side in ("source", "target"):
        assert a["baseline_ppl"][side] == pytest.approx(b["baseline_ppl"][side], rel=1e-4)
        for module, ys in a["ppl"][side].items():
            assert ys == pytest.approx(b["ppl"][side][module], rel=1e-4)
    assert set(a["ppl"]["source"]) == {"TEM", "SEM", "IFM", "AddNorm-I"}  # no FFN in this model
    assert a["ppl"]["target"]["AddNorm-I"] == a["ppl"]["target"]["IFM"]  # the same block output, one probe
    assert a["probes"] == 2 * (1 + 3 * 2) and a["groups"] == 3  # sides x (zero + 3 per layer x 2 layers), by 5
    assert a["sentences"] == {"--train-split": 40, "--valid-split": 20, "--split": 20}
    assert "zero-representation baseline" in proc.stdout
    bad = run_cli(["fusion-information-probe", "--path", ckpt, "--modules", "FFN,XYZ", "--out", out, "--cpu"], check=False)
    assert bad.returncode != 0 and "XYZ" in bad.stderr


def test_probe_keys_by_layer(data_dir):
    model, _, _ = build(data_dir, "fusion_transformer")
    sources, keys = probe.probe_keys(model, ["IFM", "SEM"], ["target"], baseline=True, layers=[2])
    assert sorted(sources) == [("IFM", 2), ("SEM", 2)]
    assert keys == [(probe.ZERO, "target"), (("module", "decoder.layers.1"), "target"),
                    (("module", "decoder.layers.1.encoder_attn"), "target")]
    with pytest.raises(ValueError, match=r"--layers \[4\]: the decoder has layers 1..3"):
        probe.probe_keys(model, ["IFM"], ["target"], layers=[4])
