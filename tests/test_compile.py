"""``--fusion-compile``: fairseq-train with the training forward compiled trains what the eager run trains.

On this CPU the compiled runs use tracing backends (``aot_eager``: dynamo and AOTAutograd's graphs run by torch's
eager kernels; ``eager``: dynamo's graph alone), so a compiled run must give the eager run's losses and parameters
bit for bit; each compiled run is compared with its own eager run (the flag absent), not with itself.
"""
import os
import re

import pytest
import torch
from torch._dynamo.utils import counters

from conftest import build_model, run_cli, tiny_train_args, write_dicts

# (arch, backend, extra flags): the plain model through AOTAutograd; lexical shortcuts (layers that read the layer
# context) under activation checkpointing through AOTAutograd; the diversity criterion (forward hooks on the layers
# per step) and the n-gram phrases (their segmentation computed before the graph) through dynamo's graph
CASES = [
    ("fusion_transformer", "aot_eager", ()),
    ("transformer_lexical_shortcuts_ff", "aot_eager", ("--checkpoint-activations",)),
    ("transformer_hierarchical_aggregation", "eager", ("--encoder-layers", "2", "--decoder-layers", "2", "--criterion",
                                                        "label_smoothed_cross_entropy_with_diversity")),
    ("transformer_phrase", "eager", ()),
]
# archs whose training forward is one graph (every arch is: docs/compile.md)
ONE_GRAPH = ["transformer_phrase", "transformer_phrase_max_attn", "fusion_transformer", "transformer_lexical_shortcuts_ff", "transformer_hierarchical_aggregation",
             "transformer_multilayer_attention", "transformer_simplified_decoder", "transformer_sem_tem_ifm",
             "transformer_fine_grained_layer_attention", "transformer_surface_fusion", "transformer_dense",
             "transformer_linear_combination"]


def reset_compiler():
    torch._dynamo.reset()
    counters.clear()


def train(data, save, arch, *extra, updates=3, resumed_at=0):
    """fairseq-train in this process up to update ``updates`` (from ``resumed_at``); (losses logged per update, the
    final state dict)."""
    proc = run_cli(tiny_train_args(data, save, arch, *extra, max_update=updates))
    losses = re.findall(r"train_inner \| .* loss=([0-9.]+),", proc.stdout)
    assert len(losses) == updates - resumed_at, proc.stdout[-2000:]
    return losses, torch.load(os.path.join(save, "checkpoint_last.pt"), weights_only=False)["model"]


def assert_same_state(a, b):
    assert list(a) == list(b)  # no "_orig_mod." or other prefix
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"{len(different)} tensors differ, e.g. {different[0]}: " \
                          f"{(a[different[0]] - b[different[0]]).abs().max().item():.3g}"


@pytest.mark.parametrize("arch,backend,extra", CASES, ids=[c[0] for c in CASES])
def test_compiled_training_equals_eager(multi30k_slice, tmp_path, arch, backend, extra):
    """3 updates: the same losses and parameters as eager; one graph, no graph break, no recompile."""
    eager_losses, eager = train(multi30k_slice, str(tmp_path / "eager"), arch, *extra)
    reset_compiler()
    losses, compiled = train(multi30k_slice, str(tmp_path / "compiled"), arch, *extra, "--fusion-compile", backend)
    assert sum(counters["stats"].values()) > 0, "nothing was compiled"
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"], \
        {k: dict(v) for k, v in counters.items()}  # one graph over 3 batch shapes: no recompile
    if backend == "aot_eager":  # traced once: no restart of the analysis (dynamo's dynamic floats did, twice the time)
        assert counters["aot_autograd"]["total"] == 1, {k: dict(v) for k, v in counters.items()}
    assert losses == eager_losses
    assert_same_state(eager, compiled)
    reset_compiler()


def test_checkpoints_resume_compiled_from_eager_and_eager_from_compiled(multi30k_slice, tmp_path):
    """An eager run of 3 updates (a checkpoint after each); the 2-update checkpoint resumed with --fusion-compile,
    and a compiled 2-update run resumed eager, end on the eager run's parameters."""
    data, arch = multi30k_slice, "fusion_transformer"
    _, eager = train(data, str(tmp_path / "eager"), arch, "--save-interval-updates", "1")
    reset_compiler()
    compiled_resume = str(tmp_path / "compiled_resume")
    os.makedirs(compiled_resume)
    _, state = train(data, compiled_resume, arch, "--fusion-compile", "eager", "--restore-file",
                     str(tmp_path / "eager" / "checkpoint_1_2.pt"), updates=3, resumed_at=2)
    assert_same_state(eager, state)
    compiled = str(tmp_path / "compiled")
    train(data, compiled, arch, "--fusion-compile", "eager", updates=2)
    reset_compiler()
    _, state = train(data, compiled, arch, updates=3, resumed_at=2)  # resumes checkpoint_last.pt of update 2, eager
    assert counters["stats"]["unique_graphs"] == 0
    assert_same_state(eager, state)


