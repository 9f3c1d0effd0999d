"""fusion-gpu-check: the GPU acceptance run, every arch in fp32, fp16 and bf16, DDP, and the base-size benchmark.

1. Multi30k En-De from the shared data (``FUSION_DATA``), prepared once into ``--work``/data-bin as ``make demo``
   prepares it (4k joint BPE), and reused.
2. Every registered ``fusion_transformer`` arch (discovered from fairseq's registry) is trained ``--updates``
   updates at the demo's size (d=128, 3+3 layers) in fp32, ``--fp16`` and ``--bf16`` (where
   ``torch.cuda.is_bf16_supported()``), same seed and data order, all in this one process
   (``check_train``); each run is validated and decodes ``--decode-sentences`` test sentences (sacreBLEU).
   A half-precision run passes when its validation loss is within ``--fp16-tolerance`` / ``--bf16-tolerance``
   (relative) of the fp32 run's (``check_report``).
3. With two or more GPUs: ``fairseq-train --distributed-world-size 2 --fp16`` for ``--ddp-archs`` (``check_ddp``).
4. The README's base-size benchmark on the GPU (``SIZE=base bash recipes/benchmark/run.sh --fp16``, the 7 headline
   archs) with what is left of ``--budget-minutes``; stopped at the budget, the pairs finished by then are reported
   (``check_benchmark``).

The report is ``--out``.json and ``--out``.md (written whole). Exit status 1 when an arch or a DDP run fails or the
run took longer than the budget. Without CUDA it prints one line and exits 0; ``--device cpu`` is the smoke mode
(e.g. ``--device cpu --dtypes fp32 --archs fusion_transformer --updates 2 --size tiny --skip-benchmark``).
"""
import argparse
import os
import shlex
import subprocess
import time

from .. import atomic_files
from ..user_files import fail
from . import check_report, check_train
from .check_benchmark import BENCH_MIN_S, STOP_GRACE_S, benchmark_script, run_benchmark
from .check_ddp import run_ddp
from .check_train import BF16_NOTE, train_argv

DTYPES = ("fp32", "fp16", "bf16")
DDP_ARCHS = "transformer_lexical_shortcuts_ff,transformer_phrase"
REPORT_S = 10  # what the report needs after the benchmark: the budget holds it too (an H200 run ended 1 s over)


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-gpu-check", description="The GPU acceptance run: every arch in fp32, fp16 "
                                "and bf16, DDP with two or more GPUs, and the base-size benchmark, in one report.")
    p.add_argument("--work", default="work/gpu_check",
                   help="Folder of the prepared data (data-bin, reused), the DDP logs and the benchmark JSON "
                        "(default: %(default)s).")
    p.add_argument("--out", default="work/gpu_check/report", help="The report: OUT.json and OUT.md (default: %(default)s).")
    p.add_argument("--archs", default="all", help="Comma-separated archs, or 'all': every registered fusion_transformer arch.")
    p.add_argument("--dtypes", default=",".join(DTYPES),
                   help="Comma-separated precisions out of fp32, fp16, bf16 (default: %(default)s); fp32 is the reference "
                        "of the others. bf16 is skipped, with a note, where the GPU does not support it.")
    p.add_argument("--updates", type=int, default=30, help="Training updates of each run (default: %(default)s).")
    p.add_argument("--size", choices=("tiny", "small"), default="small",
                   help="Model size of the per-arch runs: small is the demo's d=128, 3+3 layers (default); tiny is "
                        "for the smoke mode.")
    # measured on the CPU (fusion_transformer, 30 updates, README): bf16 0.04% from fp32, fp32 with other dropout masks
    # 0.01%, while training lowers the loss by 19%: a run that learns notably less than fp32 fails
    p.add_argument("--fp16-tolerance", type=float, default=0.02,
                   help="Largest relative difference of an fp16 run's validation loss from fp32's (default: %(default)s).")
    p.add_argument("--bf16-tolerance", type=float, default=0.04,
                   help="Largest relative difference of a bf16 run's validation loss from fp32's (default: %(default)s).")
    p.add_argument("--decode-sentences", type=int, default=100,
                   help="Test sentences each run decodes for sacreBLEU (default: %(default)s).")
    p.add_argument("--beam", type=int, default=5, help="Beam of that decoding (default: %(default)s).")
    p.add_argument("--seed", type=int, default=1, help="Seed of every run (default: %(default)s).")
    p.add_argument("--ddp-archs", default=DDP_ARCHS,
                   help="Archs trained with fairseq-train --distributed-world-size 2 --fp16 when two or more GPUs are "
                        "there; empty: none (default: %(default)s).")
    p.add_argument("--skip-benchmark", action="store_true", help="Leave out the base-size benchmark.")
    p.add_argument("--bench-repeats", type=int, default=1,
                   help="fusion-benchmark --repeats of the benchmark (default: %(default)s; the README's table has 3).")
    p.add_argument("--budget-minutes", type=float, default=10.0,
                   help="Time budget of the whole run; the benchmark gets what is left of it (default: %(default)s).")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="Where the runs go: cuda (default), or cpu, the smoke mode: the same runs on the CPU, no DDP and "
                        "no benchmark.")
    return p


