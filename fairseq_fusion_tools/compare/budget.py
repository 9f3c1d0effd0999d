"""fusion-compare's converged budget (``--budget-from-curve CAP``): where the baseline's validation BLEU stops improving.

The baseline of the first seed trains for at most CAP updates in ``WORK/budget/``, with the table's settings, and is
validated every ``--save-interval-updates`` (default: a 50th of CAP) with fairseq's own validation BLEU
(``--eval-bleu``: the table's beam, Moses detokenization, BPE removed) and stopped by fairseq's ``--patience``
(PATIENCE validations without a new best BLEU; validations at epoch ends are turned off, so the curve's points
are evenly spaced and the patience spans PATIENCE intervals). The budget is the first validated update whose BLEU is within
``--budget-tolerance`` of the curve's best: past it, more updates buy less than that. The curve, the rule and the
budget are written to ``WORK/budget/budget.json`` and reused; an interrupted curve run continues from its last
checkpoint, under the command its folder records (``command.json``; another is refused).
"""
import argparse
import json
import os

from .. import atomic_files
from ..fairseq_runs import LOG_LINE
from .commands import portable_command, record_command, train_command
from .training import run_logged, tail

PATIENCE = 10
VALIDATIONS = 50  # over CAP, when --save-interval-updates is not given
NEVER = "100000"  # epochs (the table's --max-epoch): no validation at epoch ends, only every interval


def curve_dir(args):
    return os.path.join(args.work, "budget")


def curve_args(args, cap):
    """The table's arguments with CAP as the budget and the curve's validation interval."""
    interval = args.save_interval_updates or max(1, cap // VALIDATIONS)
    return argparse.Namespace(**{**vars(args), "max_update": cap, "max_minutes": None,
                                 "save_interval_updates": interval})


def curve_command(args, system, cap):
    seed = args.seeds[0]
    run_dir = os.path.join(curve_dir(args), system["name"], f"seed{seed}")
    bleu_args = json.dumps({"beam": args.beam, "lenpen": args.lenpen, "max_len_a": 1.5, "max_len_b": 10})
    return run_dir, train_command(curve_args(args, cap), system, seed, run_dir) + [
        "--eval-bleu", "--eval-bleu-args", bleu_args, "--eval-bleu-detok", "moses",
        "--eval-bleu-detok-args", json.dumps({"target_lang": args.target_lang}), "--eval-bleu-remove-bpe",
        "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric", "--patience", str(PATIENCE),
        "--validate-interval-updates", str(curve_args(args, cap).save_interval_updates), "--validate-interval", NEVER]


def valid_curve(log_path):
    """[(update, validation BLEU)] of a fairseq-train log (json format), by update, one point per update."""
    points = {}
    with open(log_path, encoding="utf-8") as f:
        for line in f:
            m = LOG_LINE.search(line)
            if m and m.group(1) == "valid":
                stats = json.loads(m.group(2))
                if "valid_bleu" in stats:
                    points[int(stats["valid_num_updates"])] = float(stats["valid_bleu"])
    return sorted(points.items())


def plateau(curve, tolerance):
    """The first validated update whose BLEU is within ``tolerance`` of the curve's best."""
    best = max(b for _, b in curve)
    return next(u for u, b in curve if b >= best - tolerance)


def find_budget(args, system, cap):
    """The budget in updates (trains the curve run unless budget.json has it); the record written beside it."""
    from ..fairseq_runs import console_script

    out = os.path.join(curve_dir(args), "budget.json")
    run_dir, cmd = curve_command(args, system, cap)
    portable = portable_command(cmd)
    if os.path.exists(out):
        with open(out) as f:
            record = json.load(f)
        if record["command"] == portable and record["tolerance"] == args.budget_tolerance:
            print(f"| budget: {record['budget']} updates, from {out}", flush=True)
            return record["budget"]
        raise ValueError(f"{out} was found with another command or tolerance: use another --work, or remove "
                         f"{curve_dir(args)} to find the budget again")
    record_command(run_dir, portable)  # an interrupted curve run continues only under its own command
    log = os.path.join(run_dir, "train.log")
    print(f"| budget: training {system['name']} seed {args.seeds[0]} for at most {cap} updates, validation BLEU every "
          f"{curve_args(args, cap).save_interval_updates} (log {log})", flush=True)
    rc = run_logged([console_script("fairseq-train"), *cmd], log, progress="budget curve", total=cap)
    if rc != 0:
        raise RuntimeError(f"fairseq-train of the budget curve exited {rc}; the last lines of {log}:\n{tail(log)}")
    curve = valid_curve(log)
    if not curve:
        raise RuntimeError(f"{log}: no validation BLEU (valid_bleu) logged")
    budget = plateau(curve, args.budget_tolerance)
    with open(log, encoding="utf-8") as f:
        stopped_early = "early stop since valid performance hasn't improved" in f.read()
    record = {"budget": budget, "tolerance": args.budget_tolerance, "cap": cap, "patience": PATIENCE,
              "stopped_early": stopped_early, "best": max(curve, key=lambda p: p[1]), "curve": curve,
              "system": system["name"], "seed": args.seeds[0], "command": portable,
              "rule": f"the first validated update within {args.budget_tolerance} BLEU of the curve's best"}
    atomic_files.write_json(out, record)
    note = "" if stopped_early else f" (the curve had not stopped improving for {PATIENCE} validations by {cap})"
    print(f"| budget: {budget} updates: validation BLEU {dict(curve)[budget]:.2f} against the best "
          f"{record['best'][1]:.2f} at {record['best'][0]}{note}; wrote {out}", flush=True)
    return budget
