"""fusion-benchmark: the memory mode end to end on the real Multi30k slice, and the memory measure itself.
No timing is asserted."""
import json
import os

import pytest
import torch

from fairseq_fusion_tools.benchmark import measure, memory, report
from conftest import run_cli


def test_profiled_peak_increase_counts_live_tensor_bytes():
    def step():
        a = torch.empty(2 * 2**20, dtype=torch.float32)  # 8 MiB
        b = torch.empty(2**20, dtype=torch.float32)  # 4 MiB, both alive: 12 MiB
        del a, b
        c = torch.empty(2**20, dtype=torch.float32)  # 4 MiB after the peak
        return c

    kept = []
    peak, net = memory.profiled_peak_increase(lambda: kept.append(step()))
    assert abs(peak - 12 * 2**20) < 2**16 and abs(net - 4 * 2**20) < 2**16


def test_memory_table_has_memory_column_and_ratio():
    rows = [{"arch": "transformer", "params": 2e6, "peak_train_step_mb": 100.0},
            {"arch": "x", "params": 3e6, "peak_train_step_mb": 160.0}]
    table = report.memory_table(rows)
    assert report.MEMORY_HEADER in table.splitlines()[0]
    assert table.splitlines()[-1] == "| x | 3.00M | 160 | 1.60 |"


def test_ratios_pair_each_run_with_the_transformer_run_before_it():
    def run(arch, wps, sps, flops=None):
        r = {"arch": arch, "params": 1e6, "beam": 4, "train_words_per_s": wps, "decode_sentences_per_s": {"4": sps},
             "peak_train_step_mb": 100.0 if arch == "transformer" else 130.0}
        if flops:
            r["flops"] = {"train_per_token": flops[0], "decode_per_token": {"4": flops[1]}}
        return r

    runs = [run("transformer", 100, 10, (6.0, 2.0)), run("x", 80, 9, (8.0, 2.5)),  # pair 1: 0.8, 0.9
            run("transformer", 50, 20), run("x", 45, 12),  # a slow round: 0.9, 0.6
            run("transformer", 100, 10), run("x", 70, 10)]  # 0.7, 1.0
    (row,) = report.summarize(runs)
    assert row["train"] == pytest.approx((0.8, 0.7, 0.9)) and row["decode"] == pytest.approx((0.9, 0.6, 1.0))
    assert row["flop_ideal_train"] == pytest.approx(0.75) and row["flop_ideal_decode"] == pytest.approx(0.8)
    assert row["efficiency_train"] == pytest.approx(0.8 / 0.75) and row["efficiency_decode"] == pytest.approx(0.9 / 0.8)
    assert row["memory"] == pytest.approx(1.3) and row["runs"] == 3
    assert "| x | 1.0M | 4 | 0.80 (0.70-0.90) | 0.75 | 1.07 | - | - | 0.90 (0.60-1.00) | 0.80 | 1.12 | - | 1.30 |" in \
        report.markdown([row])


def test_count_operators_counts_kernels_not_views():
    a, w = torch.randn(4, 3), torch.randn(3, 5)
    # mm, relu, sum, add: four kernels; .t(), .flatten() and .expand() are views and launch none
    assert measure.count_operators(lambda: ((a @ w).t().relu().flatten(0, 0).sum() + 1).expand(2)) == 4
    assert measure.count_operators(lambda: a.t().unsqueeze(0)[0, :2]) == 0


def test_timed_run_decodes_a_forced_length_and_counts_flops(multi30k_slice, tmp_path):
    """Every arch decodes exactly --decode-length tokens; the FLOP count of fusion_transformer (flags off) equals the
    transformer's, and the simplified decoder (no decoder FFN) counts fewer; each arch right after a transformer run."""
    out = tmp_path / "timed.json"
    run_cli(["fusion-benchmark", "--data", multi30k_slice, "--archs", "fusion_transformer,transformer_simplified_decoder",
             "--size", "tiny", "--cpu", "--repeats", "1", "--updates", "2", "--warmup-updates", "1", "--decode-sentences", "8",
             "--decode-length", "6", "--max-tokens", "1024", "--out", str(out)])
    data = json.loads(out.read_text())
    assert data["complete"] and [r["arch"] for r in data["runs"]] == ["transformer", "fusion_transformer", "transformer",
                                                                        "transformer_simplified_decoder"]
    rows = {r["arch"]: r for r in data["rows"]}
    assert rows["fusion_transformer"]["flop_ideal_train"] == pytest.approx(1.0)
    assert rows["fusion_transformer"]["flop_ideal_decode"] == pytest.approx(1.0)
    assert rows["transformer_simplified_decoder"]["flop_ideal_train"] > 1.0
    # operators per forward+backward: the same graph but for fairseq's own checks (within 1%), fewer without the FFN
    assert rows["fusion_transformer"]["operator_ratio_train"] == pytest.approx(1.0, abs=0.01)
    assert rows["transformer_simplified_decoder"]["operator_ratio_train"] < 0.99
    assert rows["transformer_simplified_decoder"]["beam"] == 10 and rows["fusion_transformer"]["beam"] == 4  # the papers'
    assert all("flops" in r and "peak_train_step_mb" in r for r in data["runs"])