def test_only_training_mode_compiles_and_state_dict_is_eager(tmp_path):
    """Validation and generation (eval mode, the decoder alone) stay eager; the compiled training forward gives the
    eager model's outputs and gradients; the model's module tree and state dict are an eager model's."""
    data = write_dicts(tmp_path, 40)
    flags = ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "16", "--decoder-embed-dim",
             "16", "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32", "--share-all-embeddings"]
    eager, task, _ = build_model(data, "fusion_transformer", *flags)
    compiled, _, _ = build_model(data, "fusion_transformer", *flags, "--fusion-compile", "eager")
    assert list(eager.state_dict()) == list(compiled.state_dict())
    assert [n for n, _ in eager.named_modules()] == [n for n, _ in compiled.named_modules()]
    pad = task.src_dict.pad()
    src = torch.randint(5, 40, (3, 7))
    src[1, :2] = pad
    prev = torch.randint(5, 40, (3, 6))
    prev[2, 4:] = pad
    lengths = (src != pad).sum(1)
    reset_compiler()
    for model in (eager, compiled):
        model.eval()
        with torch.no_grad():
            model(src, lengths, prev)
            model.decoder(prev, encoder_out=model.encoder(src, lengths), incremental_state={})
    assert sum(counters["stats"].values()) == 0, "eval mode compiled"
    out = {}
    for name, model in (("eager", eager), ("compiled", compiled)):
        model.train()
        torch.manual_seed(3)  # dropout
        logits = model(src, lengths, prev)[0]
        logits.logsumexp(-1).sum().backward()
        out[name] = (logits.detach(), [p.grad for p in model.parameters()])
    assert counters["stats"]["unique_graphs"] == 1
    assert torch.equal(out["eager"][0], out["compiled"][0])
    assert all(torch.equal(a, b) for a, b in zip(out["eager"][1], out["compiled"][1]))
    reset_compiler()


@pytest.mark.parametrize("arch", ONE_GRAPH)
def test_no_graph_break(tmp_path, arch):
    """dynamo traces the training forward of every arch into one graph: no data-dependent branch in the plugin's
    encoder, decoder and techniques (fairseq's modules they call have none either); what sizes tensors from data (the
    phrase segmentation) is computed before the graph by the encoder's ``eager_input_hooks``."""
    data = write_dicts(tmp_path, 40)
    model, task, _ = build_model(data, arch, "--encoder-layers", "4", "--decoder-layers", "4", "--encoder-embed-dim",
                                 "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "16",
                                 "--decoder-ffn-embed-dim", "16", "--share-all-embeddings")
    pad = task.src_dict.pad()
    src = torch.randint(5, 40, (2, 5))
    src[1, :2] = pad
    prev = torch.randint(5, 40, (2, 4))
    model.train()
    torch._dynamo.reset()
    extra = {}
    for hook in model.encoder.eager_input_hooks:  # run before the graph, as the model's forward does
        extra.update(hook(src, extra))
    explained = torch._dynamo.explain(model.eager_forward)(src, (src != pad).sum(1), prev, **extra)
    where = [f"{b.user_stack[-1].filename}:{b.user_stack[-1].lineno}: {b.reason.splitlines()[0]}"
             for b in explained.break_reasons if b.user_stack]
    assert explained.graph_break_count == 0 and explained.graph_count == 1, where
    torch._dynamo.reset()


@pytest.mark.parametrize("arch", ["fusion_transformer", "transformer_phrase"])
def test_sizes_equal_by_chance_do_not_recompile(tmp_path, arch):
    """The first batch's source and target lengths are equal (and so, for the phrases, the phrase count): each size
    stays its own symbol, so later batches that tell them apart reuse the one graph (dynamo's duck sizing would have
    equated them and recompiled)."""
    data = write_dicts(tmp_path, 40)
    model, task, _ = build_model(data, arch, "--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim",
                                 "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "16",
                                 "--decoder-ffn-embed-dim", "16", "--share-all-embeddings", "--fusion-compile", "eager")
    model.train()
    reset_compiler()
    torch.manual_seed(0)
    for batch, src_len, tgt_len in [(2, 6, 6), (3, 9, 5), (2, 4, 11), (4, 7, 7)]:
        src = torch.randint(5, 40, (batch, src_len))
        model(src, torch.full((batch,), src_len), torch.randint(5, 40, (batch, tgt_len)))[0].sum().backward()
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    reset_compiler()


def test_unknown_backend_is_refused_in_one_line(multi30k_slice, tmp_path):
    proc = run_cli(tiny_train_args(multi30k_slice, str(tmp_path / "a"), "fusion_transformer", "--fusion-compile",
                                   "nosuch"), check=False)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("fairseq-fusion: error: --fusion-compile 'nosuch': expected a torch.compile backend, one of")
    assert "inductor" in last and "Traceback" not in proc.stderr


