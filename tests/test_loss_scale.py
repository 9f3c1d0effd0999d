"""Loss scaling in half precision: every arch keeps the loss-scale headroom of fairseq's transformer.

fairseq's ``--fp16`` (``fairseq/optim/fp16_optimizer.py``) backpropagates ``loss * scale`` through
the half model and skips the update when the gradient norm is not finite (``DynamicLossScaler``,
initial scale 128): ``FP16Optimizer`` copies the half gradients to fp32 master weights and takes
their norm, ``MemoryEfficientFP16Optimizer`` takes the norm of the half gradients (in fp32) and
has no fp32 copy. A sum over the batch's tokens computed in half precision multiplies the scale
by up to the number of tokens in the backward and overflows where fairseq's transformer does not.

For every registered ``fusion_transformer`` arch and every documented combination
(``models/combinations.py``), each with its declared criterion, on one batch of 256 sentence pairs
with at least 4096 target tokens (d=32, 4 heads, 3+3 layers, more where ``--multilayer-attention k``
needs layers above k; vocabulary 300), the test finds the largest power of two ``scale`` at which the
scaled loss and the gradient norm the optimizer computes are finite (one training forward, dropout
seeded, and one backward per scale tried), searching down from fairseq's ``transformer``'s on the
same batch (a larger scale is not searched), and requires it to be at least a quarter of the
transformer's. An arch whose fp32 gradient norm on the batch is larger than the transformer's needs a
smaller scale in any precision: the bound is lowered by the whole powers of two in that ratio (Dou et
al.'s dense connection, Eq. 4: 4.5 times the transformer's, 2^2).
Modes:

- ``fp16``: ``model.half()``; the checks of ``FP16Optimizer`` (fp32 master gradients) and
  ``MemoryEfficientFP16Optimizer`` (half gradients) after the same backward, which both
  optimizers compute alike (``scaler.scale(loss).backward()``);
- ``bf16``: ``model.to(torch.bfloat16)``, the same two checks. fairseq's ``--bf16`` does not scale
  the loss; the scale found is the headroom (there the squares of the fp32 gradient norm overflow);
- ``amp``: fairseq's ``--amp`` is ``torch.cuda.amp.autocast`` around the forward and
  ``torch.cuda.amp.GradScaler`` (``optim/amp_optimizer.py``). On the CPU both switch themselves off
  (``test_fairseq_amp_on_cpu_is_float32``): ``--amp --cpu`` trains in float32 without loss scaling,
  and torch's CPU autocast in bfloat16 is not what it does. The test emulates the GPU's ``--amp``
  with ``torch.autocast("cpu", dtype=torch.float16)``: fp32 weights, float16 matrix products,
  the fp32 gradients checked as ``AMPOptimizer.clip_grad_norm`` does. CPU autocast keeps fewer ops
  in fp32 than CUDA's (layer norm and softmax follow their input there), so this is stricter than
  the GPU; the transformer's reference scale is measured under the same emulation.

Speed: torch's CPU kernels for float16/bfloat16 matrix products are 10-40x slower than float32's
(``docs/fairseq_features.md``). ``FastHalfGemm`` runs them as the half kernel computes them, in
fp32 with the result rounded once to the half dtype (cuBLAS on a GPU accumulates in fp32 too), in
fp32 kernels; every other op runs in the half dtype. Measured the same largest finite scales as
the half kernels for ``fusion_transformer`` and ``transformer_hierarchical_aggregation_big``. Archs
whose arguments are equal at this size (``_big``/``_small`` presets) are measured once.
"""
import math

import pytest
import torch
from fairseq import options, tasks, utils
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.optim.dynamic_loss_scaler import DynamicLossScaler
from fairseq.optim.fp16_optimizer import FP16Optimizer

