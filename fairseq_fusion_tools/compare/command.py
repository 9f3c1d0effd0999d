"""fusion-compare: archs (and flag combinations) x seeds on one binarized dataset, one budget, one table.

Every run is ``fairseq-train`` (``--user-dir`` this plugin) with identical settings except the system's
arch and flags, and its seed; the budget is equal for all: ``--max-update`` updates, or ``--max-minutes``
of training on the same machine (fairseq's ``--stop-time-hours``), per stage. Each finished run is
evaluated on the test subsets with ``fairseq-generate`` (one beam for all), detokenized with Moses and
scored with sacreBLEU (signature kept) and tokenized BLEU (``scoring.evaluation.score``); each system is
tested against the baseline seed by seed with sacreBLEU's paired bootstrap (the same seed's baseline run
under the same protocol, same test set).

Protocols (``--protocol papers``, the default): each system is trained and its checkpoint chosen as its
arch's paper did (the presets' ``@describe(source=...)``; fairseq's transformer and fusion_transformer
follow Vaswani et al.). Dou et al. train in two stages: their archs start from the baseline run's last
checkpoint (``--init-from-vanilla``) for another budget, beside the baseline continued as long from the
same checkpoint (``--finetune-from-model``: fresh optimizer and schedule, as the second stage has), which is
what they are tested against. The tested checkpoint is the average of the last N interval checkpoints
where the paper averaged (Vaswani, Emelin, Dou, Xu: 5 for base-size models, 20 or 16 for big), else the
one with the best validation loss (Yang, Liu). Checkpoints are saved (and validated) every
``--save-interval-updates`` (default: a 20th of ``--max-update``). ``--protocol same``: one stage and the
last checkpoint for every system. Train words/s counts training time only (words over fairseq's
``train_wall``, without the validations and checkpoint saves a protocol adds), after each process's first log
interval (warm-up); parameters are fairseq's own count (shared embeddings counted once).

Layout of ``--work`` (resumable): ``runs/NAME/seedS/`` holds ``command.json`` (the exact command;
another command in the same place is refused rather than mixed), ``train.log`` (appended on every
attempt), fairseq's checkpoints (an interrupted run continues from ``checkpoint_last.pt``),
``train.json`` (written once training finished: a finished run is never redone) and
``eval/SUBSET.SELECTION.{generate.txt,detok,json}`` (SELECTION: ``last``, ``best`` or ``averageN``, whose
averaged checkpoint is ``eval/averageN.pt``); the baseline continued is ``runs/BASELINE+continued/``. ``results.{json,md,png}`` are rewritten after every run.

``--jobs N`` trains and translates N runs at once (``compare/parallel.py``); ``--budget-from-curve CAP`` finds the
budget first, where the baseline's validation BLEU stops improving (``compare/budget.py``, ``budget/budget.json``).
"""
import argparse
import json
import os
import shlex
import signal
import sys
import time

from ..fairseq_runs import SIZES
from ..user_files import fail
from .budget import curve_command, find_budget
from .commands import (check_recorded, check_saves, check_system, generate_command, portable_command, run_dir_of,
                       train_command)
