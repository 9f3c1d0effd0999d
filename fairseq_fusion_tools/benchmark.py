"""Benchmark harness: each arch against fairseq's stock ``transformer`` in the same run, on the same work.

Every measurement runs in a fresh subprocess (so that peak memory is its own): build the model at
the same size on the same binarized data, train with fairseq's ``Trainer`` (the code path of
fairseq-train; ``--fp16`` on CUDA) for warm-up updates and then measured updates (target
words/s), then decode the test split with fairseq's ``SequenceGenerator`` at the arch's paper's
beam with a forced output length (``min_len = max_len``: no early end of sentence, so every arch
decodes the same number of steps; sentences/s). Each arch is measured ``--repeats`` times, each
time right after a ``transformer`` run (A B A B ...); the table shows the median ratio and its
spread, the FLOP-ideal ratio (``FlopCounterMode`` on a training step and on the generator) and the
papers' own ratios (``benchmark_report.py``). No timing is asserted anywhere.

Memory (``peak_train_step_mb``) is the peak tensor memory of one training step
(forward + backward + optimizer step through ``Trainer.train_step``), see
:func:`step_memory`: on CUDA ``torch.cuda.max_memory_allocated`` with the peak reset just
before the step; on CPU the tensor bytes held when the step starts (parameters and optimizer
state; the previous step's gradients are released first, as ``train_step`` does) plus the peak
of the bytes the step allocates on top of them, from the allocation events of
``torch.profiler`` (``profile_memory=True``). Process RSS is not used: on CPU it is dominated
by imports and by what ``malloc`` keeps from earlier steps. ``--memory-only`` measures just
that, after one unmeasured step, on the training batch with the most attention-score elements
(sentences x longest length², see :func:`longest_batch`), skipping the timing and decoding.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from . import atomic_files
from fairseq_fusion_tools.user_files import fail

SIZES = {
    # d, ffn, heads, enc layers, dec layers; these flags override the arch's own sizes (a `_big` or
    # `_small` arch is measured at the size asked for, with its other settings)
    "tiny": ["--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
             "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
             "--encoder-layers", "2", "--decoder-layers", "2"],  # tests only
    "small": ["--encoder-embed-dim", "128", "--decoder-embed-dim", "128", "--encoder-ffn-embed-dim", "512",
              "--decoder-ffn-embed-dim", "512", "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
              "--encoder-layers", "3", "--decoder-layers", "3"],
    "base": ["--encoder-embed-dim", "512", "--decoder-embed-dim", "512", "--encoder-ffn-embed-dim", "2048",
             "--decoder-ffn-embed-dim", "2048", "--encoder-attention-heads", "8", "--decoder-attention-heads", "8",
             "--encoder-layers", "6", "--decoder-layers", "6"],
    "big": ["--encoder-embed-dim", "1024", "--decoder-embed-dim", "1024", "--encoder-ffn-embed-dim", "4096",
            "--decoder-ffn-embed-dim", "4096", "--encoder-attention-heads", "16", "--decoder-attention-heads", "16",
            "--encoder-layers", "6", "--decoder-layers", "6"],
}


def _tensor_bytes(tensors, device_type):
    """Bytes of the distinct storages of ``tensors`` on ``device_type`` (views counted once)."""
    import torch
    seen, total = set(), 0
    for t in tensors:
        if torch.is_tensor(t) and t.device.type == device_type:
            storage = t.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
    return total


def held_state_bytes(trainer, device_type="cpu"):
    """Parameters, their gradients and the optimizer state (model and criterion) the trainer holds."""
    params = list(trainer.model.parameters()) + list(trainer.criterion.parameters())
    tensors = params + [p.grad for p in params if p.grad is not None]
    optimizer = getattr(trainer, "_optimizer", None)  # None before the first step (fairseq builds it lazily)
    if optimizer is not None:
        for state in optimizer.optimizer.state.values():
            tensors += [v for v in state.values()]
    return _tensor_bytes(tensors, device_type)


def profiled_peak_increase(fn):
    """Run ``fn()`` under ``torch.profiler`` with ``profile_memory=True``; return the peak of the CPU
    tensor bytes allocated over the level at the start (allocations minus frees, in time order; a
    tensor allocated before and freed during ``fn`` counts negative), and the net change at the end.
    Exact sizes the allocator was asked for: independent of malloc's caching and of RSS."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                     if e.name() == "[memory]" and e.device_type() == DeviceType.CPU), key=lambda x: x[0])
    level = peak = 0
    for _, nbytes in events:
        level += nbytes
        peak = max(peak, level)
    return peak, level


