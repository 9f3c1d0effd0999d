"""Benchmark harness: each arch against fairseq's stock ``transformer`` in the same run, on the same work.

Every measurement runs in a fresh subprocess (so that peak memory is its own): build the model at
the same size on the same binarized data, train with fairseq's ``Trainer`` (the code path of
fairseq-train; ``--fp16`` on CUDA) for warm-up updates and then measured updates (target
words/s), then decode the test split with fairseq's ``SequenceGenerator`` at the arch's paper's
beam with a forced output length (``min_len = max_len``: no early end of sentence, so every arch
decodes the same number of steps; sentences/s). Each arch is measured ``--repeats`` times, each
time right after a ``transformer`` run (A B A B ...); the table shows the median ratio and its
spread, the FLOP-ideal ratio (``FlopCounterMode`` on a training step and on the generator) and the
papers' own ratios (``report.py``). No timing is asserted anywhere.

Memory (``peak_train_step_mb``) is the peak tensor memory of one training step
(forward + backward + optimizer step through ``Trainer.train_step``), see
``memory.step_memory``: on CUDA ``torch.cuda.max_memory_allocated`` with the peak reset just
before the step; on CPU the tensor bytes held when the step starts (parameters and optimizer
state; the previous step's gradients are released first, as ``train_step`` does) plus the peak
of the bytes the step allocates on top of them, from the allocation events of
``torch.profiler`` (``profile_memory=True``). Process RSS is not used: on CPU it is dominated
by imports and by what ``malloc`` keeps from earlier steps. ``--memory-only`` measures just
that, after one unmeasured step, on the training batch with the most attention-score elements
(sentences x longest length², see ``memory.longest_batch``), skipping the timing and decoding.
"""
import argparse
import json
import os
import subprocess
import sys

from .. import atomic_files
from ..fairseq_runs import SIZES, fusion_archs
from ..user_files import PREFIX, fail


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
    from .. import recipe_settings as settings

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
        refusals = [ln for ln in proc.stderr.splitlines() if ln.startswith(PREFIX)]
        if refusals:  # the worker refused its input (a command-line run of its own): its one line
            fail(f"fusion-benchmark: {arch}: {refusals[-1][len(PREFIX):]}")
        fail(f"fusion-benchmark: {arch} failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[-1][len("RESULT "):])


def write_results(out, results, table, settings):
    print(table)
    atomic_files.write_json(out, {"results": results, "table": table, "settings": settings})
    print(f"| wrote {out}")


def main(args):
    from . import report
    from .measure import measure

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
    from ..data_paths import REPO_ROOT

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
        return write_results(args.out, results, report.memory_table(results), settings)
    beams = {a: args.beam or paper_beam(a) for a in archs}
    if args.decode_profile:
        from .decode_profile import decode_profile_table

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
    rows = report.summarize(runs)
    table = report.markdown(rows)
    print(table)
    atomic_files.write_json(args.out, {"runs": runs, "rows": rows, "table": table, "settings": settings, "complete": True})
    print(f"| wrote {args.out}")
