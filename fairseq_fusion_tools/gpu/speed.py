"""fusion-gpu-speed: where a GPU training step's time goes, and every headline arch at the hardware's pace.

Stages (``--stages``), in one process, within ``--budget-minutes``:

- ``profile``: single training steps of ``transformer`` and ``fusion_transformer`` at base size, ``--max-tokens``'s
  first value, in each half precision, with torch's own choice of attention kernels (cuDNN attention allowed) and
  with the plugin's (cuDNN attention off, ``fairseq_fusion/compat/attention_backends.py``): ms per step on batch shapes new
  to the process and on shapes already seen, and a ``torch.profiler`` table of one step of each kind (top CPU and
  device costs, the attention kernels that ran).
- ``overhead``: where a step's time goes once attention is fixed: the host's cost of one kernel launch, launches
  per step, the model's forward+backward alone against fairseq's whole ``train_step``, and ``train_step`` with torch's
  fused AdamW in place of fairseq's Adam (a diagnostic: its eps placement differs).
- ``compile`` (not among the default stages: compiling takes minutes per arch on a GPU): every ``--compile-archs``
  arch trained eager and compiled (``--fusion-compile``; fairseq's ``transformer`` its forward through
  ``torch.compile``) for ``--compile-updates`` updates on the same batches: words/s, ms per step, compile seconds,
  graphs, recompiles, launches per step, peak memory and the loss differences (``speed_compile.py``).
- ``benchmark``: ``transformer``, then per round the headline archs (order rotated each round) and ``transformer``
  again, so that every arch run lies between two transformer runs; each is trained (``--warmup-updates`` then ``--updates`` timed) in every dtype at every ``--max-tokens`` and
  decodes the test set at beams 4 and 10 with a forced length. Per run: words/s, ms per step, MFU (FLOPs per target
  token from ``FlopCounterMode`` x words/s over the bf16 matrix-product rate measured at the start), peak memory;
  per arch the ratio to the mean of the two transformer runs around it, the FLOP-ideal ratio, the efficiency (ratio
  over FLOP-ideal), the memory ratio and the paper's reported ratio.

Writes ``--out``.json (one record per run) and ``--out``.md, rewritten after every run. The data is Multi30k as
``make demo`` prepares it (``fusion-gpu-check``'s ``--work``/data-bin, prepared once). Without CUDA: one line, exit
0; ``--device cpu`` is the smoke mode (tiny sizes, fp32; the test suite runs it).
"""
import argparse
import os
import statistics
import sys
import time

from .. import atomic_files
from ..user_files import fail

STAGES = ("profile", "overhead", "compile", "benchmark")
DEFAULT_STAGES = ("profile", "overhead", "benchmark")
HEADLINE_ARCHS = ("transformer_lexical_shortcuts_ff,transformer_hierarchical_aggregation,transformer_multilayer_attention,"
                  "transformer_phrase,transformer_simplified_decoder,transformer_fine_grained_layer_attention,"
                  "transformer_surface_fusion")
PROFILE_ARCHS = ("transformer", "fusion_transformer")
SETTINGS = {"torch-default": True, "plugin": False}  # name -> cuDNN attention allowed
BEAMS = (4, 10)


