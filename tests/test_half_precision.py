"""Half precision (float16 and bfloat16) for every architecture of ``fusion_transformer``.

Archs are discovered from fairseq's registry (as in ``test_contracts.py``), so an arch added
later is covered with no edit here, and so are the documented combinations of techniques
(``models/combinations.py``). Each is built with its own flags and criterion; the
batch mixes a short and a long sentence: sources of 2 and 79 tokens (left-padded, as fairseq
collates them), targets of 32 and 3 tokens (right-padded). docs/fairseq_features.md has the
measured numbers.

- ``test_half_forward``: base width (d=512, FFN 2048, 8 heads, 6+6 layers; big and small archs
  too: their flags are what matters), eval mode, ``model.half()`` / ``model.to(torch.bfloat16)``.
  Every sub-module's output (every pre-activation, attention output, phrase vector, ...) is
  finite, and the log-probabilities match the *same weights* in float32 (the fp32 model whose
  parameters were first rounded to the half dtype, so only the arithmetic differs).
  Tolerance, per target position t and vocabulary entry i:
      |log p_half(t, i) - log p_fp32(t, i)| <= 16 u (1 + R_t),
  u = the dtype's unit roundoff (2^-11 float16, 2^-8 bfloat16), R_t = max_i log p_fp32(t, i) -
  min_i log p_fp32(t, i) (for a softmax output, the range of the logits). Why: every op of the
  half forward rounds its result with relative error <= u; after 6+6 layers the decoder
  features carry a relative error of a few u (2.5 u for the vanilla model, 6 u for Dou et al.'s
  recursive dense sum, measured), and a relative logit error delta moves a log-probability by at
  most about 2 delta R_t, so 16 u (1 + R_t) allows delta = 8 u. The range term is what lets
  archs with large logits pass with the same rule: ``transformer_dense`` has R_t up to 18 where
  the vanilla model has 5, and ``--dense-sum recursive`` (a flag, no named arch) up to 90-100,
  with errors of 0.4-0.5 (fp16) and 2.8-4.1 (bf16), i.e. 8-13 u (1 + R_t); the named archs
  stay below 3.5 u (1 + R_t). For the vanilla model the bound is about 0.045 (fp16) / 0.36
  (bf16); its errors are 0.005 / 0.03. The matrix products run under ``conftest.FastHalfGemm``
  (fp32 accumulation, the result rounded once to the half dtype, as a GPU's half GEMM): 4-5x
  faster here than torch's CPU half kernels, with errors of the same size (measured on
  ``fusion_transformer``, ``transformer_dense``, ``transformer_phrase``,
  ``transformer_hierarchical_aggregation`` and ``transformer_surface_fusion``: 1.2-3.4 u (1 + R_t)
  with either, in both dtypes).
- ``test_half_training``: fairseq's own mixed-precision training path, ``Trainer`` with
  ``--fp16`` (FP16Optimizer: fp32 master weights, dynamic loss scaling from 128, with
  ``--fp16-no-flatten-grads``: the flat fp32 master copy calls ``torch.cuda``) and with
  ``--bf16`` (same optimizer, no loss scaling; fairseq's ``--bf16`` implies ``--tpu``, which
  needs torch_xla, so the test resets ``tpu``). Two Adam updates on the mixed batch: the loss
  is finite, every half gradient (still multiplied by the loss scale for fp16) is finite, no
  update is skipped for overflow (the loss scale stays 128; an overflow would stop fairseq on
  CPU anyway: its handler calls ``.cuda()``), every fp32 master weight moves and every weight
  stays finite; every sub-module's output in the training forward is finite. Training runs at
  d=64 (FFN 256, 4 heads, 6+6 layers) by default: on CPU a half-precision backward has no fast
  GEMM kernel for one of its products and takes about 20 s per base-width update on one core.
  ``FUSION_HALF_TRAIN_DIM=512`` trains at base width.
- ``test_memory_efficient_fp16_optimizer``: the same with ``--memory-efficient-fp16`` /
  ``--memory-efficient-bf16`` (MemoryEfficientFP16Optimizer, no master weights).
"""
import copy
import functools
import os

import pytest
import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.trainer import Trainer

from fairseq_fusion import fusion_options
from fairseq_fusion.models import FusionTransformerModel
from fairseq_fusion.models.combinations import COMBINATIONS
from conftest import FastHalfGemm, write_dicts
from test_contracts import collate, full_log_probs, sentences

ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel)
CASES = ARCHS + sorted(COMBINATIONS)  # registered archs and documented combinations of techniques
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
VOCAB = 40
SRC_LENGTHS = [2, 79]
TGT_LENGTHS = [32, 3]
TOLERANCE_UNITS = 16  # x unit roundoff x (1 + range of the fp32 log-probs), see the docstring
TRAIN_DIM = int(os.environ.get("FUSION_HALF_TRAIN_DIM", "64"))
TRAIN_UPDATES = 2
INIT_LOSS_SCALE = 128