def step_memory(trainer, sample, cuda):
    """Peak memory (MB) of one ``trainer.train_step([sample])``, with what was held before it."""
    import torch
    # what train_step does first; done here so that the previous step's gradients are not counted as held (the
    # profiler cannot see the release of a block allocated before it started, so they would count twice on CPU)
    trainer.zero_grad()
    if cuda:
        torch.cuda.synchronize()
        held = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        trainer.train_step([sample])
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        measure = "torch.cuda.max_memory_allocated, reset before the step"
    else:
        held = held_state_bytes(trainer, "cpu")
        increase, _ = profiled_peak_increase(lambda: trainer.train_step([sample]))
        peak = held + increase
        measure = ("parameters + optimizer state held at the step's start + peak of the tensor bytes the step allocates "
                   "on top (torch.profiler, profile_memory=True)")
    return {"peak_train_step_mb": peak / 2**20, "held_at_step_start_mb": held / 2**20,
            "step_increase_mb": (peak - held) / 2**20, "memory_measure": measure}


def batch_shape(sample):
    return {"sentences": int(sample["nsentences"]), "src_len": int(sample["net_input"]["src_tokens"].size(1)),
            "tgt_len": int(sample["target"].size(1)), "target_tokens": int(sample["ntokens"])}


def longest_batch(task, epoch_itr, split="train"):
    """The batch of the epoch with the most attention-score elements, sentences x longest length^2: long
    sentences in a full ``--max-tokens`` batch, where attention and per-token states cost most."""
    dataset = task.dataset(split)
    batches = epoch_itr.frozen_batches

    def key(i):
        b = batches[i]
        length = max(int(dataset.src_sizes[b].max()), int(dataset.tgt_sizes[b].max()))
        return len(b) * length * length

    best = max(range(len(batches)), key=key)
    return dataset.collater([dataset[j] for j in batches[best]])