from fairseq_fusion import fusion_options
from fairseq_fusion.models import FusionTransformerModel
from fairseq_fusion.models.combinations import COMBINATIONS
from conftest import FastHalfGemm, write_dicts
from test_contracts import collate, sentences

ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel)
CASES = ARCHS + sorted(COMBINATIONS)
REFERENCE = "transformer"  # fairseq's own arch, with label_smoothed_cross_entropy
DIM, VOCAB = 32, 300
LAYERS = 3  # layer 3 reads layer 1 (non-lexical shortcuts, multi-layer attention k=2); more for a larger k
SENTENCES = 256
MIN_TARGET_TOKENS = 4096
WITHIN = 2  # powers of two: at least 1/4 of the reference's largest finite scale
MODES = {  # mode -> the model's dtype, autocast dtype, the optimizers whose overflow check runs
    "fp16": (torch.float16, None, ("FP16Optimizer", "MemoryEfficientFP16Optimizer")),
    "bf16": (torch.bfloat16, None, ("FP16Optimizer", "MemoryEfficientFP16Optimizer")),
    "amp": (torch.float32, torch.float16, ("AMPOptimizer",)),
}
# exponents searched: the reference's (wide; in bf16 the squares of fairseq's fp32 gradient norm
# overflow first), and each case's from the reference's down (one backward pass where a case is
# finite at the reference's scale; a scale above it is not searched)
REFERENCE_WINDOW = {"fp16": (-8, 23), "bf16": (-8, 119), "amp": (-8, 23)}
CASE_WINDOW = (-WITHIN - 1, 0)  # relative to the reference's exponent
DIVERSITY_CRITERION = "label_smoothed_cross_entropy_with_diversity"

@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Many small ops per step: one thread is faster on the shared 2-core machine (as test_half_precision)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("loss_scale_dicts"), VOCAB)


def build(case, data_dir):
    """Model and criterion as ``fairseq-train`` builds them (the arch's preset and flags, its declared
    criterion), and the arguments without the arch's name: cases with equal arguments build the same model."""
    arch, flags = COMBINATIONS.get(case, (case, []))
    criterion = fusion_options.default_criterion(arch)
    parser = options.get_training_parser()
    sizes = ["--encoder-embed-dim", str(DIM), "--decoder-embed-dim", str(DIM),
             "--encoder-ffn-embed-dim", str(4 * DIM), "--decoder-ffn-embed-dim", str(4 * DIM),
             "--encoder-attention-heads", "4", "--decoder-attention-heads", "4"]
    args = options.parse_args_and_arch(parser, [
        data_dir, "--task", "translation", "-s", "src", "-t", "tgt", "--arch", arch,
        "--criterion", criterion, "--label-smoothing", "0.1", "--dropout", "0.1", "--attention-dropout", "0.1",
        "--cpu", *sizes, *flags,
    ])
    layers = max(LAYERS, getattr(args, "multilayer_attention", 0) + 1)  # layers above k attend k layers
    args.encoder_layers = args.decoder_layers = layers
    task = tasks.setup_task(args)
    torch.manual_seed(1)
    setting = tuple(sorted((k, repr(v)) for k, v in vars(args).items() if k != "arch"))
    return task.build_model(args), task.build_criterion(args), task, setting


@pytest.fixture(scope="module")
def sample(data_dir):
    """256 sentence pairs, sources of 5-25 tokens (left-padded), targets of 13-20 (right-padded)."""
    task = build(REFERENCE, data_dir)[2]
    g = torch.Generator().manual_seed(0)
    src_lengths = torch.randint(5, 26, (SENTENCES,), generator=g).tolist()
    tgt_lengths = torch.randint(13, 21, (SENTENCES,), generator=g).tolist()
    net_input = collate(task, sentences(task, src_lengths), sentences(task, tgt_lengths, seed=1))
    target = net_input.pop("target")
    ntokens = int(target.ne(task.target_dictionary.pad()).sum())
    assert ntokens >= MIN_TARGET_TOKENS
    return {"id": torch.arange(SENTENCES), "net_input": net_input, "target": target,
            "ntokens": ntokens, "nsentences": SENTENCES}