from .evaluation import bootstrap, evaluate, reference_path
from .parallel import train_and_translate_all
from .protocols import compared_with, parse_system, protocol_of, with_continued_baseline
from .table import README_MARKER, write_results
from .training import exit_on_sigterm, run_one
from fairseq_fusion.guards import save_dir_lock


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-compare", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 2)[2])
    p.add_argument("data", help="Binarized data directory (fusion-prepare-text's --destdir).")
    p.add_argument("--system", action="append", required=True, metavar="NAME=ARCH [FLAGS]",
                   help="A system: an arch, or NAME=ARCH followed by model flags in one quoted argument "
                        "(e.g. 'combo=transformer_simplified_decoder --lexical-shortcuts'); repeat for each.")
    p.add_argument("--baseline", default=None, help="The system every other is tested against (default: the first).")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="Training seeds of every system (default: 1 2).")
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--max-update", type=int, help="Equal budget in updates.")
    budget.add_argument("--max-minutes", type=float, help="Equal budget in minutes of training on this machine.")
    budget.add_argument("--budget-from-curve", type=int, metavar="CAP",
                        help="Equal budget in updates, found first: where the baseline's validation BLEU stops "
                             "improving, trained for at most CAP updates (compare/budget.py; WORK/budget/budget.json).")
    p.add_argument("--budget-tolerance", type=float, default=0.3,
                   help="With --budget-from-curve: the budget is the first validated update within this much BLEU "
                        "of the curve's best (default: %(default)s).")
    p.add_argument("--jobs", type=int, default=1,
                   help="Runs trained and translated at once (e.g. many small models on one GPU; default: %(default)s).")
    p.add_argument("--size", choices=[s for s in SIZES if s != "tiny"] + ["tiny"], default="small",
                   help="Model size and its optimization: small = make demo's (d 128, 3+3 layers); base, big = "
                        "fairseq's WMT'14 settings (default: %(default)s).")
    p.add_argument("--test-subsets", nargs="+", default=["test"], help="Binarized subsets to translate (test, test1, ...).")
    p.add_argument("--ref", action="append", default=[], metavar="SUBSET=FILE",
                   help="Raw reference of a subset (default: DATA/tok/SUBSET.raw.TGT).")
    p.add_argument("--target-lang", default=None, help="Target language (default: DATA/prepare.json's).")
    p.add_argument("--beam", type=int, default=5, help="Beam of fairseq-generate for every system (default: %(default)s).")
    p.add_argument("--lenpen", type=float, default=1.0, help="Length penalty of fairseq-generate (default: %(default)s).")
    p.add_argument("--batch-size", type=int, default=128, help="Sentences per fairseq-generate batch.")
    p.add_argument("--bootstrap-samples", type=int, default=1000,
                   help="Resamples of sacreBLEU's paired bootstrap (default: %(default)s).")
    p.add_argument("--fp16", action="store_true", help="Train and translate with --fp16 (CUDA).")
    p.add_argument("--cpu", action="store_true", help="Stay on CPU.")
    p.add_argument("--protocol", choices=["papers", "same"], default="papers",
                   help="How each system is trained and which checkpoint is tested: as its paper did with papers "
                        "(two stages for Dou et al.'s archs; checkpoint average or best validation loss), or one "
                        "stage and the last checkpoint for every system with same (default: %(default)s).")
    p.add_argument("--save-interval-updates", type=int, default=None,
                   help="Checkpoint and validate every N updates: the checkpoints the protocols average or choose "
                        "from, and what an interrupted run loses (default: a 20th of --max-update, else 100).")
    p.add_argument("--log-interval", type=int, default=25,
                   help="Updates between fairseq-train's log lines, which give words/s (default: %(default)s).")
    p.add_argument("--train-args", default="", help="Further fairseq-train options for every system (one quoted string).")
    p.add_argument("--generate-args", default="", help="Further fairseq-generate options (one quoted string).")
    p.add_argument("--work", required=True, help="Folder of the runs and results (resumable).")
    p.add_argument("--readme", default=None, help="Write the table into this file between the --readme-marker lines.")
    p.add_argument("--readme-marker", default=README_MARKER,
                   help="The table's place in --readme: between <!-- MARKER --> and <!-- /MARKER --> "
                        "(default: %(default)s).")
    p.add_argument("--dry-run", action="store_true", help="Print the commands and stop.")
    return p



