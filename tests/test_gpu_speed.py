"""fusion-gpu-speed and the two fixes it measured, on the CPU: the plugin's attention setting (cuDNN attention off,
FUSION_CUDNN_ATTENTION=1 keeps torch's default), --bf16's flat fp32 master copy on CUDA (the same Adam updates as
fairseq's per-parameter copy), the smoke mode of the command itself, and its refusals."""
import json
import logging
import os
import statistics
from unittest import mock

import pytest
import torch

from fairseq_fusion.compat import attention_backends, fairseq_fixes
from fairseq_fusion.errors import FusionError
from fairseq_fusion_tools.gpu import speed as gpu_speed, speed_report as gpu_speed_report
from conftest import run_cli


@pytest.fixture
def cudnn_attention_restored():
    before = torch.backends.cuda.cudnn_sdp_enabled()
    yield
    torch.backends.cuda.enable_cudnn_sdp(before)


def test_a_command_line_run_turns_cudnn_attention_off():
    """torch allows cuDNN attention by default; importing the plugin leaves it so, a command-line run turns it off
    for the process (a fresh interpreter); the other kernels stay allowed: flash or memory-efficient attention."""
    import subprocess
    import sys

    code = ("import torch; import fairseq_fusion; c = torch.backends.cuda; imported = c.cudnn_sdp_enabled(); "
            "import fairseq_fusion.command_line as cl; cl.configure(); "
            "print(imported, c.cudnn_sdp_enabled(), c.flash_sdp_enabled(), c.mem_efficient_sdp_enabled())")
    env = {k: v for k, v in os.environ.items() if k != "FUSION_CUDNN_ATTENTION"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-4:] == ["True", "False", "True", "True"]


def test_the_plugins_models_turn_cudnn_attention_off_around_their_forward(cudnn_attention_restored):
    """Outside a command-line run: only while a plugin model runs on CUDA (a tensor that says so), then torch's own."""
    from fairseq_fusion.models.attention_kernels import without_cudnn_attention

    class OnCuda:
        is_cuda = True

    torch.backends.cuda.enable_cudnn_sdp(True)
    with without_cudnn_attention(OnCuda()):
        assert not torch.backends.cuda.cudnn_sdp_enabled() and torch.backends.cuda.flash_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled()
    with without_cudnn_attention(torch.zeros(1)):  # a CPU tensor: nothing to change
        assert torch.backends.cuda.cudnn_sdp_enabled()


def test_environment_variable_keeps_torchs_default(cudnn_attention_restored):
    torch.backends.cuda.enable_cudnn_sdp(True)
    assert attention_backends.configure({"FUSION_CUDNN_ATTENTION": "1"}) is True
    assert torch.backends.cuda.cudnn_sdp_enabled() is True
    for environ in ({}, {"FUSION_CUDNN_ATTENTION": "0"}):
        torch.backends.cuda.enable_cudnn_sdp(True)
        assert attention_backends.configure(environ) is False and not torch.backends.cuda.cudnn_sdp_enabled()
    with pytest.raises(FusionError, match="FUSION_CUDNN_ATTENTION=yes: expected 1 .* or 0"):
        attention_backends.configure({"FUSION_CUDNN_ATTENTION": "yes"})


def test_bad_environment_value_is_one_line_at_plugin_import():
    from fairseq_fusion_tools.data_paths import PLUGIN_DIR

    proc = run_cli(["fairseq-train", "--user-dir", PLUGIN_DIR, "--help"], env={"FUSION_CUDNN_ATTENTION": "yes"}, check=False, process=True)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("fairseq-fusion: error: FUSION_CUDNN_ATTENTION=yes") and "Traceback" not in proc.stderr