def measure(args):
    """Runs in the worker process: returns the metrics of one arch."""
    import torch
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.sequence_generator import SequenceGenerator
    from fairseq.trainer import Trainer
    from fairseq import utils

    import fairseq_fusion  # noqa: F401
    from fairseq_fusion import fusion_options

    cuda = torch.cuda.is_available() and not args.cpu
    criterion = fusion_options.default_criterion(args.arch)  # label_smoothed_cross_entropy for transformer
    argv = [args.data, "--task", "translation", "--arch", args.arch, *SIZES[args.size], "--share-all-embeddings",
            "--optimizer", "adam", "--lr", "5e-4", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100",
            "--criterion", criterion, "--label-smoothing", "0.1", "--max-tokens", str(args.max_tokens),
            "--seed", "1", "--num-workers", "0", "--dropout", "0.1"]
    argv += ["--fp16"] if cuda and args.fp16 else (["--cpu"] if not cuda else [])
    parser = options.get_training_parser()
    targs = options.parse_args_and_arch(parser, argv)
    cfg = convert_namespace_to_omegaconf(targs)
    utils.set_torch_seed(1)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    n_params = sum(p.numel() for p in model.parameters())
    crit = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, crit)
    epoch_itr = trainer.get_train_iterator(epoch=1, load_dataset=False)
    if args.decode_profile:
        return {"arch": args.arch, "params": n_params, "size": args.size, "device": "cuda" if cuda else "cpu",
                **decode_profile(args, task, trainer.get_model().eval(), cuda)}
    if args.memory_only:
        sample = longest_batch(task, epoch_itr)
        trainer.train_step([sample])  # builds the optimizer and its state: the measured step is a steady one
        return {"arch": args.arch, "params": n_params, **step_memory(trainer, sample, cuda), "batch": batch_shape(sample),
                "device": "cuda" + (" fp16" if args.fp16 else "") if cuda else "cpu", "size": args.size,
                "max_tokens": args.max_tokens}
    itr = epoch_itr.next_epoch_itr(shuffle=True)
    words, t0 = 0, None
    for i, sample in enumerate(itr):
        if i == args.warmup_updates:
            if cuda:
                torch.cuda.synchronize()
            t0, words = time.perf_counter(), 0
        trainer.train_step([sample])
        words += sample["ntokens"]
        if i + 1 >= args.warmup_updates + args.updates:
            break
    if cuda:
        torch.cuda.synchronize()
    train_wps = words / (time.perf_counter() - t0)

    train_sample = sample
    # one more step on the last batch, after the timing; deterministic, so measured in the first round only
    memory = step_memory(trainer, sample, cuda) if args.measure_memory else {}

    task.load_dataset(args.gen_subset)
    dataset = task.dataset(args.gen_subset)
    gen_model = trainer.get_model().eval()
    order = dataset.ordered_indices()
    order = order[order < args.decode_sentences]
    batches = dataset.batch_by_size(order, max_sentences=args.decode_batch_size)
    decode_sps, flops = {}, {}
    for beam in (int(b) for b in args.beams.split(",")):
        # forced length: EOS is blocked before step L and forced at step L, for every arch alike
        generator = SequenceGenerator([gen_model], task.target_dictionary, beam_size=beam, max_len_a=0,
                                      max_len_b=args.decode_length, min_len=args.decode_length)
        n_sent, t0 = 0, time.perf_counter()
        with torch.no_grad():
            for batch in batches:
                sample = dataset.collater([dataset[j] for j in batch])
                if cuda:
                    sample = utils.move_to_cuda(sample)
                hypos = generator.generate([gen_model], sample)
                n_sent += len(batch)
        if cuda:
            torch.cuda.synchronize()
        decode_sps[str(beam)] = n_sent / (time.perf_counter() - t0)
        assert all(len(h[0]["tokens"]) == args.decode_length + 1 for h in hypos), "forced length not reached"
        if args.count_flops:
            first = dataset.collater([dataset[j] for j in batches[0]])
            flops.setdefault("decode_per_token", {})[str(beam)] = count_flops(
                lambda: generator.generate([gen_model], utils.move_to_cuda(first) if cuda else first), no_grad=True
            ) / (len(batches[0]) * (args.decode_length + 1))
    if args.count_flops:  # the same training batch for every arch (same data, seed and --max-tokens)
        flops["train_per_token"] = count_flops(lambda: trainer.train_step([train_sample])) / float(train_sample["ntokens"])
        flops["operators"] = step_operators(trainer, train_sample)
    result = {
        "arch": args.arch, "params": n_params, "train_words_per_s": train_wps, "decode_sentences_per_s": decode_sps,
        **memory, "memory_batch": batch_shape(train_sample), "device": "cuda" + (" fp16" if args.fp16 else "") if cuda else "cpu",
        "size": args.size, "updates_measured": args.updates, "sentences_decoded": n_sent, "decode_length": args.decode_length,
    }
    if flops:
        result["flops"] = flops
    return result


def decode_profile(args, task, model, cuda):
    """Decoding time split into the model's calls and the search (``benchmark_profile``), and FLOPs per token."""
    import torch
    from fairseq import utils
    from fairseq.sequence_generator import SequenceGenerator

    from .benchmark_profile import split_decode_time, timed_decoder_ffn

    task.load_dataset(args.gen_subset)
    dataset = task.dataset(args.gen_subset)
    order = dataset.ordered_indices()
    batches = dataset.batch_by_size(order[order < args.decode_sentences], max_sentences=args.decode_batch_size)
    samples = [dataset.collater([dataset[j] for j in b]) for b in batches]
    samples = [utils.move_to_cuda(s) for s in samples] if cuda else samples
    beam = int(args.beams.split(",")[0])
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=beam, max_len_a=0,
                                  max_len_b=args.decode_length, min_len=args.decode_length)

    def run():
        with torch.no_grad():
            for sample in samples:
                generator.generate([model], sample)

    run()  # warm-up
    split = split_decode_time(run, generator, cuda)
    with timed_decoder_ffn(model, cuda) as ffn:  # a second pass: the decoder's FFN sub-layers timed
        run()
    split["ffn_s"] = ffn["ffn"]
    flops = count_flops(lambda: generator.generate([model], samples[0]), no_grad=True)
    tokens = len(batches[0]) * (args.decode_length + 1)
    return {"beam": beam, "sentences": int(sum(len(b) for b in batches)), "decode_length": args.decode_length,
            "decode_split": split, "decode_flops_per_token": flops / tokens}