def get_parser():
    from fairseq_fusion import compile_training

    p = argparse.ArgumentParser(prog="fusion-gpu-speed", description=__doc__.split("\n")[0])
    p.add_argument("--stages", default=",".join(DEFAULT_STAGES), help="Comma-separated stages out of "
                   f"{', '.join(STAGES)} (default: %(default)s).")
    p.add_argument("--work", default="work/gpu_check", help="Folder of the prepared data, WORK/data-bin, shared with "
                   "fusion-gpu-check (default: %(default)s).")
    p.add_argument("--out", default="work/gpu_speed/report", help="The report: OUT.json and OUT.md (default: %(default)s).")
    p.add_argument("--archs", default=HEADLINE_ARCHS, help="The benchmark's archs besides transformer (default: the "
                   "headline archs, one per technique).")
    p.add_argument("--dtypes", default="fp16,bf16", help="Precisions (default: %(default)s; fp32 in the smoke mode).")
    p.add_argument("--max-tokens", default="4096,16384", help="Batch sizes in target tokens (default: %(default)s).")
    p.add_argument("--size", choices=("tiny", "small", "base", "big"), default="base", help="Model size (default: %(default)s).")
    p.add_argument("--rounds", type=int, default=3, help="Benchmark rounds (default: %(default)s).")
    p.add_argument("--warmup-updates", type=int, default=3, help="Updates before the timed ones (default: %(default)s).")
    p.add_argument("--updates", type=int, default=15, help="Timed updates per run (default: %(default)s).")
    p.add_argument("--profile-steps", type=int, default=4,
                   help="Timed steps on new shapes and again on seen shapes per profile setting (default: %(default)s).")
    p.add_argument("--compile-archs", default="transformer,fusion_transformer," + HEADLINE_ARCHS,
                   help="Compile stage: the archs (default: transformer, fusion_transformer and the headline archs).")
    p.add_argument("--compile-updates", type=int, default=200, help="Compile stage: updates per run, eager and "
                   "compiled (default: %(default)s).")
    p.add_argument("--compile-warmup-steps", type=int, default=20, help="Compile stage: the first updates of a run, "
                   "left out of its words/s and ms per step (default: %(default)s).")
    p.add_argument("--compile-backend", default=None, help="Compile stage: torch.compile's backend (default: inductor "
                   "on CUDA, eager in the smoke mode).")
    p.add_argument("--compile-random", choices=compile_training.RANDOM_CHOICES,
                   default=compile_training.RANDOM_CHOICES[0],
                   help="Compile stage: --fusion-compile-random of the compiled runs (default: %(default)s).")
    p.add_argument("--decode-sentences", type=int, default=256, help="Test sentences decoded (default: %(default)s).")
    p.add_argument("--decode-length", type=int, default=30, help="Forced output length (default: %(default)s).")
    p.add_argument("--budget-minutes", type=float, default=9.5,
                   help="The whole run's budget; the benchmark stops before a run would pass it (default: %(default)s).")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="Where it runs: cuda (default), or cpu, the smoke mode.")
    return p


def check_args(args):
    stages = [s for s in args.stages.split(",") if s]
    if not stages or any(s not in STAGES for s in stages):
        fail(f"--stages {args.stages}: expected a comma-separated list out of {', '.join(STAGES)}")
    dtypes = [d for d in args.dtypes.split(",") if d]
    allowed = ("fp32",) if args.device == "cpu" else ("fp32", "fp16", "bf16")
    if not dtypes or any(d not in allowed for d in dtypes):
        fail(f"--dtypes {args.dtypes}: expected a comma-separated list out of {', '.join(allowed)}"
             + (" (fairseq's --fp16/--bf16 refuse the CPU)" if args.device == "cpu" else ""))
    try:
        max_tokens = [int(t) for t in args.max_tokens.split(",") if t]
    except ValueError:
        max_tokens = []
    if not max_tokens or min(max_tokens) < 1:
        fail(f"--max-tokens {args.max_tokens}: expected comma-separated positive integers, e.g. 4096,16384")
    if min(args.rounds, args.updates, args.profile_steps, args.decode_sentences, args.decode_length) < 1 \
            or min(args.warmup_updates, args.compile_warmup_steps) < 0:
        fail("--rounds, --updates, --profile-steps, --decode-sentences and --decode-length must be positive, "
             "--warmup-updates and --compile-warmup-steps 0 or more")
    if args.compile_updates <= args.compile_warmup_steps:
        fail(f"--compile-updates {args.compile_updates}: expected more than --compile-warmup-steps "
             f"({args.compile_warmup_steps}), the updates left out of the timing")
    from fairseq_fusion import compile_training
    from .check import select_archs

    known = compile_training.known_backends()
    if args.compile_backend is not None and args.compile_backend not in known:
        fail(f"--compile-backend {args.compile_backend}: expected a torch.compile backend, one of "
             f"{', '.join(sorted(known))}")
    select_archs(args.compile_archs, "--compile-archs", also=("transformer",))
    archs = select_archs(args.archs)
    return stages, dtypes, max_tokens, [a for a in archs if a != "transformer"]


def machine(cuda):
    import torch
    import fairseq
    from fairseq_fusion.compat import attention_backends

    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "fairseq": fairseq.__version__,
            "python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d %H:%M"),
            "cudnn_attention_torch_default": attention_backends.torch_default,
            "cudnn_attention_in_benchmark": torch.backends.cuda.cudnn_sdp_enabled()}
    if cuda:
        info.update(device=torch.cuda.get_device_name(0), cudnn=torch.backends.cudnn.version())
    else:
        info["device"] = "cpu"
    return info