def test_rounds_alternate_the_transformer_and_count_flops_in_the_first_only(multi30k_slice, tmp_path, monkeypatch):
    """--repeats 3 over two archs: each round runs the transformer right before each arch (A B A B), at that arch's
    beam; FLOPs and memory (the same in every round) are measured in round 1 only. The workers are recorded here
    instead of run (each is a process of its own: test_timed_run_decodes_a_forced_length_and_counts_flops)."""
    from fairseq_fusion_tools.benchmark import command

    calls = []

    def worker(arch, argv, beams=None):
        calls.append((arch, sorted(beams), "--no-flops" in argv, "--no-memory" in argv))
        result = {"arch": arch, "params": 1e6, "train_words_per_s": 100.0, "decode_sentences_per_s": {str(b): 1.0 for b in beams}}
        if "--no-flops" not in argv:
            result["flops"] = {"train_per_token": 6.0, "decode_per_token": {str(b): 2.0 for b in beams},
                               "operators": {"forward_backward": 100}}
        if "--no-memory" not in argv:
            result["peak_train_step_mb"] = 100.0
        return result

    monkeypatch.setattr(command, "run_worker", worker)
    out = tmp_path / "rounds.json"
    run_cli(["fusion-benchmark", "--data", multi30k_slice, "--archs", "fusion_transformer,transformer_simplified_decoder",
             "--size", "tiny", "--cpu", "--repeats", "3", "--out", str(out)])
    one_round = [("transformer", [4]), ("fusion_transformer", [4]), ("transformer", [10]), ("transformer_simplified_decoder", [10])]
    assert [c[:2] for c in calls] == [(a, list(b)) for a, b in one_round] * 3
    assert [c[2:] for c in calls] == [(False, False)] * 4 + [(True, True)] * 8
    data = json.loads(out.read_text())
    assert [r["round"] for r in data["runs"]] == [1] * 4 + [2] * 4 + [3] * 4
    assert {r["arch"]: r["runs"] for r in data["rows"]} == {"fusion_transformer": 3, "transformer_simplified_decoder": 3}


def test_memory_only_end_to_end(multi30k_slice, tmp_path):
    out = tmp_path / "memory.json"
    proc = run_cli(["fusion-benchmark", "--data", multi30k_slice, "--archs", "fusion_transformer,transformer_lexical_shortcuts",
                    "--size", "tiny", "--memory-only", "--max-tokens", "1024", "--cpu", "--out", str(out)])
    data = json.loads(out.read_text())
    rows = {r["arch"]: r for r in data["results"]}
    assert list(rows) == ["transformer", "fusion_transformer", "transformer_lexical_shortcuts"]
    for r in rows.values():
        assert r["peak_train_step_mb"] > r["held_at_step_start_mb"] > 0
        assert r["batch"]["sentences"] * max(r["batch"]["src_len"], r["batch"]["tgt_len"]) <= 1024
        assert "train_words_per_s" not in r  # no timing in this mode
    # fusion_transformer with every flag off is fairseq's transformer: the same tensors, the same bytes
    assert abs(rows["fusion_transformer"]["peak_train_step_mb"] / rows["transformer"]["peak_train_step_mb"] - 1) < 0.01
    assert rows["transformer_lexical_shortcuts"]["params"] > rows["transformer"]["params"]
    header = data["table"].splitlines()[0]
    assert report.MEMORY_HEADER in header and "words/s" not in header
    assert len(data["table"].splitlines()) == 2 + 3 and data["settings"]["memory_only"]
    assert "peak train step" in proc.stdout
    assert os.path.getsize(out) > 0


def test_decode_profile_splits_decoding_time(multi30k_slice, tmp_path):
    """--decode-profile: model calls + search add up to the decoding time, the FFN is timed only where it exists,
    and the prediction is 1 / (share / flop_ideal + 1 - share) of the transformer's model share."""
    from fairseq_fusion_tools.benchmark.decode_profile import predicted_ratio

    out = str(tmp_path / "profile.json")
    run_cli(["fusion-benchmark", "--data", multi30k_slice, "--archs", "transformer_simplified_decoder", "--size", "tiny",
             "--decode-profile", "--decode-sentences", "16", "--decode-length", "4", "--cpu", "--out", out])
    with open(out) as f:
        base, simplified = json.load(f)["results"]
    assert (base["arch"], simplified["arch"]) == ("transformer", "transformer_simplified_decoder")
    for r in (base, simplified):
        split = r["decode_split"]
        assert 0 < split["model_s"] <= split["total_s"]
        assert abs(split["model_s"] - sum(split[f"{p}_s"] for p in ("forward_encoder", "forward_decoder",
                                                                     "reorder_encoder_out", "reorder_incremental_state"))) < 1e-9
    assert base["decode_split"]["ffn_s"] > 0 and simplified["decode_split"]["ffn_s"] == 0  # no FFN in its decoder
    assert simplified["decode_flops_per_token"] < base["decode_flops_per_token"]
    b = {"model_s": 3.0, "total_s": 4.0}  # model share 0.75, FLOP-ideal 1.5: 1 / (0.5 + 0.25)
    assert abs(predicted_ratio(b, 1.5) - 1 / 0.75) < 1e-12