def count_flops(fn, no_grad=False):
    """FLOPs of ``fn()`` as torch counts them (``FlopCounterMode``: matrix products, convolutions, attention)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        if no_grad:
            with torch.no_grad():
                fn()
        else:
            fn()
    return float(counter.get_total_flops())


def count_operators(fn):
    """Operators ``fn()`` dispatches, views left out (a view launches no kernel): on a GPU about one kernel launch
    each, so a step bound by the host's launches takes time in proportion to this count, not to its FLOPs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        kernels = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.kernels += not func.is_view
            return func(*args, **(kwargs or {}))

    with Count() as counter:
        fn()
    return counter.kernels


def step_operators(trainer, sample):
    """Operators of one training step: the model's forward and backward (the criterion's loss included), and the
    whole ``train_step`` (the optimizer too: a few per parameter tensor, or a few in all with a flat master copy)."""
    model, criterion = trainer.model, trainer.criterion
    prepared, _ = trainer._prepare_sample(sample)  # on the model's device, as train_step passes it
    model.train()

    def forward_backward():
        loss, _, _ = criterion(model, prepared)
        loss.backward()

    counts = {"forward_backward": count_operators(forward_backward)}
    trainer.zero_grad()
    counts["train_step"] = count_operators(lambda: trainer.train_step([sample]))
    return counts


MEMORY_HEADER = "peak train-step memory (MB)"


def markdown_table(results, baseline="transformer"):
    """The --memory-only table: peak train-step memory and its ratio to ``baseline``."""
    base = next((r for r in results if r["arch"] == baseline), None)
    lines = [f"| arch | params | {MEMORY_HEADER} | ratio to {baseline} |", "|---|---:|---:|---:|"]
    lines += [f"| {r['arch']} | {r['params'] / 1e6:.2f}M | {r['peak_train_step_mb']:.0f} | "
              f"{r['peak_train_step_mb'] / base['peak_train_step_mb']:.2f} |" if base else "-" for r in results]
    return "\n".join(lines)