def sizes(dim, layers=6):
    heads = 8 if dim >= 512 else 4
    return [
        "--encoder-embed-dim", str(dim), "--decoder-embed-dim", str(dim),
        "--encoder-ffn-embed-dim", str(4 * dim), "--decoder-ffn-embed-dim", str(4 * dim),
        "--encoder-attention-heads", str(heads), "--decoder-attention-heads", str(heads),
        "--encoder-layers", str(layers), "--decoder-layers", str(layers),
    ]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Hundreds of small half-precision ops per step: with 2 OpenMP threads on a busy 2-core machine
    they spend most of their time waiting for each other (measured 5-10x slower than one thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("half_dicts"), VOCAB)


def parse(case, data_dir, dim, extra=()):
    """Arguments as ``fairseq-train`` parses them (the arch's preset and flags, its default criterion)."""
    arch, flags = COMBINATIONS.get(case, (case, []))
    criterion = fusion_options.default_criterion(arch)
    smoothing = ["--label-smoothing", "0.1"] if "label_smoothed" in criterion else []
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, [
        data_dir, "--task", "translation", "-s", "src", "-t", "tgt", "--arch", arch,
        "--criterion", criterion, *smoothing, "--dropout", "0.1", "--attention-dropout", "0.1",
        "--cpu", *sizes(dim), *flags, *extra,
    ])


def build(arch, data_dir, dim, seed=1):
    args = parse(arch, data_dir, dim)
    task = tasks.setup_task(args)
    torch.manual_seed(seed)
    return task.build_model(args), task, args


@functools.lru_cache(maxsize=1)
def built_at_base_width(arch, data_dir):
    """The fp32 model at base width, built once for both dtypes (each test rounds a copy)."""
    model, task, _ = build(arch, data_dir, 512)
    return model.eval(), task


def mixed_batch(task):
    return collate(task, sentences(task, SRC_LENGTHS), sentences(task, TGT_LENGTHS, seed=1))


def training_sample(task):
    net_input = mixed_batch(task)
    target = net_input.pop("target")
    return {
        "id": torch.arange(len(SRC_LENGTHS)), "net_input": net_input, "target": target,
        "ntokens": int(target.ne(task.target_dictionary.pad()).sum()), "nsentences": len(SRC_LENGTHS),
    }


def floating_tensors(obj):
    if torch.is_tensor(obj):
        if obj.is_floating_point():
            yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from floating_tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from floating_tensors(item)


class NonFiniteOutputs:
    """Forward hooks on every sub-module: name -> (non-finite elements, elements) of its outputs."""

    def __init__(self, model):
        self.found = {}
        self.handles = [m.register_forward_hook(self.hook(name)) for name, m in model.named_modules() if name]

    def hook(self, name):
        def check(_module, _inputs, output):
            for t in floating_tensors(output):
                bad = int((~torch.isfinite(t)).sum())
                if bad:
                    n, total = self.found.get(name, (0, 0))
                    self.found[name] = (n + bad, total + t.numel())
        return check

    def remove(self):
        for handle in self.handles:
            handle.remove()

    def report(self):
        return "; ".join(f"{name}: {n}/{total}" for name, (n, total) in list(self.found.items())[:8])


def test_archs_discovered():
    assert "fusion_transformer" in ARCHS and "transformer_phrase" in ARCHS


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("arch", CASES)
@torch.no_grad()
def test_half_forward(arch, dtype, data_dir):
    half = DTYPES[dtype]
    model, task = built_at_base_width(arch, data_dir)
    model = copy.deepcopy(model)
    batch = mixed_batch(task)
    for t in list(model.parameters()) + list(model.buffers()):  # the same weights in both precisions
        if t.is_floating_point():
            t.copy_(t.to(half).float())
    reference = full_log_probs(model, batch).float()
    assert torch.isfinite(reference).all()

    model.to(half)
    hooks = NonFiniteOutputs(model)
    try:
        with FastHalfGemm():
            log_probs = full_log_probs(model, batch).float()
    finally:
        hooks.remove()
    assert not hooks.found, f"{arch} in {dtype}: non-finite module outputs (non-finite/elements): {hooks.report()}"
    assert torch.isfinite(log_probs).all()

    real = batch["target"].ne(task.target_dictionary.pad())
    ref, out = reference[real], log_probs[real]  # target positions x vocabulary
    unit = torch.finfo(half).eps / 2
    tol = TOLERANCE_UNITS * unit * (1 + ref.max(dim=-1).values - ref.min(dim=-1).values)
    err = (out - ref).abs().max(dim=-1).values
    worst = int((err / tol).argmax())
    assert (err <= tol).all(), (
        f"{arch} in {dtype}: log-probs differ from float32 by {err[worst]:.4f} at target position {worst}, "
        f"tolerance {tol[worst]:.4f} ({TOLERANCE_UNITS} u (1 + R), u = {unit:.2e}); max error {err.max():.4f}"
    )