def main(args):
    signal.signal(signal.SIGTERM, exit_on_sigterm)  # SIGKILL cannot be caught: its fairseq-train trains on
    args.train_args, args.generate_args = shlex.split(args.train_args), shlex.split(args.generate_args)
    try:
        systems = [parse_system(s) for s in args.system]
    except ValueError as e:
        fail(f"fusion-compare: {e}")
    names = [s["name"] for s in systems]
    if len(set(names)) != len(names):
        fail(f"fusion-compare: --system names must differ, got {names}")
    baseline = args.baseline or names[0]
    if baseline not in names:
        fail(f"fusion-compare: --baseline {baseline!r} is none of the systems {names}")
    args.baseline = baseline
    systems.sort(key=lambda s: s["name"] != baseline)  # the baseline's run of a seed comes first
    if not os.path.isdir(args.data):
        fail(f"fusion-compare: data {args.data}: {'a file' if os.path.exists(args.data) else 'no such folder'}; "
             "expected the binarized data folder (fusion-prepare-text --destdir)")
    if args.target_lang is None:
        meta = os.path.join(args.data, "prepare.json")
        if not os.path.exists(meta):
            fail(f"fusion-compare: {meta} not found: give --target-lang")
        with open(meta) as f:
            args.target_lang = json.load(f)["target_lang"]
    if len(set(args.seeds)) != len(args.seeds):
        fail(f"fusion-compare: --seeds must differ, got {args.seeds}")
    if args.jobs < 1:
        fail(f"fusion-compare: --jobs {args.jobs}: expected 1 or more")
    if args.budget_from_curve is not None:
        if args.budget_from_curve < 1 or not 0 <= args.budget_tolerance < float("inf"):
            fail(f"fusion-compare: --budget-from-curve {args.budget_from_curve} --budget-tolerance "
                 f"{args.budget_tolerance}: expected a positive cap and a tolerance of 0 or more")
        args.max_update = args.budget_from_curve  # until the curve has found the budget: the cap
    systems = with_continued_baseline(args, systems, baseline)
    if any(s.get("continues") for s in systems) and args.max_minutes:
        fail("fusion-compare: --max-minutes with two-stage systems: the second stage needs a fixed budget; "
             "use --max-update, or --protocol same")
    args.protocols = {s["name"]: protocol_of(args, s) for s in systems}
    compared = {s["name"]: compared_with(args, s, baseline) for s in systems}
    try:
        for subset in args.test_subsets:
            reference_path(args, subset)
            if not any(n.startswith(subset + ".") and n.endswith(".bin") for n in os.listdir(args.data)):
                raise FileNotFoundError(f"--test-subsets {subset}: no binarized {subset}.* files in {args.data}")
        for s in systems:
            check_system(args, s)
    except (FileNotFoundError, ValueError) as e:
        fail(f"fusion-compare: {e}")
    check_saves(args)
    if args.dry_run:
        if args.budget_from_curve:
            print("fairseq-train " + shlex.join(curve_command(args, systems[0], args.budget_from_curve)[1]))
        for s in systems:
            print("fairseq-train " + shlex.join(train_command(args, s, args.seeds[0], f"{args.work}/runs/{s['name']}/seed{args.seeds[0]}")))
        print("fairseq-generate " + shlex.join(generate_command(args, f"{args.work}/runs/NAME/seedS/CHECKPOINT", args.test_subsets[0])))
        return None
    os.makedirs(args.work, exist_ok=True)
    try:
        if args.budget_from_curve:
            args.max_update = find_budget(args, systems[0], args.budget_from_curve)
            check_saves(args)
        for seed in args.seeds:  # every run folder before any training: one line, not a table half done
            for s in systems:
                run_dir = run_dir_of(args, s, seed)
                check_recorded(run_dir, portable_command(train_command(args, s, seed, run_dir)))
                save_dir_lock.check_free(run_dir)
        if args.jobs > 1:
            train_and_translate_all(args, systems, compared, args.jobs)
    except (RuntimeError, ValueError, FileNotFoundError) as e:
        fail(f"fusion-compare: {e}")
    command = "fusion-compare " + shlex.join(sys.argv[1:])
    runs, total, k = [], len(systems) * len(args.seeds), 0
    started = time.time()
    for seed in args.seeds:
        for s in systems:
            k += 1
            label = f"[{k}/{total}] {s['name']} seed {seed}"
            select = args.protocols[s["name"]]["select"]
            try:
                train = run_one(args, s, seed, label)
                run_dir = os.path.join(args.work, "runs", s["name"], f"seed{seed}")
                ev = {subset: evaluate(args, run_dir, subset, select) for subset in args.test_subsets}
                against = compared[s["name"]]
                sig = {} if against is None else {
                    subset: bootstrap(args, run_dir, os.path.join(args.work, "runs", against, f"seed{seed}"), subset,
                                      against, select) for subset in args.test_subsets}
            except (RuntimeError, ValueError, FileNotFoundError) as e:
                fail(f"fusion-compare: {e}")
            runs.append({"system": s["name"], "seed": seed, "train": train, "eval": ev, "significance": sig})
            wps = "-" if train["words_per_s"] is None else f"{train['words_per_s']:.0f}"
            print(f"| {label}: {train['updates']} updates, {wps} words/s; " + ", ".join(
                f"{sub} sacreBLEU {e['sacrebleu']['score']:.2f}" for sub, e in ev.items())
                + f" ({select}; {(time.time() - started) / 60:.1f} min so far)", flush=True)
            write_results(args, systems, runs, baseline, command, complete=k == total, compared=compared)
    return runs
