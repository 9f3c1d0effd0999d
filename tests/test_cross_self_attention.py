"""fairseq's --cross-self-attention (with or without --no-cross-attention): fusion_transformer computes what fairseq's
transformer computes; every paper arch runs it or refuses it in one line naming both flags."""
import re

import pytest
import torch
from conftest import build_model
from fairseq.sequence_generator import SequenceGenerator
from test_contracts import CASES, build, collate, data_dir, full_log_probs, incremental_log_probs, sentences  # noqa: F401

from fairseq_fusion.errors import FusionError

VARIANTS = [["--cross-self-attention"], ["--no-cross-attention", "--cross-self-attention"]]
TINY = [
    "--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
]


@pytest.mark.parametrize("flags", VARIANTS, ids=" ".join)
@torch.no_grad()
def test_parity_with_fairseq_transformer(data_dir, flags):  # noqa: F811
    """The same weights give the same log-probabilities (padded batch) and the same beam search (incremental)."""
    vanilla, task, _ = build_model(data_dir, "transformer", *TINY, *flags)
    fusion, _, _ = build_model(data_dir, "fusion_transformer", *TINY, *flags)
    assert [n for n, _ in vanilla.named_parameters()] == [n for n, _ in fusion.named_parameters()]
    fusion.load_state_dict(vanilla.state_dict(), strict=True)
    vanilla.eval(), fusion.eval()
    batch = collate(task, sentences(task, [7, 4, 9]), sentences(task, [6, 3, 5], seed=1))
    expected = full_log_probs(vanilla, batch)
    assert (full_log_probs(fusion, batch) - expected).abs().max().item() <= 1e-5
    generator = SequenceGenerator([vanilla], task.target_dictionary, beam_size=4, max_len_a=0, max_len_b=8)
    sample = {"net_input": collate(task, sentences(task, [6, 10, 3], seed=2))}
    v_hypos = generator.generate([vanilla], sample)
    f_hypos = generator.generate([fusion], sample)
    for v, f in zip(v_hypos, f_hypos):
        assert [h["tokens"].tolist() for h in v] == [h["tokens"].tolist() for h in f]
        assert max(abs(a["score"].item() - b["score"].item()) for a, b in zip(v, f)) <= 1e-4


@torch.no_grad()
def test_cross_self_attention_changes_the_output(data_dir):  # noqa: F811
    """The flag does something: the same weights without it give other log-probabilities."""
    plain, task, _ = build_model(data_dir, "fusion_transformer", *TINY)
    cross, _, _ = build_model(data_dir, "fusion_transformer", *TINY, "--cross-self-attention")
    cross.load_state_dict(plain.state_dict(), strict=True)
    plain.eval(), cross.eval()
    batch = collate(task, sentences(task, [7, 4]), sentences(task, [5, 5], seed=1))
    assert (full_log_probs(plain, batch) - full_log_probs(cross, batch)).abs().max().item() > 1e-3


@pytest.mark.parametrize("flags", VARIANTS, ids=" ".join)
@pytest.mark.parametrize("arch", CASES)
@torch.no_grad()
def test_every_arch_runs_or_refuses_in_one_line(arch, flags, data_dir):  # noqa: F811
    """Runs: incremental decoding (the self-attention's cache holds the encoder memory from the first step on)
    equals the full forward; or refuses with one line naming one of the two fairseq flags and the technique's."""
    try:
        model, task, _ = build(arch, data_dir, extra=flags)
    except FusionError as e:
        message = str(e)
        named = set(re.findall(r"--[a-z][a-z-]+", message))
        assert "\n" not in message and named & set(flags) and len(named) >= 2, message
        return
    model.eval()
    batch = collate(task, sentences(task, [7, 4, 9]), sentences(task, [6, 6, 6], seed=1))
    full = full_log_probs(model, batch)
    assert torch.isfinite(full).all()
    assert (full - incremental_log_probs(model, batch)).abs().max().item() <= 1e-5