def fusion_archs():
    """Every registered ``fusion_transformer`` arch, sorted."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    import fairseq_fusion  # noqa: F401
    from fairseq_fusion.models import FusionTransformerModel
    return sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel)


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-benchmark", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="Binarized translation data (train and test splits).")
    p.add_argument("--archs", default="fusion_transformer",
                   help="Comma-separated archs, or 'all' (every registered fusion_transformer arch); transformer is always added.")
    p.add_argument("--size", choices=sorted(SIZES), default="small",
                   help="Model size every arch is measured at (default: %(default)s; tiny is for tests).")
    p.add_argument("--max-tokens", type=int, default=4000, help="Tokens per training batch (default: %(default)s).")
    p.add_argument("--warmup-updates", type=int, default=5, help="Updates before timing starts.")
    p.add_argument("--updates", type=int, default=20, help="Timed training updates.")
    p.add_argument("--gen-subset", default="test", help="Binarized split that is decoded (default: %(default)s).")
    p.add_argument("--decode-sentences", type=int, default=200,
                   help="Decode the first N sentences of --gen-subset (default: %(default)s).")
    p.add_argument("--decode-batch-size", type=int, default=64, help="Sentences per decoding batch (default: %(default)s).")
    p.add_argument("--decode-length", type=int, default=30, help="Forced output length of decoding (tokens before EOS).")
    p.add_argument("--beam", type=int, default=None, help="Beam of every arch (default: the beam of the arch's paper, "
                   "recipes/common/settings.py; 5 where no paper names one).")
    p.add_argument("--repeats", type=int, default=3, help="Measurements of each arch, each after its own transformer run.")
    p.add_argument("--no-flops", dest="count_flops", action="store_false", help="Skip the FLOP counts.")
    p.add_argument("--no-memory", dest="measure_memory", action="store_false", help=argparse.SUPPRESS)
    p.add_argument("--fp16", action="store_true", help="On CUDA: train and decode with --fp16.")
    p.add_argument("--cpu", action="store_true", help="Stay on CPU even if CUDA is available.")
    p.add_argument("--memory-only", action="store_true",
                   help="Only the peak memory of one train step (after one unmeasured step) on the training batch with the "
                        "most attention-score elements (long sentences, full --max-tokens); no timing, no decoding.")
    p.add_argument("--decode-profile", action="store_true",
                   help="Only split the decoding time of each (untrained) arch into its model's calls (encoder, decoder "
                        "steps, reorders) and the search, with the FLOP count; transformer first, then each arch.")
    p.add_argument("--out", default="benchmark.json", help="JSON output file.")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--arch", help=argparse.SUPPRESS)
    p.add_argument("--beams", default="5", help=argparse.SUPPRESS)
    return p


def paper_beam(arch):
    """The decoding beam of the arch's paper (its first task), from the recipes' settings; 5 without them."""
    from . import recipe_settings as settings

    if arch == "transformer":
        return 5
    try:
        paper = settings.paper_of(arch, "wmt14_en_de")
        task = next(t for t, v in settings.TASKS.items() if paper in v["papers"])
        return settings.train_settings(task, arch, paper)["beam"]
    except ValueError:
        return 5


def run_worker(arch, argv, beams=None):
    cmd = [sys.executable, "-m", "fairseq_fusion_tools.benchmark", "--worker", "--arch", arch] + [a for a in argv if a != "--worker"]
    if beams:
        cmd += ["--beams", ",".join(str(b) for b in sorted(beams))]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        fail(f"fusion-benchmark: {arch} failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[-1][len("RESULT "):])


def write_results(out, results, table, settings):
    print(table)
    atomic_files.write_json(out, {"results": results, "table": table, "settings": settings})
    print(f"| wrote {out}")


def main(args):
    from . import benchmark_report

    if args.worker:
        print("RESULT " + json.dumps(measure(args)), flush=True)
        return
    atomic_files.claim(args.out + ".lock", f"--out {args.out}")  # the workers (--worker) write nothing
    if not os.path.isdir(args.data):
        fail(f"fusion-benchmark: --data {args.data} is not a folder (expected the binarized data folder of fusion-prepare-text)")
    if args.repeats < 1:
        fail(f"fusion-benchmark: --repeats must be >= 1, got {args.repeats}")
    archs = fusion_archs() if args.archs == "all" else args.archs.split(",")
    archs = [a for a in archs if a and a != "transformer"]
    argv = sys.argv[1:]
    settings = {k: v for k, v in vars(args).items() if k not in ("worker", "arch", "beams")}
    from .data_paths import REPO_ROOT

    for key in ("data", "out"):  # the JSON is shared: paths inside the repository are written relative to it
        path = os.path.abspath(settings[key])
        if path.startswith(REPO_ROOT + os.sep):
            settings[key] = os.path.relpath(path, REPO_ROOT)
    if args.memory_only:  # deterministic: one run each
        results = []
        for i, arch in enumerate(["transformer"] + archs):
            print(f"| [{i + 1}/{len(archs) + 1}] {arch} ...", flush=True)
            results.append(run_worker(arch, argv))
            print(f"|   {results[-1]['peak_train_step_mb']:.0f} MB peak train step", flush=True)
        return write_results(args.out, results, markdown_table(results), settings)
    beams = {a: args.beam or paper_beam(a) for a in archs}
    if args.decode_profile:
        from .benchmark_profile import decode_profile_table

        results = []
        for i, arch in enumerate(archs):  # each arch after a transformer run at its beam
            for name in ("transformer", arch):
                print(f"| [{2 * i + (name == arch) + 1}/{2 * len(archs)}] {name} (beam {beams[arch]}) ...", flush=True)
                results.append(run_worker(name, argv, {beams[arch]}))
        return write_results(args.out, results, decode_profile_table(results), settings)
    runs, total, k = [], args.repeats * len(archs) * 2, 0
    for rep in range(args.repeats):
        for arch in archs:  # A B A B ...: the transformer right before each arch
            # FLOPs and memory do not change between rounds: counted in the first only
            once = [] if rep == 0 else ["--no-flops", "--no-memory"]
            for name, b in (("transformer", {beams[arch]}), (arch, {beams[arch]})):
                k += 1
                print(f"| [{k}/{total}] round {rep + 1}: {name} (beam {beams[arch]}) ...", flush=True)
                r = run_worker(name, argv + once, b)
                r["beam"], r["round"] = beams[arch], rep + 1
                runs.append(r)
                # every finished run is kept, whatever happens later
                atomic_files.write_json(args.out, {"runs": runs, "settings": settings, "complete": False})
                mb = f", {r['peak_train_step_mb']:.0f} MB" if "peak_train_step_mb" in r else ""
                print(f"|   {r['train_words_per_s']:.0f} words/s, {r['decode_sentences_per_s'][str(beams[arch])]:.2f} sent/s"
                      + mb, flush=True)
    rows = benchmark_report.summarize(runs)
    table = benchmark_report.markdown(rows)
    print(table)
    atomic_files.write_json(args.out, {"runs": runs, "rows": rows, "table": table, "settings": settings, "complete": True})
    print(f"| wrote {args.out}")


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