# ---- profile ------------------------------------------------------------------------------------------------------

def run_profile(args, task, data, dtypes, cuda, seen, log):
    """Per arch, dtype and setting: ms per step on new and on seen shapes, and one profiled step of each."""
    import torch
    from . import speed_measure as m

    plugin_setting = torch.backends.cuda.cudnn_sdp_enabled()
    results = []
    try:
        for arch in PROFILE_ARCHS:
            for dtype in dtypes:
                for setting, cudnn in SETTINGS.items():
                    torch.backends.cuda.enable_cudnn_sdp(cudnn)
                    trainer, itr = m.build_trainer(task, data, arch, dtype, args.size, args.max_tokens[0], not cuda)
                    stream = m.batches(itr)
                    warm = m.take_new_shapes(stream, seen, 2, len(itr))  # first calls, optimizer state, allocator
                    for sample in warm:
                        m.timed_step(trainer, sample, cuda)
                    fresh = m.take_new_shapes(stream, seen, args.profile_steps + 1, len(itr))
                    if len(fresh) < 2:
                        fail(f"fusion-gpu-speed: too few batch shapes at --max-tokens {args.max_tokens[0]} for the "
                             "profile; lower --profile-steps")
                    new = [(s, m.timed_step(trainer, s, cuda)) for s in fresh[:-1]]
                    repeat = [m.timed_step(trainer, s, cuda) for s, _ in new]
                    profiled_new = m.profiled_step(trainer, fresh[-1], cuda)  # kept back: a shape never run before
                    profiled_seen = m.profiled_step(trainer, fresh[0], cuda)
                    r = {"arch": arch, "dtype": dtype, "setting": setting, "cudnn_attention": cudnn,
                         "max_tokens": args.max_tokens[0], "warmup_steps": len(warm),
                         "ms_new_shapes": [1e3 * t for _, t in new],
                         "ms_seen_shapes": [1e3 * t for t in repeat],
                         "shapes": [m.shape_of(s) for s, _ in new],
                         "profile_new_shape": profiled_new, "profile_seen_shape": profiled_seen}
                    r["median_ms_new"] = statistics.median(r["ms_new_shapes"])
                    r["median_ms_seen"] = statistics.median(r["ms_seen_shapes"])
                    results.append(r)
                    log(f"| profile {arch} {dtype} {setting}: {r['median_ms_new']:.1f} ms/step on new shapes, "
                        f"{r['median_ms_seen']:.1f} on seen; attention kernels: "
                        f"{', '.join(profiled_new['attention_kernels'])[:160] or '-'}")
                    del trainer
                    if cuda:
                        torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(plugin_setting)
    return results


# ---- overhead -----------------------------------------------------------------------------------------------------

def run_overhead(args, task, data, dtypes, cuda, log):
    """Where a step's time goes once attention is fixed: the host's cost per kernel launch, launches per step, the
    model's forward+backward alone against fairseq's whole train_step, and train_step with a fused optimizer."""
    import contextlib
    from unittest import mock

    import torch
    from fairseq.optim import adam as fairseq_adam
    from . import speed_measure as m

    results = {"launch_us": m.launch_us(cuda), "runs": []}
    log(f"| overhead: {results['launch_us']:.1f} us per kernel launch issued back to back")
    for dtype in dtypes:
        for optimizer in ("fairseq-adam", "torch-fused-adamw"):
            patch = (mock.patch.object(fairseq_adam, "get_fused_adam_class", m.torch_fused_adamw)
                     if optimizer != "fairseq-adam" else contextlib.nullcontext())
            with patch:
                trainer, itr = m.build_trainer(task, data, "transformer", dtype, args.size, args.max_tokens[0], not cuda)
                samples = [s for s, _ in zip(m.batches(itr), range(args.profile_steps + 2))]
                for s in samples[:2]:
                    m.timed_step(trainer, s, cuda)
                step = [1e3 * m.timed_step(trainer, s, cuda) for s in samples[2:]]
                r = {"arch": "transformer", "dtype": dtype, "optimizer": optimizer, "max_tokens": args.max_tokens[0],
                     "optimizer_class": type(trainer.optimizer.optimizer).__name__,  # the torch optimizer
                     "median_ms_train_step": statistics.median(step),
                     "launches_per_step": m.launches_per_step(trainer, samples[2], cuda)}
                if optimizer == "fairseq-adam":
                    fb = [1e3 * m.forward_backward_s(trainer, s, cuda) for s in samples[2:]]
                    r["median_ms_forward_backward"] = statistics.median(fb)
                results["runs"].append(r)
                log(f"| overhead transformer {dtype} {optimizer} ({r['optimizer_class']}): {r['median_ms_train_step']:.1f} "
                    f"ms/train_step, {r.get('median_ms_forward_backward', float('nan')):.1f} ms forward+backward alone, "
                    f"{r['launches_per_step']} launches/step")
                del trainer
                if cuda:
                    torch.cuda.empty_cache()
    return results


