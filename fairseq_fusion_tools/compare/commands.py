"""fusion-compare's fairseq commands: the fairseq-train and fairseq-generate argv of a run, checked before any
training (``check_system``, ``check_saves``), and the command a run folder records (``command.json``: another is
refused)."""
import json
import os
import shlex

from .. import atomic_files
from ..data_paths import PLUGIN_DIR
from ..fairseq_runs import COMMON, SIZES, TRAINING, fusion_archs
from ..user_files import fail
from .protocols import criterion_of
from fairseq_fusion.errors import few


def stage_one(args, seed, baseline):
    return os.path.join(args.work, "runs", baseline, f"seed{seed}", "checkpoint_last.pt")


def keep_checkpoints(args):
    """Interval checkpoints every run keeps: the most any system averages (at least 1)."""
    return max([1] + [int(p["select"][len("average"):]) for p in args.protocols.values() if p["select"].startswith("average")])


def save_interval(args):
    if args.save_interval_updates:
        return args.save_interval_updates
    return max(1, args.max_update // 20) if args.max_update else 100


def check_saves(args):
    """The budget saves as many interval checkpoints as the protocols average, or one line."""
    if args.max_update and args.max_update // save_interval(args) < keep_checkpoints(args):
        budget = (f"the budget {args.max_update} the curve found" if args.budget_from_curve and
                  args.max_update != args.budget_from_curve else f"--max-update {args.max_update}")
        fail(f"fusion-compare: the protocols average the last {keep_checkpoints(args)} checkpoints, but {budget} "
             f"with --save-interval-updates {save_interval(args)} saves {args.max_update // save_interval(args)}: "
             "lower --save-interval-updates, or use --protocol same")


def train_command(args, system, seed, save_dir):
    """The fairseq-train argv of one run (after the executable)."""
    criterion = criterion_of(system["arch"])
    budget = (["--max-update", str(args.max_update)] if args.max_update else
              ["--stop-time-hours", repr(args.max_minutes / 60), "--max-update", "100000000"])
    stage = []
    if system.get("continues"):
        stage = ["--finetune-from-model", stage_one(args, seed, system["continues"]["name"])]
    elif args.protocols[system["name"]]["stages"] == 2:
        stage = ["--init-from-vanilla", stage_one(args, seed, args.baseline)]
    return [args.data, "--user-dir", PLUGIN_DIR, "--arch", system["arch"],
            *SIZES[args.size], *COMMON, *TRAINING[args.size],
            "--criterion", criterion, *(["--label-smoothing", "0.1"] if "label_smoothed" in criterion else []),
            *budget, "--max-epoch", "100000", "--seed", str(seed), "--save-dir", save_dir, "--no-epoch-checkpoints",
            "--save-interval-updates", str(save_interval(args)), "--keep-interval-updates", str(keep_checkpoints(args)),
            *stage,
            "--log-format", "json", "--log-interval", str(args.log_interval), "--num-workers", "0",
            *(["--fp16"] if args.fp16 else []), *(["--cpu"] if args.cpu else []),
            *system["flags"], *args.train_args]


def check_system(args, system):
    """Parse the system's command as fairseq-train would and validate its technique flags: a typo or a refused
    combination fails here, before any training."""
    import logging

    from fairseq import options

    import fairseq_fusion  # noqa: F401
    from fairseq_fusion import fusion_options

    argv = train_command(args, system, 1, "/nonexistent")
    level = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        ns = options.parse_args_and_arch(options.get_training_parser(), argv)
    except SystemExit:
        raise ValueError(f"system {system['name']!r}: fairseq-train refuses its arguments ({shlex.join(argv[1:])}); "
                         "see the argparse message above") from None
    finally:
        logging.disable(level)
    if system["arch"] in fusion_archs():
        fusion_options.validate(ns)


def generate_command(args, checkpoint, subset):
    return [args.data, "--user-dir", PLUGIN_DIR,
            "--path", checkpoint, "--gen-subset", subset,
            "--beam", str(args.beam), "--lenpen", str(args.lenpen), "--batch-size", str(args.batch_size),
            "--required-batch-size-multiple", "1", "--max-len-a", "1.5", "--max-len-b", "10", "--remove-bpe",
            *(["--fp16"] if args.fp16 else []), *(["--cpu"] if args.cpu else []), *args.generate_args]


def portable_command(cmd):
    """``cmd`` as it is recorded and compared between attempts: the plugin's path, which may change, as USER_DIR."""
    return [a if a != PLUGIN_DIR else "USER_DIR" for a in cmd]


def _options(argv):
    """{option: its values} of an argv, the last occurrence of each (as argparse keeps it); positionals under ''."""
    found, key = {"": []}, ""
    for a in argv:
        if a.startswith("--"):
            key = a
            found[key] = []
        else:
            found[key].append(a)
    return found


def argv_difference(before, now):
    """The options two argvs set differently, as 'OPTION BEFORE -> NOW' (a few, then how many more)."""
    a, b = _options(before), _options(now)

    def shown(values):
        return "absent" if values is None else " ".join(values) or "set"
    changed = [f"{k or 'data'} {shown(a.get(k))} -> {shown(b.get(k))}" for k in dict.fromkeys([*b, *a]) if a.get(k) != b.get(k)]
    return few(changed) if changed else "the same options, in another order or repeated"


def run_dir_of(args, system, seed):
    return os.path.join(args.work, "runs", system["name"], f"seed{seed}")


def check_recorded(run_dir, portable):
    """A run folder's ``command.json``, where it has one, is ``portable``: another command would continue (or reuse)
    this folder's run under other settings."""
    recorded = os.path.join(run_dir, "command.json")
    if os.path.exists(recorded):
        with open(recorded) as f:
            before = json.load(f)
        if before != portable:
            raise ValueError(f"{run_dir} was trained with another command (recorded -> now: "
                             f"{argv_difference(before, portable)}): use another --work, or remove that folder to retrain")


def record_command(run_dir, portable):
    """Checks the run folder's recorded command (``check_recorded``), or records it on the first attempt."""
    check_recorded(run_dir, portable)
    recorded = os.path.join(run_dir, "command.json")
    if not os.path.exists(recorded):
        os.makedirs(run_dir, exist_ok=True)
        atomic_files.write_json(recorded, portable, indent=1)