def no_cuda_line():
    """The one line of a machine without CUDA, or None when CUDA is there."""
    import torch

    if torch.cuda.is_available():
        return None
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a build without CUDA"
    return (f"fusion-gpu-check: no CUDA device here (torch {torch.__version__}, {build}): nothing to check; "
            "run it on a machine with a GPU (--device cpu runs the smoke mode)")


def check_args(args):
    dtypes = [d for d in args.dtypes.split(",") if d]
    bad = [d for d in dtypes if d not in DTYPES]
    if bad or not dtypes:
        fail(f"--dtypes {args.dtypes}: expected a comma-separated list out of {', '.join(DTYPES)}")
    if any(d != "fp32" for d in dtypes) and "fp32" not in dtypes:
        fail(f"--dtypes {args.dtypes}: fp16 and bf16 are compared with fp32, which must be in the list")
    if args.updates < 1 or args.decode_sentences < 1 or args.bench_repeats < 1:
        fail("--updates, --decode-sentences and --bench-repeats must be positive")
    for name in ("fp16_tolerance", "bf16_tolerance"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} {getattr(args, name)}: expected a positive fraction, e.g. 0.05 for 5%")
    return dtypes


def select_archs(spec, flag="--archs", also=()):
    """The archs a comma-separated ``spec`` names ('all': every fusion_transformer arch), besides those in ``also``
    (fairseq's ``transformer``); an unknown name is refused in one line naming ``flag``."""
    from ..fairseq_runs import fusion_archs

    registered = fusion_archs()
    if spec == "all":
        return [*also, *registered]
    archs = [a for a in spec.split(",") if a]
    unknown = [a for a in archs if a not in registered and a not in also]
    if unknown or not archs:
        fail(f"{flag} {spec}: {', '.join(unknown) or 'none given'} is not a registered fusion_transformer arch "
             f"(fusion-archs lists them){''.join(f' or {a}' for a in also)}, or give 'all'")
    return archs


def prepare_data(work):
    """``WORK/data-bin``: Multi30k En-De as make demo prepares it, once (fusion-prepare-text renames it into place
    when complete, so a folder with prepare.json is whole)."""
    from ..fairseq_runs import console_script
    from ..data_paths import data_path

    dest = os.path.join(work, "data-bin")
    os.makedirs(work, exist_ok=True)
    if not os.path.exists(os.path.join(dest, "prepare.json")):
        try:
            m30k = data_path("multi30k")
        except FileNotFoundError as e:
            fail(str(e))
        cmd = [console_script("fusion-prepare-text"), "-s", "en", "-t", "de", "--trainpref", f"{m30k}/train",
               "--validpref", f"{m30k}/val", "--testpref", f"{m30k}/test_2016_flickr", "--destdir", dest,
               "--bpe-merges", "4000", "--workers", str(min(8, os.cpu_count() or 1))]
        print(f"| preparing Multi30k once: {shlex.join(cmd)}", flush=True)
        if subprocess.run(cmd).returncode != 0:
            fail(f"fusion-prepare-text failed (command above); {dest} was not written")
    open(os.path.join(dest, ".done"), "a").close()  # recipes/benchmark/run.sh's mark of a prepared BIN
    return dest


def run_archs(args, archs, dtypes, data):
    """Every arch in every dtype, in this process; one line of progress per arch."""
    import logging

    # the per-run notices of fairseq and hydra (model built, optimizer, ...); fairseq's wav2vec module sets the root
    # logger to DEBUG at import
    root, level = logging.getLogger(), logging.getLogger().level
    root.setLevel(logging.WARNING)
    try:
        return _run_archs(args, archs, dtypes, data)
    finally:
        root.setLevel(level)


def _run_archs(args, archs, dtypes, data):
    cpu = args.device == "cpu"
    tolerances = {"fp16": args.fp16_tolerance, "bf16": args.bf16_tolerance}
    task = check_train.setup_task(data, cpu)
    results = []
    for k, arch in enumerate(archs, 1):
        start, runs = time.perf_counter(), {}
        for dtype in dtypes:
            try:
                runs[dtype] = check_train.train_and_decode(
                    task, data, arch, dtype, args.size, args.updates, args.seed, cpu, args.decode_sentences, args.beam,
                    initial_valid=dtype == "fp32")
            except Exception as e:  # reported, and the next run goes on
                runs[dtype] = {"error": error_line(e)}
        problems = check_report.judge_arch(runs, tolerances, args.updates)
        params = next((r["params"] for r in runs.values() if "params" in r), None)
        results.append({"arch": arch, "params": params, "runs": runs, "passed": not problems, "problems": problems,
                        "seconds": time.perf_counter() - start})
        losses = ", ".join(f"{d} {runs[d]['valid_loss']:.3f}" if "valid_loss" in runs[d] else f"{d} error" for d in dtypes)
        print(f"| [{k}/{len(archs)}] {arch}: valid loss {losses}; {time.perf_counter() - start:.0f} s; "
              f"{'pass' if not problems else 'FAIL: ' + '; '.join(problems)}", flush=True)
    return results