# ---- benchmark ----------------------------------------------------------------------------------------------------

def measure_arch(args, task, data, arch, dtypes, cuda, rate, flops_cache, rnd):
    """Every dtype x max-tokens training run of ``arch``, and its decoding, as records."""
    import torch
    from . import speed_measure as m

    records = []
    for dtype in dtypes:
        for k, max_tokens in enumerate(args.max_tokens):
            trainer, itr = m.build_trainer(task, data, arch, dtype, args.size, max_tokens, not cuda)
            stream = m.batches(itr)
            for _ in range(args.warmup_updates):
                trainer.train_step([next(stream)])
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            m.sync(cuda)
            words, steps, start = 0, 0, time.perf_counter()
            for _ in range(args.updates):
                sample = next(stream)
                trainer.train_step([sample])
                words += int(sample["ntokens"])
                steps += 1
            m.sync(cuda)
            seconds = time.perf_counter() - start
            key = (arch, max_tokens)
            if key not in flops_cache:  # FLOPs do not depend on the dtype or the round
                flops_cache[key] = m.count_flops(lambda: trainer.train_step([sample])) / float(sample["ntokens"])
            r = {"arch": arch, "dtype": dtype, "max_tokens": max_tokens, "round": rnd, "size": args.size,
                 "device": rate["device"], "words_per_s": words / seconds, "ms_per_step": 1e3 * seconds / steps,
                 "train_flops_per_token": flops_cache[key],
                 "peak_memory_mb": torch.cuda.max_memory_allocated() / 2 ** 20 if cuda else None}
            r["mfu"] = r["train_flops_per_token"] * r["words_per_s"] / rate["flops_per_s"]
            if k == 0:
                count = (arch, "decode") not in flops_cache
                speed, flops = m.forced_length_decode(task, trainer.get_model(), BEAMS, args.decode_sentences, 128,
                                                      args.decode_length, cuda, count)
                if count:
                    flops_cache[(arch, "decode")] = flops
                r["decode_sentences_per_s"] = speed
                r["decode_flops_per_token"] = flops_cache[(arch, "decode")]
            records.append(r)
            del trainer
            if cuda:
                torch.cuda.empty_cache()
    return records


def ratio_fields(records):
    """Per arch run of round k: its ratio to the mean of the transformer runs around it (the one that closed round
    k-1, ``round`` k-1, and the one that closes round k) of the same dtype and max-tokens, for training and decoding;
    the FLOP-ideal ratios, the efficiencies and the memory ratio. Set on the records in place."""
    base = {}
    for r in records:
        if r["arch"] == "transformer":
            base.setdefault((r["round"], r["dtype"], r["max_tokens"]), []).append(r)
    for r in records:
        if r["arch"] == "transformer":
            continue
        bases = [b for k in (r["round"] - 1, r["round"]) for b in base.get((k, r["dtype"], r["max_tokens"]), [])]
        if not bases:
            continue
        mean = lambda key: statistics.mean(b[key] for b in bases)  # noqa: E731
        r["train_ratio"] = r["words_per_s"] / mean("words_per_s")
        r["train_flop_ideal"] = bases[0]["train_flops_per_token"] / r["train_flops_per_token"]
        r["train_efficiency"] = r["train_ratio"] / r["train_flop_ideal"]
        if r["peak_memory_mb"] and bases[0]["peak_memory_mb"]:
            r["memory_ratio"] = r["peak_memory_mb"] / mean("peak_memory_mb")
        if "decode_sentences_per_s" in r and all("decode_sentences_per_s" in b for b in bases):
            r["decode_ratio"], r["decode_flop_ideal"], r["decode_efficiency"] = {}, {}, {}
            for beam, sps in r["decode_sentences_per_s"].items():
                r["decode_ratio"][beam] = sps / statistics.mean(b["decode_sentences_per_s"][beam] for b in bases)
                r["decode_flop_ideal"][beam] = bases[0]["decode_flops_per_token"][beam] / r["decode_flops_per_token"][beam]
                r["decode_efficiency"][beam] = r["decode_ratio"][beam] / r["decode_flop_ideal"][beam]
    return records


