"""fusion-compare: archs (and flag combinations) x seeds, one dataset, one budget, one table; see
``fairseq_fusion_tools.compare`` (the runs and the table), ``compare_budget`` (--budget-from-curve) and
``compare_parallel`` (--jobs)."""
import json
import os
import shlex
import signal
import sys
import time

from fairseq_fusion.guards import save_dir_lock
from fairseq_fusion_tools.user_files import fail

from .. import compare
from ..compare_budget import curve_command, find_budget
from ..compare_parallel import train_and_translate_all

get_parser = compare.get_parser  # the parser alone (--help, tests)


def main(args):
    args.train_args, args.generate_args = shlex.split(args.train_args), shlex.split(args.generate_args)
    try:
        systems = [compare.parse_system(s) for s in args.system]
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
        if args.budget_from_curve < 1 or args.budget_tolerance < 0:
            fail(f"fusion-compare: --budget-from-curve {args.budget_from_curve} --budget-tolerance "
                 f"{args.budget_tolerance}: expected a positive cap and a tolerance of 0 or more")
        args.max_update = args.budget_from_curve  # until the curve has found the budget: the cap
    systems = compare.with_continued_baseline(args, systems, baseline)
    if any(s.get("continues") for s in systems) and args.max_minutes:
        fail("fusion-compare: --max-minutes with two-stage systems: the second stage needs a fixed budget; "
             "use --max-update, or --protocol same")
    args.protocols = {s["name"]: compare.protocol_of(args, s) for s in systems}
    compared = {s["name"]: compare.compared_with(args, s, baseline) for s in systems}
    try:
        for subset in args.test_subsets:
            compare.reference_path(args, subset)
            if not any(n.startswith(subset + ".") and n.endswith(".bin") for n in os.listdir(args.data)):
                raise FileNotFoundError(f"--test-subsets {subset}: no binarized {subset}.* files in {args.data}")
        for s in systems:
            compare.check_system(args, s)
    except (FileNotFoundError, ValueError) as e:
        fail(f"fusion-compare: {e}")
    compare.check_saves(args)
    if args.dry_run:
        if args.budget_from_curve:
            print("fairseq-train " + shlex.join(curve_command(args, systems[0], args.budget_from_curve)[1]))
        for s in systems:
            print("fairseq-train " + shlex.join(compare.train_command(args, s, args.seeds[0], f"{args.work}/runs/{s['name']}/seed{args.seeds[0]}")))
        print("fairseq-generate " + shlex.join(compare.generate_command(args, f"{args.work}/runs/NAME/seedS/CHECKPOINT", args.test_subsets[0])))
        return None
    os.makedirs(args.work, exist_ok=True)
    try:
        if args.budget_from_curve:
            args.max_update = find_budget(args, systems[0], args.budget_from_curve)
            compare.check_saves(args)
        for seed in args.seeds:  # every run folder before any training: one line, not a table half done
            for s in systems:
                run_dir = compare.run_dir_of(args, s, seed)
                compare.check_recorded(run_dir, compare.portable_command(compare.train_command(args, s, seed, run_dir)))
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
                train = compare.run_one(args, s, seed, label)
                run_dir = os.path.join(args.work, "runs", s["name"], f"seed{seed}")
                ev = {subset: compare.evaluate(args, run_dir, subset, select) for subset in args.test_subsets}
                against = compared[s["name"]]
                sig = {} if against is None else {
                    subset: compare.bootstrap(args, run_dir, os.path.join(args.work, "runs", against, f"seed{seed}"), subset,
                                      against, select) for subset in args.test_subsets}
            except (RuntimeError, ValueError, FileNotFoundError) as e:
                fail(f"fusion-compare: {e}")
            runs.append({"system": s["name"], "seed": seed, "train": train, "eval": ev, "significance": sig})
            wps = "-" if train["words_per_s"] is None else f"{train['words_per_s']:.0f}"
            print(f"| {label}: {train['updates']} updates, {wps} words/s; " + ", ".join(
                f"{sub} sacreBLEU {e['sacrebleu']['score']:.2f}" for sub, e in ev.items())
                + f" ({select}; {(time.time() - started) / 60:.1f} min so far)", flush=True)
            compare.write_results(args, systems, runs, baseline, command, complete=k == total, compared=compared)
    return runs


def cli_main():
    signal.signal(signal.SIGTERM, compare.exit_on_sigterm)  # SIGKILL cannot be caught: its fairseq-train trains on
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