def error_line(e):
    """A failed run's exception in the report: its type and the first line of its message."""
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]


def main(args):
    start = time.time()
    if args.device == "cuda":
        line = no_cuda_line()
        if line:
            print(line)
            return 0
    dtypes = check_args(args)
    if args.device == "cuda" and not args.skip_benchmark:
        benchmark_script()  # before the runs: an installed package has no recipes/ (one line)
    archs = select_archs(args.archs)
    ddp_archs = select_archs(args.ddp_archs) if args.ddp_archs else []
    atomic_files.claim(args.out + ".lock", f"--out {args.out}")
    budget = 60 * args.budget_minutes
    deadline = start + budget

    import torch

    notes = []
    if "bf16" in dtypes:
        if args.device == "cuda" and not torch.cuda.is_bf16_supported():
            dtypes.remove("bf16")
            notes.append("bf16 left out: torch.cuda.is_bf16_supported() is False on this GPU")
        else:
            notes.append(BF16_NOTE)
    data = prepare_data(args.work)
    results = run_archs(args, archs, dtypes, data)

    gpus = torch.cuda.device_count() if args.device == "cuda" else 0
    if args.device != "cuda":
        ddp = {"skipped": "the smoke mode (--device cpu)"}
    elif not ddp_archs:
        ddp = {"skipped": "--ddp-archs is empty"}
    elif gpus < 2:
        ddp = {"skipped": f"{gpus} GPU on this machine; DDP needs two or more"}
    else:
        ddp = run_ddp(args, ddp_archs, data, args.work)

    left = deadline - time.time() - STOP_GRACE_S - REPORT_S  # the benchmark's share, its stop and the report inside
    if args.skip_benchmark:
        bench = {"skipped": "--skip-benchmark"}
    elif args.device != "cuda":
        bench = {"skipped": "the smoke mode (--device cpu)"}
    elif left < BENCH_MIN_S:
        bench = {"skipped": f"{max(0, left):.0f} s of the {budget:.0f} s budget left (it needs {BENCH_MIN_S} s or more)"}
    else:
        bench = run_benchmark(args, data, args.work, left)

    report = build_report(args, dtypes, archs, results, ddp, bench, notes, start, budget)
    atomic_files.write_json(args.out + ".json", report)
    atomic_files.write_text(args.out + ".md", check_report.markdown(report))
    print(f"| {report['archs_passed']}/{len(results)} archs pass; {report['elapsed_s']:.0f} s of {budget:.0f}; "
          f"{'PASS' if report['passed'] else 'FAIL'}; wrote {args.out}.json and {args.out}.md", flush=True)
    return 0 if report["passed"] else 1


def build_report(args, dtypes, archs, results, ddp, bench, notes, start, budget):
    elapsed = time.time() - start
    ddp_ok = all(r["passed"] for r in ddp.get("runs", []))
    passed = sum(r["passed"] for r in results)
    if elapsed > budget:
        notes.append(f"over the time budget: {elapsed:.0f} s of {budget:.0f} s")
    if bench.get("stopped"):
        notes.append("the benchmark was stopped at the time budget; its table has the pairs finished by then")
    example = ["fairseq-train"] + train_argv(os.path.join(args.work, "data-bin"), "ARCH", "fp16", args.size, args.updates,
                                             args.seed, args.device == "cpu")
    example[example.index("--user-dir") + 1] = "USER_DIR"
    return {
        "passed": passed == len(results) and ddp_ok and elapsed <= budget and not bench.get("error"),
        "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(start)), "elapsed_s": elapsed,
        "machine": check_report.machine(args.device),
        "settings": {"archs": archs, "dtypes": dtypes, "updates": args.updates, "size": args.size, "seed": args.seed,
                     "tolerances": {d: getattr(args, f"{d}_tolerance") for d in dtypes if d != "fp32"},
                     "decode_sentences": args.decode_sentences, "beam": args.beam, "budget_s": budget,
                     "train_command": shlex.join(example).replace("USER_DIR", "$(fusion-user-dir)"), "options": vars(args)},
        "notes": notes, "archs_passed": passed, "archs": results, "ddp": ddp, "benchmark": bench,
    }
