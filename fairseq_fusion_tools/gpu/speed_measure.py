"""What ``fusion-gpu-speed`` measures, in its own process: training steps through fairseq's ``Trainer`` (the path of
fairseq-train, ``--fp16``/``--bf16`` as parsed by its parser), decoding through fairseq's ``SequenceGenerator`` with a
forced output length, the matrix-product rate of the device, FLOPs (``FlopCounterMode``) and profiles
(``torch.profiler``) of single steps.
"""
import time

from ..fairseq_runs import count_flops
from .check_train import parse, train_argv

ATTENTION_KERNEL_WORDS = ("cudnn", "fmha", "flash", "efficient", "attention", "sdpa")
# ranges fairseq's trainer and task mark with record_function: they hold ops, they are not costs of their own
FAIRSEQ_RANGES = {"forward", "backward", "optimizer", "clip-grads", "multiply-grads", "reduce-grads"}


def is_range(name):
    """A labelled range (fairseq's, or torch's ``Optimizer.step#Adam.step``) rather than an operator or kernel."""
    return name in FAIRSEQ_RANGES or "#" in name


def sync(cuda):
    if cuda:
        import torch
        torch.cuda.synchronize()


def matmul_rate(cuda, n=None, repeats=10):
    """FLOP/s of an n x n x n matrix product: bf16 on CUDA (8192), fp32 on the CPU (512; the smoke mode)."""
    import torch

    n = n or (8192 if cuda else 512)
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    gen = torch.Generator(device=device).manual_seed(0)
    a, b = (torch.randn(n, n, device=device, dtype=dtype, generator=gen) for _ in range(2))
    for _ in range(3):
        a @ b
    sync(cuda)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync(cuda)
    seconds = time.perf_counter() - start
    return {"flops_per_s": 2 * n ** 3 * repeats / seconds, "n": n, "dtype": str(dtype).replace("torch.", ""),
            "repeats": repeats}


def build_trainer(task, data, arch, dtype, size, max_tokens, cpu, extra=()):
    """fairseq's Trainer for ``arch`` in ``dtype`` at ``size`` with ``--max-tokens`` (``extra`` flags last), and its
    epoch iterator."""
    import numpy as np
    from fairseq import utils
    from fairseq.trainer import Trainer

    argv = [*train_argv(data, arch, dtype, size, updates=10 ** 6, seed=1, cpu=cpu), "--max-tokens", str(max_tokens),
            *extra]
    cfg = parse(argv)
    np.random.seed(1)
    utils.set_torch_seed(1)
    model = task.build_model(cfg.model)
    trainer = Trainer(cfg, task, model, task.build_criterion(cfg.criterion))
    epoch_itr = trainer.get_train_iterator(epoch=1, load_dataset=False, disable_iterator_cache=True)
    trainer.begin_epoch(epoch_itr.epoch)
    return trainer, epoch_itr


def batches(epoch_itr):
    """Training batches without end (a new shuffled epoch after each)."""
    while True:
        for sample in epoch_itr.next_epoch_itr(shuffle=True):
            yield sample


def shape_of(sample):
    return (int(sample["nsentences"]), int(sample["net_input"]["src_tokens"].size(1)), int(sample["target"].size(1)))


def take_new_shapes(stream, seen, n, epoch_len):
    """Up to ``n`` batches whose shape (sentences, source and target length) is not in ``seen`` (added to it); looks
    through at most two epochs (an epoch's batches are the same each epoch, in another order)."""
    out = []
    for i, sample in enumerate(stream):
        if shape_of(sample) not in seen:
            seen.add(shape_of(sample))
            out.append(sample)
            if len(out) == n:
                break
        if i >= 2 * epoch_len:
            break
    return out


def logged_step(trainer, sample, cuda):
    """(fairseq's logged loss, or None for a skipped update; seconds) of one ``trainer.train_step``, the device
    synchronized before and after."""
    sync(cuda)
    start = time.perf_counter()
    logged = trainer.train_step([sample])
    sync(cuda)
    seconds = time.perf_counter() - start
    return (float(logged["loss"]) if logged and "loss" in logged else None), seconds


def timed_step(trainer, sample, cuda):
    """Seconds of one ``trainer.train_step``, the device synchronized before and after."""
    return logged_step(trainer, sample, cuda)[1]


