"""fusion-gpu-check on the CPU: the no-CUDA line, the verdicts against fake figures, the markdown report, the arch
list, and the in-process training path itself (smoke mode: fp32, tiny model, 2 updates, on the Multi30k slice)."""
import json
import math
import os
import time

import pytest
import torch

from fairseq_fusion_tools.gpu import check as gpu_check, check_benchmark, check_ddp, check_report as gpu_check_report
from fairseq_fusion_tools.gpu import check_train as gpu_check_train
from conftest import run_cli

TOL = {"fp16": 0.05, "bf16": 0.10}


def run(valid, **kw):
    """A fake run's figures: validation loss ``valid``, 30 updates, a BLEU."""
    return {"train_loss": valid + 0.2, "valid_loss": valid, "initial_valid_loss": 13.0, "updates": 30,
            "skipped_updates": 0, "bleu": 0.4, **kw}


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA the command runs the whole check")
def test_without_cuda_one_line_and_exit_0():
    proc = run_cli(["fusion-gpu-check"])
    lines = (proc.stdout + proc.stderr).splitlines()
    assert proc.returncode == 0 and len(lines) == 1, proc.stdout + proc.stderr
    assert "no CUDA device" in lines[0] and torch.__version__ in lines[0]


@pytest.mark.parametrize("fp16, bf16, expected", [
    (10.49, 10.99, []),  # 4.9% and 9.9% from fp32's 10.0: within 5% and 10%
    (10.51, 10.0, ["fp16: validation loss 10.510 is 5.1% from fp32's 10.000 (tolerance 5%)"]),
    (9.4, 8.9, ["fp16: validation loss 9.400 is 6.0% from fp32's 10.000 (tolerance 5%)",
                "bf16: validation loss 8.900 is 11.0% from fp32's 10.000 (tolerance 10%)"]),  # lower counts as well
    (math.nan, 10.0, ["fp16: training loss nan is not finite", "fp16: validation loss nan is not finite"]),
    (10.0, math.inf, ["bf16: training loss inf is not finite", "bf16: validation loss inf is not finite"]),
])
def test_half_runs_within_their_tolerance_of_fp32(fp16, bf16, expected):
    runs = {"fp32": run(10.0), "fp16": run(fp16), "bf16": run(bf16)}
    assert gpu_check_report.judge_arch(runs, TOL, updates=30) == expected


def test_runs_fail_for_missing_updates_errors_no_learning_and_no_bleu():
    problems = gpu_check_report.judge_arch({
        "fp32": run(13.5),  # above the untrained model's 13.0
        "fp16": run(13.5, updates=27, skipped_updates=33),
        "bf16": run(13.5, bleu=None),
    }, TOL, updates=30)
    assert problems == ["fp32: validation loss 13.500 after training is not below the untrained model's 13.0",
                        "fp16: 27 of 30 updates made (33 skipped for gradient overflow)",
                        "bf16: no BLEU from decoding"]
    assert gpu_check_report.judge_arch({"fp32": {"error": "RuntimeError: CUDA error"}, "fp16": run(10.0)}, TOL, 30) == [
        "fp32: RuntimeError: CUDA error", "fp16: no fp32 run to compare with"]


def test_ddp_verdict():
    ok = {"world_size": 2, "devices": 2, "updates": 30, "first_loss": 12.9, "last_loss": 10.1}
    assert gpu_check_report.judge_ddp(ok, 30) == []
    assert gpu_check_report.judge_ddp(dict(ok, devices=1, last_loss=13.0), 30) == [
        "fairseq trained on 1 devices, not 2", "loss did not fall (12.900 at the first update, 13.000 at the last)"]