def fp32_grad_norm(model, criterion, sample):
    """fairseq's gradient norm of the same training forward in float32 (loss scale 1)."""
    model.train().zero_grad(set_to_none=True)
    torch.manual_seed(2)  # dropout, as in ScaledBackward
    criterion(model, sample)[0].backward()
    norm = float(utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 0))
    model.zero_grad(set_to_none=True)
    return norm


class ScaledBackward:
    """One training forward of ``model`` in ``mode``; ``finite(e)``: per optimizer, whether the loss
    times 2^e and the gradient norm that optimizer computes after the backward are finite."""

    def __init__(self, model, criterion, sample, mode):
        dtype, autocast, self.optimizers = MODES[mode]
        self.model = model.to(dtype).train()
        criterion.to(dtype)  # fairseq's Trainer casts the criterion with the model
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.masters = FP16Optimizer.build_fp32_params(None, self.params, flatten=False)  # --fp16-no-flatten-grads
        torch.manual_seed(2)  # dropout
        with FastHalfGemm(), torch.autocast("cpu", dtype=autocast or torch.float16, enabled=autocast is not None):
            self.loss = criterion(self.model, sample)[0]
        self.results = {}

    def finite(self, exponent):
        if exponent not in self.results:
            self.results[exponent] = self.backward(2.0 ** exponent)
        return self.results[exponent]

    def backward(self, scale):
        self.model.zero_grad(set_to_none=True)
        scaled = DynamicLossScaler(init_scale=scale).scale(self.loss)  # FP16Optimizer.backward
        loss_ok = bool(torch.isfinite(self.loss) and torch.isfinite(scaled))
        with FastHalfGemm():
            scaled.backward(retain_graph=True)
        for p, p32 in zip(self.params, self.masters):  # FP16Optimizer._sync_fp16_grads_to_fp32
            p32.grad = torch.zeros_like(p32) if p.grad is None else p.grad.float()
        grads_of = {"FP16Optimizer": self.masters, "MemoryEfficientFP16Optimizer": self.params,
                    "AMPOptimizer": self.params}
        return {opt: loss_ok and bool(torch.isfinite(utils.clip_grad_norm_(grads_of[opt], 0))) for opt in self.optimizers}


def bisect_exponent(run, optimizer, low, high):
    """The largest finite exponent in low..high by bisection (finite up to it, overflow above): low - 1
    means not finite at 2^low, high finite at 2^high (or above). For the reference's wide windows."""
    finite, overflow = low - 1, high + 1
    while overflow - finite > 1:
        middle = (finite + overflow) // 2
        if run.finite(middle)[optimizer]:
            finite = middle
        else:
            overflow = middle
    return finite


def search_from(run, optimizer, start, low, high):
    """The same by steps of one from ``start`` (the reference's exponent): one backward pass where a
    case is finite at the reference's scale and ``high`` is ``start``."""
    exponent = start
    if run.finite(exponent)[optimizer]:
        while exponent < high and run.finite(exponent + 1)[optimizer]:
            exponent += 1
        return exponent
    while exponent > low:
        exponent -= 1
        if run.finite(exponent)[optimizer]:
            return exponent
    return low - 1


MEASURED = {}  # (setting, mode) -> {optimizer: exponent}; (setting, "fp32") -> gradient norm


def measure(case, data_dir, sample, mode, search):
    """(optimizer -> largest finite exponent of ``case`` in ``mode``, its fp32 gradient norm);
    ``search(run, optimizer)``. Measured once per setting (archs that differ only in name share it)."""
    model, criterion, _, setting = build(case, data_dir)
    if (setting, "fp32") not in MEASURED:
        MEASURED[setting, "fp32"] = fp32_grad_norm(model, criterion, sample)
    if (setting, mode) not in MEASURED:
        run = ScaledBackward(model, criterion, sample, mode)
        MEASURED[setting, mode] = {opt: search(run, opt) for opt in run.optimizers}
    return MEASURED[setting, mode], MEASURED[setting, "fp32"]