def test_inductor_with_eager_random_trains_as_eager_and_resumes(multi30k_slice, tmp_path):
    """inductor's generated kernels with ``--fusion-compile-random eager`` (dropout 0.1 on: torch's eager random
    draws): the eager run's logged losses and, after 3 updates, its parameters up to float32 rounding (measured: at
    most 1.7e-6 apart; a mask drawn differently would move a loss in its second digit); a compiled run resumed from
    its update-2 checkpoint logs the same loss for update 3 and ends within rounding of it. The default random mode,
    inductor's own masks, is measured in docs/compile.md (other losses than eager's from the first update; the same
    parameters, bit for bit, after a resume in a new process)."""
    eager_losses, eager = train(multi30k_slice, str(tmp_path / "eager"), "fusion_transformer")
    reset_compiler()
    full = str(tmp_path / "inductor")
    flags = ("--fusion-compile", "--fusion-compile-random", "eager")
    losses, compiled = train(multi30k_slice, full, "fusion_transformer", *flags, "--save-interval-updates", "1")
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])  # no recompile
    assert [abs(float(a) - float(b)) <= 0.0011 for a, b in zip(eager_losses, losses)] == [True] * 3, \
        (eager_losses, losses)  # logged with 3 decimals
    assert list(eager) == list(compiled)
    worst = max((eager[k] - compiled[k]).abs().max().item() for k in eager)
    assert worst <= 2e-5, f"parameters differ by up to {worst:.3g}"
    reset_compiler()  # compiled afresh, as in the new process a resume is (torch's compile cache makes it quick)
    resumed = str(tmp_path / "resumed")
    os.makedirs(resumed)
    resumed_losses, state = train(multi30k_slice, resumed, "fusion_transformer", *flags, "--restore-file",
                                  os.path.join(full, "checkpoint_1_2.pt"), updates=3, resumed_at=2)
    assert resumed_losses == losses[2:]
    worst = max((state[k] - compiled[k]).abs().max().item() for k in state)
    assert worst <= 1e-6, f"the resumed run ends {worst:.3g} from the uninterrupted one"
    reset_compiler()


def test_random_option_needs_the_compiled_path(multi30k_slice, tmp_path):
    proc = run_cli(tiny_train_args(multi30k_slice, str(tmp_path / "a"), "fusion_transformer", "--fusion-compile-random",
                                   "eager"), check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == ("fairseq-fusion: error: --fusion-compile-random eager: only with "
                                                    "--fusion-compile (an eager run draws eager's random numbers anyway)")
    assert not os.path.exists(tmp_path / "a")


def half_training(data_dir, save_dir, dtype, init_scale, *compile_flags, updates=6):
    """fairseq's Trainer in ``dtype`` (FP16Optimizer: fp32 master weights, dynamic loss scaling from ``init_scale``
    for float16) for ``updates`` steps on one batch: (per step: logged loss or None if skipped, loss scale after it),
    the fp32 master weights."""
    from test_half_precision import build_trainer, training_sample

    trainer, task = build_trainer("fusion_transformer", data_dir, save_dir, dtype, extra=[
        "--fp16-init-scale", str(init_scale), "--encoder-layers", "2", "--decoder-layers", "2", *compile_flags])
    sample = training_sample(task)
    steps = []
    for _ in range(updates):
        log = trainer.train_step([sample])
        scaler = getattr(trainer.optimizer, "scaler", None)
        steps.append((log and log.get("loss"), scaler and scaler.loss_scale))
    return steps, [p.detach().clone() for p in trainer.optimizer.fp32_params]


@pytest.mark.parametrize("dtype,init_scale", [("float16", 128), ("float16", 2 ** 16), ("bfloat16", 1)],
                         ids=["fp16", "fp16-overflows", "bf16"])
def test_half_precision_training_as_eager(tmp_path, monkeypatch, dtype, init_scale):
    """fairseq's --fp16 (loss scaling) and --bf16 with the forward compiled give the eager run's losses, loss scales,
    skipped updates and master weights bit for bit. From a loss scale of 2^16 the first updates overflow (the batch's
    summed loss, about 150, times 2^16 is inf in float16), are skipped and halve the scale. Backend ``eager`` (dynamo's graph,
    eager's autograd): AOTAutograd's backward of dropout rounds differently in half precision (docs/compile.md)."""
    # fairseq's overflow handler puts a zero on the GPU (trainer.py: torch.tensor(0.0).cuda()): here it stays put
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *args, **kwargs: self)
    data = write_dicts(tmp_path, 40)
    eager_steps, eager = half_training(data, tmp_path / "eager", dtype, init_scale)
    reset_compiler()
    steps, compiled = half_training(data, tmp_path / "compiled", dtype, init_scale, "--fusion-compile", "eager")
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])  # no recompile
    assert steps == eager_steps
    skipped = [loss is None for loss, _ in steps]
    if init_scale > 128:
        assert skipped[0] and not skipped[-1] and steps[-1][1] < init_scale, steps
    else:
        assert not any(skipped), steps
    assert all(torch.equal(a, b) for a, b in zip(eager, compiled))
    reset_compiler()