def test_ddp_log_parsed_and_command_built(tmp_path):
    log = "\n".join([  # as fairseq-train logs it (one process per rank, both writing here)
        "2026-01-01 | INFO | fairseq.distributed.utils | initialized host vm as rank 0",
        "2026-01-01 | INFO | fairseq.distributed.utils | initialized host vm as rank 1",
        "2026-01-01 | INFO | fairseq_cli.train | training on 2 devices (GPUs/TPUs)",
        '2026-01-01 | INFO | train_inner | {"epoch": 1, "update": 0.01, "loss": "12.9", "wps": "900", "num_updates": "1"}',
        '2026-01-01 | INFO | train_inner | {"epoch": 1, "update": 0.02, "loss": "12.1", "wps": "1000", "num_updates": "2"}',
        '2026-01-01 | INFO | train_inner | {"epoch": 1, "update": 0.03, "loss": "11.5", "wps": "1200", "num_updates": "3"}',
        "2026-01-01 | INFO | fairseq_cli.train | done training in 9.0 seconds"])
    assert check_ddp.parse_ddp_log(log) == {"devices": 2, "updates": 3, "first_loss": 12.9, "last_loss": 11.5,
                                            "words_per_s": 1100.0, "done": True}
    assert check_ddp.parse_ddp_log(log.replace("as rank 1", "as rank 0"))["devices"] == 1
    cmd = check_ddp.ddp_command(str(tmp_path), "transformer_phrase", 30, str(tmp_path / "ddp"))
    assert os.path.basename(cmd[0]) == "fairseq-train" and cmd[cmd.index("--distributed-world-size") + 1] == "2"
    assert "--fp16" in cmd and "--cpu" not in cmd and "--no-save" not in cmd
    assert cmd[cmd.index("--max-update") + 1] == "30" and cmd[cmd.index("--arch") + 1] == "transformer_phrase"


FAKE_BENCH = """#!/bin/bash
# what fusion-benchmark leaves in OUT after three runs: a transformer/arch pair and the next transformer run
cat > "$OUT" <<'JSON'
{"complete": false, "runs": [
 {"arch": "transformer", "params": 1e6, "beam": 4, "train_words_per_s": 100, "decode_sentences_per_s": {"4": 10},
  "peak_train_step_mb": 100},
 {"arch": "x", "params": 2e6, "beam": 4, "train_words_per_s": 80, "decode_sentences_per_s": {"4": 9},
  "peak_train_step_mb": 150},
 {"arch": "transformer", "params": 1e6, "beam": 4, "train_words_per_s": 100, "decode_sentences_per_s": {"4": 10}}]}
JSON
sleep "$1"
exit "$2"
"""


@pytest.mark.parametrize("sleep, status", [(60, 0), (0, 3)])
def test_benchmark_stopped_at_the_budget_keeps_its_finished_pairs(tmp_path, monkeypatch, sleep, status):
    script = tmp_path / "bench.sh"
    script.write_text(FAKE_BENCH)
    out = tmp_path / "benchmark.json"
    monkeypatch.setattr(check_benchmark, "benchmark_command", lambda args, data, o: (
        str(script), {"OUT": str(out)}, ["bash", str(script), str(sleep), str(status)]))
    start = time.perf_counter()
    result = check_benchmark.run_benchmark(None, str(tmp_path), str(tmp_path), seconds=3)
    assert time.perf_counter() - start < 30
    assert result["stopped"] == (sleep == 60) and result["runs"] == 3
    (row,) = result["rows"]  # the unpaired last transformer run adds nothing
    assert row["arch"] == "x" and row["train"] == pytest.approx((0.8, 0.8, 0.8)) and row["memory"] == pytest.approx(1.5)
    assert "| x | 2.0M | 4 | 0.80 (0.80-0.80) |" in result["table"]
    assert ("error" in result) == (status != 0)