@pytest.fixture(scope="module")
def reference(data_dir, sample):
    """mode -> (optimizer -> fairseq transformer's largest finite exponent on the batch, its fp32 gradient norm)."""
    return {mode: measure(REFERENCE, data_dir, sample, mode, lambda run, opt: bisect_exponent(run, opt, *REFERENCE_WINDOW[mode]))
            for mode in MODES}


def test_archs_discovered():
    assert "fusion_transformer" in ARCHS and "transformer_hierarchical_aggregation_big" in ARCHS


def test_reference_scales(reference):
    """The transformer overflows inside the searched windows (a window edge would hide its scale)."""
    for mode, (found, _) in reference.items():
        for optimizer, exponent in found.items():
            low, high = REFERENCE_WINDOW[mode]
            assert low <= exponent < high, f"{mode} {optimizer}: transformer's largest finite scale 2^{exponent}"


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("case", CASES)
def test_largest_finite_loss_scale(case, mode, data_dir, sample, reference):
    ref_found, ref_norm = reference[mode]

    def search(run, opt):
        return search_from(run, opt, ref_found[opt], ref_found[opt] + CASE_WINDOW[0], ref_found[opt] + CASE_WINDOW[1])

    found, norm = measure(case, data_dir, sample, mode, search)
    own = max(0, math.floor(math.log2(norm / ref_norm)))  # larger fp32 gradients: a smaller scale in any dtype
    short = {opt: (e, ref_found[opt]) for opt, e in found.items() if e < ref_found[opt] - WITHIN - own}
    assert not short, (
        f"{case} in {mode}: largest finite loss scale (2^found, transformer's 2^reference) below the "
        f"transformer's / 2^{WITHIN} / 2^{own} (fp32 gradient norm {norm:.4g}, transformer's {ref_norm:.4g}): {short}"
    )


DIVERSITY_CASES = [c for c in CASES if fusion_options.default_criterion(COMBINATIONS.get(c, (c,))[0]) == DIVERSITY_CRITERION]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", DIVERSITY_CASES)
@torch.no_grad()
def test_logged_diversity_is_that_of_fp32(case, dtype, data_dir, sample):
    """The logged diversity (Eq. 10 times sample_size) of the half model against the same weights in
    fp32 (parameters rounded to the half dtype first), eval mode. Tolerance 32 u sample_size: the
    half states carry a relative error delta of a few u (u = the dtype's unit roundoff), which moves
    cos by at most 2 delta and 1 - cos^2 by at most 4 delta; delta = 8 u allowed."""
    model, criterion, _, _ = build(case, data_dir)
    for p in model.parameters():
        p.copy_(p.to(dtype).float())
    model.eval()
    reference = criterion(model, sample)[2]
    with FastHalfGemm():
        half = criterion(model.to(dtype), sample)[2]
    tolerance = 32 * torch.finfo(dtype).eps / 2 * sample["ntokens"]
    for key in ("diversity", "diversity_encoder", "diversity_decoder"):
        assert half[key].dtype == torch.float32, f"{key} logged in {half[key].dtype}"
        assert abs(float(half[key]) - float(reference[key])) <= tolerance, (key, float(half[key]), float(reference[key]))


def test_fairseq_amp_on_cpu_is_float32():
    """What the docstring says of ``--amp --cpu``: fairseq's autocast and GradScaler are CUDA's, off on the CPU."""
    if torch.cuda.is_available():
        pytest.skip("CUDA present: fairseq's --amp runs on the GPU")
    linear = torch.nn.Linear(4, 4)
    with torch.cuda.amp.autocast(enabled=True):  # fairseq_task.train_step
        assert linear(torch.randn(2, 4)).dtype == torch.float32
    with pytest.warns(UserWarning, match="CUDA is not available"):
        scaler = torch.cuda.amp.GradScaler(init_scale=128)  # AMPOptimizer
    loss = torch.tensor(3.0)
    assert not scaler.is_enabled() and scaler.scale(loss) is loss