def run_benchmark(args, task, data, archs, dtypes, cuda, rate, deadline, save, log):
    """``transformer`` (round 0), then per round k the archs (rotated) and ``transformer`` (round k)."""
    records, flops_cache, last_s = [], {}, 0.0
    stopped = None
    for rnd in range(0, args.rounds + 1):
        shift = (rnd - 1) % len(archs) if archs else 0
        order = ["transformer"] if rnd == 0 else [*archs[shift:], *archs[:shift], "transformer"]
        for i, arch in enumerate(order):
            if time.time() + 1.2 * last_s > deadline:
                stopped = f"stopped at the budget in round {rnd}, before {arch} ({i + 1}/{len(order)})"
                break
            start = time.time()
            new = measure_arch(args, task, data, arch, dtypes, cuda, rate, flops_cache, rnd)
            last_s = max(last_s, time.time() - start)
            records += new
            ratio_fields(records)
            save(records, stopped)
            log(f"| round {rnd} [{i + 1}/{len(order)}] {arch}: " + "; ".join(
                f"{r['dtype']} {r['max_tokens']}: {r['words_per_s']:.0f} words/s, {r['ms_per_step']:.1f} ms/step, "
                f"MFU {100 * r['mfu']:.1f}%" for r in new) + f" ({time.time() - start:.0f} s)")
        if stopped:
            break
    return records, stopped


# ---- driver -------------------------------------------------------------------------------------------------------

def main(args):
    from .check import no_cuda_line

    start = time.time()
    cuda = args.device == "cuda"
    stages, dtypes, args.max_tokens, archs = check_args(args)  # a mistyped flag is named with or without CUDA
    line = no_cuda_line() if cuda else None
    if line:
        print(line.replace("fusion-gpu-check", "fusion-gpu-speed"))
        return 0
    atomic_files.claim(args.out + ".lock", f"--out {args.out}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)

    def log(line):
        print(line, flush=True)

    import logging

    root, level = logging.getLogger(), logging.getLogger().level
    root.setLevel(logging.WARNING)  # fairseq's per-model notices (its wav2vec module sets the root to DEBUG)
    try:
        return _run(args, start, cuda, stages, dtypes, archs, log)
    finally:
        root.setLevel(level)


def _run(args, start, cuda, stages, dtypes, archs, log):
    from .check import prepare_data
    from . import speed_report as report
    from .check_train import setup_task
    from . import speed_measure as m

    deadline = start + 60 * args.budget_minutes - 15  # the report's share
    data = prepare_data(args.work)
    task = setup_task(data, not cuda)
    doc = {"machine": machine(cuda), "settings": {k: v for k, v in vars(args).items()}, "stages": stages}
    doc["matmul_rate"] = {**m.matmul_rate(cuda), "device": doc["machine"]["device"]}
    log(f"| {doc['machine']['device']}: {doc['matmul_rate']['dtype']} matrix product "
        f"{doc['matmul_rate']['flops_per_s'] / 1e12:.1f} TFLOP/s")

    def save(records=None, stopped=None):
        if records is not None:
            doc["runs"], doc["rows"] = records, report.summarize(records)
        if stopped:
            doc["stopped"] = stopped
        doc["elapsed_s"] = time.time() - start
        atomic_files.write_json(args.out + ".json", doc)
        atomic_files.write_text(args.out + ".md", report.markdown(doc))

    seen = set()
    if "profile" in stages:
        doc["profile"] = run_profile(args, task, data, dtypes, cuda, seen, log)
        save()
    if "overhead" in stages:
        doc["overhead"] = run_overhead(args, task, data, dtypes, cuda, log)
        save()
    if "compile" in stages:
        from .speed_compile import run_compile

        run_compile(args, task, data, dtypes, cuda, deadline, doc, save, log)
        save()
    if "benchmark" in stages:
        rate = {**doc["matmul_rate"]}
        records, stopped = run_benchmark(args, task, data, archs, dtypes, cuda, rate, deadline, save, log)
        save(records, stopped)
    save()
    log(report.markdown(doc, short=True))
    log(f"| {time.time() - start:.0f} s; wrote {args.out}.json and {args.out}.md")
    return 0