def test_benchmark_that_ignores_ctrl_c_is_killed_within_the_stop_grace(tmp_path, monkeypatch):
    """The budget holds the benchmark's stop: one that ignores Ctrl-C is killed STOP_GRACE_S later (the H200 run
    ended 1 s over its budget while the stop and the report were outside it)."""
    script = tmp_path / "bench.sh"
    script.write_text("trap '' INT\nsleep 60\n")
    monkeypatch.setattr(check_benchmark, "STOP_GRACE_S", 2)
    monkeypatch.setattr(check_benchmark, "benchmark_command", lambda args, data, o: (
        str(script), {"OUT": str(tmp_path / "benchmark.json")}, ["bash", str(script)]))
    start = time.perf_counter()
    result = check_benchmark.run_benchmark(None, str(tmp_path), str(tmp_path), seconds=1)
    assert result["stopped"] and result["runs"] == 0
    assert time.perf_counter() - start < 1 + 2 + 10  # not the script's 60 s


def test_arch_list_is_the_registry():
    from fairseq.models import ARCH_MODEL_REGISTRY

    from fairseq_fusion.models import FusionTransformerModel

    registered = {a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel}
    archs = gpu_check.select_archs("all")
    assert set(archs) == registered and len(archs) == len(registered) >= 35
    with pytest.raises(SystemExit, match="--archs fusion_transformer,nonsense: nonsense is not a registered"):
        gpu_check.select_archs("fusion_transformer,nonsense")


def fake_report():
    runs_ok = {"fp32": run(10.0, words_per_s=50000.0, bleu=1.25), "fp16": run(10.2, words_per_s=90000.0),
               "bf16": run(10.4, words_per_s=85000.0)}
    runs_bad = {"fp32": run(10.0), "fp16": run(math.nan), "bf16": {"error": "RuntimeError: boom"}}
    archs = []
    for arch, runs in (("fusion_transformer", runs_ok), ("transformer_phrase", runs_bad)):
        problems = gpu_check_report.judge_arch(runs, TOL, 30)
        archs.append({"arch": arch, "params": 2.5e6, "runs": runs, "passed": not problems, "problems": problems})
    bench_rows = [{"arch": "transformer_phrase", "params": 1e8, "beam": 4, "runs": 1, "train": (0.5, 0.5, 0.5),
                   "decode": (0.6, 0.6, 0.6), "memory": 2.1, "paper": (None, None)}]
    from fairseq_fusion_tools.benchmark import report as benchmark_report

    return {
        "passed": False, "date": "2026-01-01 10:00", "elapsed_s": 512.0, "archs_passed": 1, "archs": archs,
        "machine": {"device": "cuda", "gpu": "NVIDIA H100", "gpus": 1, "torch": "2.5.1", "cuda": "12.4", "cudnn": 90100,
                    "fairseq": "0.12.2", "python": "3.11.7", "fairseq_fusion_commit": "abc1234"},
        "settings": {"dtypes": ["fp32", "fp16", "bf16"], "updates": 30, "size": "small", "tolerances": TOL,
                     "decode_sentences": 100, "beam": 5, "budget_s": 600.0},
        "notes": ["a note"], "ddp": {"skipped": "1 GPU on this machine; DDP needs two or more"},
        "benchmark": {"command": "SIZE=base bash recipes/benchmark/run.sh --fp16", "elapsed_s": 200.0, "stopped": True,
                      "json": "work/gpu_check/benchmark.json", "table": benchmark_report.markdown(bench_rows)},
    }