def build_trainer(arch, data_dir, save_dir, dtype, memory_efficient=False, extra=()):
    """fairseq's Trainer for ``arch`` in ``dtype`` at d=TRAIN_DIM, 6+6 layers (``extra`` flags last)."""
    flags = {"float16": ["--fp16", "--fp16-no-flatten-grads"], "bfloat16": ["--bf16"]}[dtype]
    if memory_efficient:
        flags = flags + [{"float16": "--memory-efficient-fp16", "bfloat16": "--memory-efficient-bf16"}[dtype]]
    args = parse(arch, data_dir, TRAIN_DIM, extra=[
        "--optimizer", "adam", "--lr", "1e-4", "--clip-norm", "0", "--seed", "1",
        "--fp16-init-scale", str(INIT_LOSS_SCALE), "--save-dir", str(save_dir), *flags, *extra,
    ])
    args.tpu = False  # fairseq: "--bf16 implies --tpu" (torch_xla); the bf16 path itself runs on CPU
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(1)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    return Trainer(cfg, task, model, criterion), task


def train_and_check(arch, data_dir, save_dir, dtype, memory_efficient=False):
    trainer, task = build_trainer(arch, data_dir, save_dir, dtype, memory_efficient)
    model = trainer.model
    assert all(p.dtype == DTYPES[dtype] for p in model.parameters())
    expected = "MemoryEfficientFP16Optimizer" if memory_efficient else "FP16Optimizer"
    assert type(trainer.optimizer).__name__ == expected
    names = [n for n, _ in model.named_parameters()]
    masters = None if memory_efficient else trainer.optimizer.fp32_params  # fp32 copies, same order
    before = None if memory_efficient else [p.detach().clone() for p in masters]
    sample = training_sample(task)
    for update in range(TRAIN_UPDATES):
        hooks = NonFiniteOutputs(model)  # training mode: dropout, DropConnect, detached paths
        try:
            log = trainer.train_step([sample])
        except AssertionError as e:  # fairseq's overflow handler calls .cuda() (trainer.py)
            if "CUDA" not in str(e):
                raise
            pytest.fail(f"{arch} in {dtype}: gradient overflow in update {update + 1} (fairseq's "
                        f"overflow handling then needs CUDA): {e}")
        finally:
            hooks.remove()
        assert not hooks.found, f"{arch} in {dtype}, update {update + 1}: non-finite module outputs: {hooks.report()}"
        assert log is not None and torch.isfinite(torch.tensor(log["loss"])), f"update {update + 1}: loss {log}"
        if not memory_efficient:  # the half gradients of this update (x loss scale for fp16)
            bad = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
            assert not bad, f"{arch} in {dtype}, update {update + 1}: missing or non-finite gradients: {bad[:5]}"
        scaler = getattr(trainer.optimizer, "scaler", None)
        if scaler is not None:
            assert scaler.loss_scale == INIT_LOSS_SCALE, f"update {update + 1} overflowed: loss scale {scaler.loss_scale}"
    assert trainer.get_num_updates() == TRAIN_UPDATES
    bad = [n for n, p in model.named_parameters() if not torch.isfinite(p).all()]
    assert not bad, f"{arch} in {dtype}: non-finite parameters after training: {bad[:5]}"
    if masters is not None:  # a half copy may round a small update away; the fp32 master must move
        assert len(masters) == len(names)
        unchanged = [n for n, p, b in zip(names, masters, before) if torch.equal(p, b)]
        assert not unchanged, f"{arch} in {dtype}: parameters not updated: {unchanged[:5]}"


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("arch", CASES)
def test_half_training(arch, dtype, data_dir, tmp_path):
    train_and_check(arch, data_dir, tmp_path, dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("arch", ["transformer_phrase"])
def test_memory_efficient_fp16_optimizer(arch, dtype, data_dir, tmp_path):
    train_and_check(arch, data_dir, tmp_path, dtype, memory_efficient=True)