def bf16_optimizer(cfg_flags, model):
    """fairseq's FP16Optimizer for ``model`` (bf16) with Adam, through fairseq's build_optimizer (patched or not)."""
    from omegaconf import OmegaConf
    from fairseq.optim.fp16_optimizer import FP16Optimizer

    cfg = OmegaConf.create({
        "common": {"bf16": True, "tpu": False, "fp16_no_flatten_grads": False, "memory_efficient_bf16": False,
                   "fp16_init_scale": 128, "fp16_scale_window": None, "fp16_scale_tolerance": 0.0,
                   "threshold_loss_scale": None, "min_loss_scale": 1e-4, "model_parallel_size": 1, **cfg_flags},
        "distributed_training": {"distributed_world_size": 1},
        "optimization": {"update_freq": [1], "lr": [0.05]},
        "optimizer": {"_name": "adam", "adam_betas": "(0.9, 0.98)", "adam_eps": 1e-8, "weight_decay": 0.01,
                      "use_old_adam": False, "fp16_adam_stats": False, "tpu": False, "lr": [0.05]}})
    return FP16Optimizer.build_optimizer(cfg, list(model.parameters()))


@pytest.mark.parametrize("flags, flat", [({}, True), ({"fp16_no_flatten_grads": True}, False), ({"tpu": True}, False)])
def test_bf16_master_copy_is_flat_on_cuda_with_fairseqs_updates(flags, flat):
    """On CUDA --bf16 gets one flat fp32 master copy (as --fp16), unless --fp16-no-flatten-grads or --tpu; three Adam
    steps then give the parameters fairseq's per-parameter copy gives."""
    from fairseq.optim.fp16_optimizer import FP16Optimizer

    fairseq_build = FP16Optimizer.__dict__["build_optimizer"].__func__.fairseq_build_optimizer.__func__
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(), torch.nn.Linear(48, 8)).to(torch.bfloat16)
    reference = [p.detach().clone() for p in model.parameters()]
    copies = [torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(), torch.nn.Linear(48, 8)).to(torch.bfloat16)
              for _ in range(2)]
    for copy in copies:
        with torch.no_grad():
            for p, r in zip(copy.parameters(), reference):
                p.copy_(r)
    with mock.patch.object(torch.cuda, "is_available", lambda: True), \
            mock.patch.object(torch.cuda, "current_device", lambda: None):  # a CPU tensor's device.index
        patched = bf16_optimizer(flags, copies[0])
        with mock.patch.object(FP16Optimizer, "build_optimizer", classmethod(fairseq_build)):
            original = bf16_optimizer(flags, copies[1])
    assert patched.has_flat_params is flat and original.has_flat_params is False
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(32, 64, generator=gen).to(torch.bfloat16)
    for _ in range(3):
        for model_, opt in ((copies[0], patched), (copies[1], original)):
            opt.zero_grad()
            opt.backward(model_(x).float().pow(2).mean())
            opt.step()
    for a, b, r in zip(copies[0].parameters(), copies[1].parameters(), reference):
        assert not torch.equal(a, r)  # the steps moved them
        torch.testing.assert_close(a, b, rtol=0, atol=0)

    def master(opt):  # the fp32 master weights, in parameter order
        params = opt.fp32_params
        return (next(iter(params.values())) if isinstance(params, dict) else torch.cat([p.view(-1) for p in params]))

    torch.testing.assert_close(master(patched), master(original), rtol=0, atol=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA the command runs on the GPU")
def test_without_cuda_one_line_and_exit_0():
    proc = run_cli(["fusion-gpu-speed"])
    lines = (proc.stdout + proc.stderr).splitlines()
    assert proc.returncode == 0 and len(lines) == 1 and "fusion-gpu-speed: no CUDA device" in lines[0], lines
    # a mistyped flag is named there too, not hidden behind the no-CUDA line
    proc = run_cli(["fusion-gpu-speed", "--stages", "compile,bench"], check=False)
    assert proc.returncode != 0 and proc.stderr.strip().splitlines()[-1].endswith(
        "--stages compile,bench: expected a comma-separated list out of profile, overhead, compile, benchmark")


@pytest.mark.parametrize("argv, message", [
    (["--stages", "profile,train"], "--stages profile,train: expected a comma-separated list out of profile, overhead"),
    (["--device", "cpu", "--dtypes", "fp16"], "fairseq's --fp16/--bf16 refuse the CPU"),
    (["--max-tokens", "4096,big"], "--max-tokens 4096,big: expected comma-separated positive integers"),
    (["--archs", "transformer_nonsense"], "transformer_nonsense is not a registered fusion_transformer arch"),
    (["--rounds", "0"], "--rounds, --updates, .* must be positive"),
])
def test_bad_options_refused_in_one_line(argv, message):
    with pytest.raises(SystemExit, match=message):
        gpu_speed.check_args(gpu_speed.get_parser().parse_args(argv))


def test_smoke_mode_profiles_benchmarks_and_reports(slice_work, tmp_path):
    """Every stage on the CPU at a tiny size: one record per run with the fields the README's table is made of, ratios
    that are the words/s of the arch over its round's transformer runs, and the attention setting left as it was."""
    out = str(tmp_path / "speed")
    arch = "transformer_simplified_decoder"
    args = gpu_speed.get_parser().parse_args([
        "--device", "cpu", "--dtypes", "fp32", "--size", "tiny", "--max-tokens", "300,600", "--rounds", "2",
        "--warmup-updates", "1", "--updates", "2", "--profile-steps", "2", "--decode-sentences", "4",
        "--decode-length", "3", "--archs", arch, "--work", str(slice_work), "--out", out])
    level = logging.getLogger().level
    assert gpu_speed.main(args) == 0
    assert torch.backends.cuda.cudnn_sdp_enabled() is False
    assert logging.getLogger().level == level  # quietened during the run only (later tests read fairseq's INFO logs)
    with open(out + ".json") as f:
        doc = json.load(f)
    assert [(r["arch"], r["setting"]) for r in doc["profile"]] == [
        (a, s) for a in ("transformer", "fusion_transformer") for s in ("torch-default", "plugin")]
    for r in doc["profile"]:
        assert len(r["ms_new_shapes"]) == len(r["ms_seen_shapes"]) == 2
        assert len(set(map(tuple, r["shapes"]))) == 2  # new shapes: two different ones
    shapes = [tuple(s) for r in doc["profile"] for s in r["shapes"]]
    assert len(shapes) == len(set(shapes))  # and new to the process: no setting reuses another's
    assert {r["optimizer"] for r in doc["overhead"]["runs"]} == {"fairseq-adam", "torch-fused-adamw"}
    runs = doc["runs"]
    # transformer (round 0), then per round the arch and transformer; each in every --max-tokens
    assert [(r["round"], r["arch"], r["max_tokens"]) for r in runs] == [(0, "transformer", 300), (0, "transformer", 600)] + [
        (k, a, t) for k in (1, 2) for a in (arch, "transformer") for t in (300, 600)]
    for r in runs:
        for key in ("arch", "dtype", "max_tokens", "words_per_s", "ms_per_step", "mfu", "device"):
            assert key in r
        assert 0 < r["mfu"] < 1 and r["device"] == "cpu"
        # words per step: at most the batch's --max-tokens (source and target tokens count against it)
        assert 0 < r["words_per_s"] * r["ms_per_step"] / 1e3 <= r["max_tokens"]
    for r in runs:
        if r["arch"] == arch:
            bases = [b["words_per_s"] for b in runs if b["arch"] == "transformer" and b["max_tokens"] == r["max_tokens"]
                     and b["round"] in (r["round"] - 1, r["round"])]  # the transformer runs just before and after
            assert len(bases) == 2
            assert r["train_ratio"] == pytest.approx(r["words_per_s"] / statistics.mean(bases))
            assert r["train_efficiency"] == pytest.approx(r["train_ratio"] / r["train_flop_ideal"])
    # the simplified decoder drops the decoder's FFNs: fewer FLOPs per token than the transformer
    assert runs[2]["train_flops_per_token"] < runs[0]["train_flops_per_token"]
    with open(out + ".md") as f:
        md = f.read()
    assert "## Profile: one training step" in md and f"| `{arch}` | fp32 | 300 |" in md


def test_compile_stage_trains_the_eager_losses_and_reports(slice_work, tmp_path):
    """--stages compile on the CPU (dynamo traces, the eager backend runs the graphs): fairseq's transformer with its
    forward compiled and a fusion arch under --fusion-compile give, batch for batch, the losses of their eager runs;
    graphs are built for the compiled runs alone; the stage is opt-in (compiling takes minutes per arch on a GPU)."""
    assert "compile" not in gpu_speed.get_parser().parse_args([]).stages.split(",")
    out = str(tmp_path / "speed")
    args = gpu_speed.get_parser().parse_args([
        "--device", "cpu", "--dtypes", "fp32", "--size", "tiny", "--max-tokens", "300", "--stages", "compile",
        "--compile-archs", "transformer,transformer_surface_fusion", "--compile-updates", "6",
        "--compile-warmup-steps", "2", "--work", str(slice_work), "--out", out])
    assert gpu_speed.main(args) == 0
    with open(out + ".json") as f:
        runs = json.load(f)["compile"]["runs"]
    assert [(r["arch"], r["mode"], r["backend"]) for r in runs] == [
        ("transformer", "eager", None), ("transformer", "compiled", "eager"),
        ("transformer_surface_fusion", "eager", None), ("transformer_surface_fusion", "compiled", "eager")]
    for eager, compiled in (runs[:2], runs[2:]):
        assert eager["graphs_built"] == 0 and compiled["graphs_built"] > 0
        assert compiled["steps_that_built_graphs"][0] == 1
        assert len(compiled["losses"]) == eager["updates"] == 6 and eager["timed_updates"] == 4
        # fp32, the same operators: the same losses, not close ones
        assert compiled["losses"] == eager["losses"]
        assert compiled["first_loss_difference"] == compiled["max_loss_difference"] == 0
    # the plugin's arch is one graph; fairseq's transformer breaks at its padding-mask branches
    assert runs[3]["graph_breaks"] == 0 and runs[1]["graph_breaks"] > 0
    assert runs[2]["vs_transformer_eager"] == pytest.approx(runs[2]["words_per_s"] / runs[0]["words_per_s"])
    with open(out + ".md") as f:
        md = f.read()
    assert "| `transformer_surface_fusion` | fp32 | compiled |" in md


@pytest.mark.parametrize("flags,message", [
    (["--compile-updates", "5", "--compile-warmup-steps", "5"],
     "--compile-updates 5: expected more than --compile-warmup-steps (5), the updates left out of the timing"),
    (["--compile-backend", "nosuch"], "--compile-backend nosuch: expected a torch.compile backend, one of"),
    (["--compile-archs", "transformer,nosuch"], "--compile-archs transformer,nosuch: nosuch is not a registered "
                                                "fusion_transformer arch (fusion-archs lists them) or transformer"),
])
def test_compile_stage_flags_refused_in_one_line(flags, message):
    proc = run_cli(["fusion-gpu-speed", "--stages", "compile", *flags], check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert message in proc.stderr.strip().splitlines()[-1]


def test_report_of_the_h100_run_names_the_cause():
    """The committed H100 run's report: cuDNN's attention is the largest host cost of a step on a new shape, and the
    plugin's setting takes it out."""
    with open(os.path.join(os.path.dirname(__file__), "..", "recipes", "benchmark", "gpu", "speed_h100.json")) as f:
        doc = json.load(f)
    md = gpu_speed_report.markdown(doc)
    rows = [line for line in md.splitlines() if line.startswith("| `transformer` | fp16 |")]
    assert "aten::_cudnn_attention" in rows[0] and "aten::_cudnn_attention" not in rows[1]
    before, after = (r["median_ms_new"] for r in doc["profile"][:2])
    assert before > 3 * after