def test_markdown_report_from_fake_results():
    md = gpu_check_report.markdown(fake_report()).splitlines()
    assert md[0] == "# fusion-gpu-check: FAIL"
    assert "NVIDIA H100 x1; torch 2.5.1, CUDA 12.4" in md[2] and "512 s (budget 600 s)" in md[2]
    assert "## Archs: 1/2 pass" in md and "fp16 5%, bf16 10%" in "\n".join(md)
    row = next(line for line in md if line.startswith("| `fusion_transformer`"))
    # (10.2 - 10) / 10 = +2.00%, (10.4 - 10) / 10 = +4.00%
    assert row == ("| `fusion_transformer` | 2.50M | 10.000 | 10.200 (+2.00%) | 10.400 (+4.00%) | 50000 | 90000 | 85000 | "
                   "1.25 | 0.40 | 0.40 | pass |")
    bad = next(line for line in md if line.startswith("| `transformer_phrase`"))
    assert bad.endswith("| FAIL: fp16: training loss nan is not finite; fp16: validation loss nan is not finite; "
                        "bf16: RuntimeError: boom |") and "| error |" in bad
    assert "Not run: 1 GPU on this machine; DDP needs two or more." in md
    assert any(line.startswith("| transformer_phrase | 100.0M | 4 | 0.50 (0.50-0.50)") for line in md)
    assert "stopped at the time budget" in "\n".join(md)


def independent_valid_loss(data, arch, size, seed=1, eps=0.1):
    """Bits per target token of the untrained model's label-smoothed loss over the valid split, computed here."""
    import numpy as np
    from fairseq import tasks, utils

    cfg = gpu_check_train.parse(gpu_check_train.train_argv(data, arch, "fp32", size, cpu=True))
    task = tasks.setup_task(cfg.task)
    task.load_dataset("valid")
    np.random.seed(seed)
    utils.set_torch_seed(seed)
    model = task.build_model(cfg.model).eval()
    dataset, pad = task.dataset("valid"), task.target_dictionary.pad()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(dataset), 100):
            sample = dataset.collater([dataset[i] for i in range(start, min(len(dataset), start + 100))])
            lprobs = model.get_normalized_probs(model(**sample["net_input"]), log_probs=True)
            target, real = sample["target"], sample["target"].ne(pad)
            nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)[real]
            smooth = -lprobs.sum(-1)[real]
            eps_i = eps / (lprobs.size(-1) - 1)
            total += float(((1 - eps - eps_i) * nll + eps_i * smooth).sum())
            tokens += int(real.sum())
    return total / tokens / math.log(2)


def test_smoke_mode_trains_validates_decodes_and_reports(multi30k_slice, slice_work, tmp_path):
    """The in-process path of every arch run: fp32 on the CPU, tiny model, 2 updates; the report written."""
    out = str(tmp_path / "report")
    args = gpu_check.get_parser().parse_args([
        "--device", "cpu", "--dtypes", "fp32", "--archs", "fusion_transformer", "--updates", "2", "--size", "tiny",
        "--decode-sentences", "5", "--work", str(slice_work), "--out", out])
    assert gpu_check.main(args) == 0
    with open(out + ".json") as f:
        report = json.load(f)
    (arch,) = report["archs"]
    fp32 = arch["runs"]["fp32"]
    assert arch["arch"] == "fusion_transformer" and arch["passed"] and report["passed"]
    assert fp32["updates"] == 2 and fp32["skipped_updates"] == 0 and fp32["sentences"] == 5
    assert math.isfinite(fp32["bleu"]) and fp32["words_per_s"] > 0
    assert fp32["initial_valid_loss"] == pytest.approx(independent_valid_loss(multi30k_slice, "fusion_transformer", "tiny"),
                                                       rel=1e-5)
    assert fp32["valid_loss"] < fp32["initial_valid_loss"]
    with open(out + ".md") as f:
        md = f.read()
    assert md.startswith("# fusion-gpu-check: PASS") and "| `fusion_transformer` |" in md
    assert report["ddp"] == {"skipped": "the smoke mode (--device cpu)"}


def test_bad_options_refused_in_one_line():
    for argv, message in ((["--dtypes", "fp16,fp64"], "--dtypes fp16,fp64: expected"),
                          (["--dtypes", "fp16"], "fp16 and bf16 are compared with fp32"),
                          (["--fp16-tolerance", "0"], "--fp16-tolerance 0.0: expected a positive fraction")):
        with pytest.raises(SystemExit, match=message):
            gpu_check.check_args(gpu_check.get_parser().parse_args(argv))