def profiled_step(trainer, sample, cuda, top=8):
    """One training step under ``torch.profiler`` (CPU and CUDA activity): where its time goes."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync(cuda)
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        trainer.train_step([sample])
        sync(cuda)
    wall = time.perf_counter() - start
    events = [e for e in prof.key_averages() if not is_range(e.key)]

    def device_us(e):
        return getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)) or 0

    def row(e, us):
        return {"name": e.key[:120], "ms": us / 1e3, "calls": e.count}

    by_cpu = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
    by_device = sorted(events, key=device_us, reverse=True)[:top]
    attention = sorted({e.key[:120] for e in events if device_us(e) > 0
                        and any(w in e.key.lower() for w in ATTENTION_KERNEL_WORDS)})
    from torch.autograd import DeviceType

    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA and not is_range(e.name)
               and not getattr(e, "is_user_annotation", False)]
    return {"wall_ms": wall * 1e3, "kernel_ms": sum(e.time_range.elapsed_us() for e in kernels) / 1e3,
            "launches": sum(e.count for e in events if e.key.startswith(("cudaLaunch", "cuLaunch"))),
            "top_cpu": [row(e, e.self_cpu_time_total) for e in by_cpu],
            "top_device": [row(e, device_us(e)) for e in by_device if device_us(e) > 0],
            "attention_kernels": attention, "cudnn_attention_on": torch.backends.cuda.cudnn_sdp_enabled()}


def forced_length_decode(task, model, beams, sentences, batch_size, length, cuda, count):
    """Sentences/s (and, with ``count``, FLOPs per output token) of beam search with exactly ``length`` tokens."""
    import torch
    from fairseq import utils
    from fairseq.sequence_generator import SequenceGenerator

    dataset = task.dataset("test")
    order = dataset.ordered_indices()
    order = order[order < sentences]
    samples = [dataset.collater([dataset[j] for j in b]) for b in dataset.batch_by_size(order, max_sentences=batch_size)]
    samples = [utils.move_to_cuda(s) for s in samples] if cuda else samples
    model.eval()
    speed, flops = {}, {}
    for beam in beams:
        generator = SequenceGenerator([model], task.target_dictionary, beam_size=beam, max_len_a=0, max_len_b=length,
                                      min_len=length)
        with torch.no_grad():
            generator.generate([model], samples[0])  # warm-up
            sync(cuda)
            start = time.perf_counter()
            for sample in samples:
                generator.generate([model], sample)
            sync(cuda)
        speed[str(beam)] = sum(int(s["nsentences"]) for s in samples) / (time.perf_counter() - start)
        if count:
            flops[str(beam)] = count_flops(lambda: generator.generate([model], samples[0]), no_grad=True) / (
                int(samples[0]["nsentences"]) * (length + 1))
    return speed, flops


def launch_us(cuda, n=2000):
    """Microseconds per kernel launch when the host issues them back to back (a 1-element in-place add)."""
    import torch

    x = torch.zeros(1, device="cuda" if cuda else "cpu")
    for _ in range(100):
        x.add_(1)
    sync(cuda)
    start = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    sync(cuda)
    return 1e6 * (time.perf_counter() - start) / n


def launches_per_step(trainer, sample, cuda):
    """Kernel launches the host issues in one training step (the profiler's runtime-API calls)."""
    return profiled_step(trainer, sample, cuda)["launches"] if cuda else None


def forward_backward_s(trainer, sample, cuda):
    """Seconds of the model's forward and backward alone (the criterion's loss, no optimizer, no trainer)."""
    from fairseq import utils

    model, criterion = trainer.model, trainer.criterion
    model.train()
    sample = utils.move_to_cuda(sample) if cuda else sample
    sync(cuda)
    start = time.perf_counter()
    loss, _, _ = criterion(model, sample)
    loss.backward()
    sync(cuda)
    seconds = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    return seconds


def torch_fused_adamw():
    """A stand-in for apex's FusedAdam that fairseq's ``--optimizer adam`` takes when it is found: torch's
    ``AdamW(fused=True)`` (decoupled weight decay as fairseq's Adam; eps added after the bias correction of the
    second moment, where fairseq's Adam adds it before: a diagnostic, not a drop-in)."""
    import torch

    class TorchFusedAdamW(torch.optim.AdamW):
        supports_memory_efficient_fp16 = False
        supports_flat_params = True

        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, **unused):
            super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=True)

    return TorchFusedAdamW


def compile_forward(model, backend, random="fused"):
    """``model`` (fairseq's own, without ``--fusion-compile``) with its forward compiled by ``torch.compile``
    (dynamic shapes), as fairseq's Trainer then trains it: ``backend`` inductor on CUDA, eager (dynamo's tracing
    alone) in the smoke mode; ``random`` as ``--fusion-compile-random``: as ``--fusion-compile`` compiles."""
    import functools

    from fairseq_fusion import compile_training

    # the plugin's compiled function (each input size its own symbol), called with fairseq's model
    model.forward = functools.partial(compile_training.compiled(type(model).forward, backend, random), model)
    return model


def reset_compiler():
    """torch.compile as in a fresh process: no compiled code, counters at zero (``torch._dynamo.reset`` keeps them)."""
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()


def graphs_built():
    """The graphs ``torch.compile`` has built in this process so far (each compile and recompile adds to it)."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def dynamo_counters():
    """torch.compile's own counters (graph breaks, recompiles, frames left eager at the recompile limit), as JSON."""
    from torch._dynamo.utils import counters

    out = {}
    for group, c in counters.items():
        if not c:
            continue
        merged = out.setdefault(group, {})
        for key, n in c.items():  # keys of graph-break reasons are paragraphs: their first line names them
            short = (str(key).strip().splitlines() or [""])[0][:160]
            merged[short] = merged.get(short, 0) + n
    return out
