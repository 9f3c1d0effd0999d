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

``--jobs N`` trains and translates N runs at once (``compare_parallel.py``); ``--budget-from-curve CAP`` finds the
budget first, where the baseline's validation BLEU stops improving (``compare_budget.py``, ``budget/budget.json``).
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

from . import atomic_files, recipe_settings
from .data_paths import PLUGIN_DIR
from .benchmark import SIZES, fusion_archs
from fairseq_fusion.guards import save_dir_lock
from fairseq_fusion.errors import few
from fairseq_fusion_tools.user_files import fail

# optimization per size (dropout, lr, warm-up, max tokens per GPU/CPU): "small" is `make demo`'s, base and
# big are fairseq's WMT'14 En-De recipes (Vaswani et al. 2017; Ott et al. 2018)
TRAINING = {
    "tiny": ["--dropout", "0.1", "--lr", "1e-3", "--warmup-updates", "4", "--max-tokens", "1500"],  # tests only
    "small": ["--dropout", "0.1", "--lr", "2e-3", "--warmup-updates", "100", "--max-tokens", "6000"],
    "base": ["--dropout", "0.1", "--lr", "7e-4", "--warmup-updates", "4000", "--max-tokens", "4096"],
    "big": ["--dropout", "0.3", "--lr", "5e-4", "--warmup-updates", "4000", "--max-tokens", "3584"],
}
COMMON = ["--share-all-embeddings", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0",
          "--lr-scheduler", "inverse_sqrt", "--weight-decay", "0.0"]
LOG_LINE = re.compile(r"\| (train_inner|train|valid) \| (\{.*\})\s*$")
PARAMS_LINE = re.compile(r"num\. shared model params: ([\d,]+)")


def parse_system(spec):
    """``NAME=ARCH --flag value ...`` or ``ARCH`` (named after the arch) -> {name, arch, flags}."""
    name, sep, rest = spec.partition("=")
    if not sep:
        name, rest = None, spec
    words = shlex.split(rest)
    if not words or words[0].startswith("-"):
        raise ValueError(f"--system {spec!r}: expected NAME=ARCH [FLAGS...] or ARCH")
    name = (name or words[0]).strip()
    if not re.fullmatch(r"[\w.+-]+", name):
        raise ValueError(f"--system {spec!r}: the name {name!r} must be letters, digits, _ . + - (it names a folder)")
    return {"name": name, "arch": words[0], "flags": words[1:]}


def criterion_of(arch):
    from fairseq_fusion import fusion_options
    return fusion_options.default_criterion(arch)  # label_smoothed_cross_entropy unless the arch declares another


CONTINUED = "+continued"  # the name of the baseline continued for a second stage: BASELINE+continued


def paper_of(arch):
    """The paper whose protocol an arch follows: its preset's source; Vaswani et al. for fairseq's own archs and
    for fusion_transformer*."""
    from . import recipe_settings

    return recipe_settings.source_of(arch) or "vaswani"


def protocol_of(args, system):
    """{paper, stages, select} of a system: select is ``last``, ``best`` (validation loss) or ``averageN``."""
    if system.get("continues"):  # the baseline continued: its baseline's selection, a second stage
        return dict(protocol_of(args, system["continues"]), stages=2)
    if args.protocol == "same":
        return {"paper": None, "stages": 1, "select": "last"}
    paper = paper_of(system["arch"])
    average = recipe_settings.PAPERS[paper]["train"]["average"]  # None: best validation loss
    n = average["big" if args.size == "big" else "base"] if average else None
    return {"paper": paper, "stages": 2 if paper == "dou" else 1, "select": f"average{n}" if n else "best"}


def with_continued_baseline(args, systems, baseline):
    """The systems, plus the baseline continued for a second stage when a system trains in two stages."""
    if not any(protocol_of(args, s)["stages"] == 2 for s in systems):
        return systems
    base = next(s for s in systems if s["name"] == baseline)
    continued = dict(base, name=baseline + CONTINUED, continues=base)
    i = systems.index(base)
    return systems[:i + 1] + [continued] + systems[i + 1:]


def compared_with(args, system, baseline):
    """The run a system's bootstrap is against: the baseline, or the baseline continued for two-stage systems."""
    if system["name"] == baseline or system.get("continues"):
        return None
    return baseline + CONTINUED if args.protocols[system["name"]]["stages"] == 2 else baseline


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


def fairseq_logs(path):
    """(train_inner stats list, last train stats, params) from a fairseq-train log (json format); each
    train_inner entry gets ``attempt``, the number of the fairseq-train process that logged it (``run_logged``
    writes a ``# TIME COMMAND`` line before each)."""
    inner, train, params, attempt = [], None, None, 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("# "):
                attempt += 1
            m = LOG_LINE.search(line)
            if m:
                stats = json.loads(m.group(2))
                if m.group(1) == "train_inner":
                    inner.append({**stats, "attempt": attempt})
                elif m.group(1) == "train":
                    train = stats
            p = PARAMS_LINE.search(line)
            if p:
                params = int(p.group(1).replace(",", ""))
    return inner, train, params


def train_summary(log_path):
    """What the table takes from a finished run's log: updates, training words/s after warm-up, parameters.

    Words/s is words over time in ``train_step``: the sum of wpb x updates over the sum of fairseq's
    ``train_wall``, for every log interval but each process's first (the warm-up: first batches, allocator).
    fairseq's own ``wps`` is words over wall time, which counts the validations and checkpoint saves that a
    protocol places inside an interval; its median is kept as ``wps_median``. train_wall is logged in whole
    seconds: summed over the intervals, that rounding stays near 0.2 % (a per-interval median would move in
    steps of 3 %)."""
    inner, train, params = fairseq_logs(log_path)
    if not inner:
        raise ValueError(f"{log_path}: no train_inner lines (the run logs with --log-format json)")
    timed = [(prev, s) for prev, s in zip(inner, inner[1:]) if s["attempt"] == prev["attempt"]]
    words = sum(float(s["wpb"]) * (int(s["num_updates"]) - int(prev["num_updates"])) for prev, s in timed)
    seconds = sum(float(s["train_wall"]) for _, s in timed)
    return {"updates": int(inner[-1]["num_updates"]) if train is None else int(train["train_num_updates"]),
            "words_per_s": words / seconds if seconds > 0 else None, "train_seconds": seconds,
            "wps_median": statistics.median(float(s["wps"]) for _, s in timed) if timed else None,
            "wps_intervals": len(timed), "params": params,
            "train_loss": None if train is None else float(train["train_loss"])}


RUNNING = set()  # the fairseq-train processes run_logged waits on (several with --jobs)


def stop_running():
    for proc in list(RUNNING):
        if proc.poll() is None:
            proc.terminate()


def run_logged(cmd, log_path, progress=None, total=None, env=None):
    """Run ``cmd``, appending its output to ``log_path``; a progress bar over num_updates when ``total``."""
    from .progress import progress as progress_bar

    bar = progress_bar(total=total, desc=progress, unit="upd", leave=False, dynamic_ncols=True, mininterval=0.1) if total else None
    with open(log_path, "a", encoding="utf-8", buffering=1) as log:  # line by line: a killed run keeps its log
        log.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(cmd)}\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        RUNNING.add(proc)
        try:
            for line in proc.stdout:
                log.write(line)
                m = LOG_LINE.search(line) if bar is not None else None
                if m and m.group(1) == "train_inner":
                    bar.n = int(json.loads(m.group(2))["num_updates"])
                    bar.refresh()
            rc = proc.wait()
        finally:  # stopped (Ctrl-C; SIGTERM: exit_on_sigterm): fairseq-train would train on unseen, beside the next attempt
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
            RUNNING.discard(proc)
    if bar is not None:
        bar.close()
    return rc


def tail(path, n=30):
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-n:])


def reference_path(args, subset):
    given = dict(r.split("=", 1) for r in args.ref)
    path = given.get(subset, os.path.join(args.data, "tok", f"{subset}.raw.{args.target_lang}"))
    if not os.path.exists(path):
        raise FileNotFoundError(f"raw reference of subset {subset!r} not found at {path} (fusion-prepare-text writes "
                                f"tok/SUBSET.raw.LANG; else give --ref {subset}=FILE)")
    return path


def generate_command(args, checkpoint, subset):
    return [args.data, "--user-dir", PLUGIN_DIR,
            "--path", checkpoint, "--gen-subset", subset,
            "--beam", str(args.beam), "--lenpen", str(args.lenpen), "--batch-size", str(args.batch_size),
            "--required-batch-size-multiple", "1", "--max-len-a", "1.5", "--max-len-b", "10", "--remove-bpe",
            *(["--fp16"] if args.fp16 else []), *(["--cpu"] if args.cpu else []), *args.generate_args]


def tested_checkpoint(run_dir, select):
    """The checkpoint a protocol tests: the last, the best on validation loss, or the average of the last N
    interval checkpoints (written once to eval/averageN.pt)."""
    if select in ("last", "best"):
        path = os.path.join(run_dir, f"checkpoint_{select}.pt")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} not found (fairseq-train writes checkpoint_best.pt when it validates)")
        return path
    from .checkpoints import average_checkpoints

    out = os.path.join(run_dir, "eval", select + ".pt")
    if not os.path.exists(out):
        paths = average_checkpoints.last_n_checkpoints(run_dir, int(select[len("average"):]), kind="update")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        average_checkpoints.write_average(paths, out)
    return out


def evaluate(args, run_dir, subset, select):
    """sacreBLEU (detokenized, signature) and tokenized BLEU of the run's ``select`` checkpoint on ``subset``."""
    from .scoring import evaluation
    from .console_scripts import console_script

    out = os.path.join(run_dir, "eval", f"{subset}.{select}")
    if os.path.exists(out + ".json"):
        with open(out + ".json") as f:
            return json.load(f)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cmd = [console_script("fairseq-generate"), *generate_command(args, tested_checkpoint(run_dir, select), subset)]
    with open(out + ".generate.txt.part", "w", encoding="utf-8") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"fairseq-generate on {subset} failed ({shlex.join(cmd)}):\n{proc.stderr[-3000:]}")
    os.replace(out + ".generate.txt.part", out + ".generate.txt")
    refs = evaluation.read_lines(reference_path(args, subset))
    hyps = evaluation.detokenize(evaluation.read_generate_output(out + ".generate.txt")["H"], args.target_lang)
    if len(hyps) != len(refs):
        raise ValueError(f"{out}.generate.txt: {len(hyps)} translations for {len(refs)} references of {subset}")
    result = evaluation.score(hyps, refs, args.target_lang)
    atomic_files.write_lines(out + ".detok", hyps)
    atomic_files.write_json(out + ".json", result)
    return result


def bootstrap(args, run_dir, base_dir, subset, base_name, select):
    """sacreBLEU's paired bootstrap of this run against the baseline run of the same seed on ``subset``, both
    tested with the checkpoint ``select`` chooses (cached)."""
    from .scoring import evaluation

    out = os.path.join(run_dir, "eval", f"{subset}.{select}.vs_{base_name}.json")
    if os.path.exists(out):
        with open(out) as f:
            return json.load(f)
    evaluate(args, base_dir, subset, select)  # the baseline under this protocol's selection (cached)
    refs = evaluation.read_lines(reference_path(args, subset))
    base = evaluation.read_lines(os.path.join(base_dir, "eval", f"{subset}.{select}.detok"))
    hyps = evaluation.read_lines(os.path.join(run_dir, "eval", f"{subset}.{select}.detok"))
    import logging

    logging.getLogger("sacrebleu").setLevel(logging.WARNING)  # its per-test progress notes
    res = evaluation.paired_significance(refs, base, {"system": hyps}, "bs", args.bootstrap_samples, base_name)
    result = {"p_value": res["systems"][1]["p_value"], "same_output": res["systems"][1]["same_output"], "signature": res["signature"],
              "baseline": base_name, "baseline_bleu": res["systems"][0]["bleu"], "bleu": res["systems"][1]["bleu"]}
    atomic_files.write_json(out, result)
    return result


def mean_sd(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else None)


def summarize(systems, runs, subsets, baseline, protocols=None, compared=None):
    """One row per system: parameters, words/s (and its ratio to the baseline's), BLEU mean and sd over seeds per
    subset, and the bootstrap p-value of each seed against the run it is compared with (``compared``: name ->
    the baseline's name, None for the baselines; default: every other system against ``baseline``)."""
    rows = []
    compared = compared or {s["name"]: None if s["name"] == baseline else baseline for s in systems}
    base_wps = mean_sd([r["train"]["words_per_s"] for r in runs if r["system"] == baseline])[0]
    for s in systems:
        mine = sorted((r for r in runs if r["system"] == s["name"]), key=lambda r: r["seed"])
        if not mine:
            continue
        wps = mean_sd([r["train"]["words_per_s"] for r in mine])[0]
        row = {"system": s["name"], "arch": s["arch"], "flags": s["flags"], "seeds": [r["seed"] for r in mine],
               "params": mine[0]["train"]["params"], "updates": [r["train"]["updates"] for r in mine],
               "words_per_s": wps, "words_per_s_ratio": wps / base_wps if wps is not None and base_wps else None, "subsets": {},
               "protocol": (protocols or {}).get(s["name"]), "compared_with": compared.get(s["name"])}
        for subset in subsets:
            bleu = [r["eval"][subset]["sacrebleu"]["score"] for r in mine if subset in r["eval"]]
            tok = [r["eval"][subset]["tokenized_bleu"]["score"] for r in mine if subset in r["eval"]]
            row["subsets"][subset] = {
                "sacrebleu": bleu, "sacrebleu_mean_sd": mean_sd(bleu), "tokenized_bleu": tok, "tokenized_bleu_mean_sd": mean_sd(tok),
                "p_values": [r["significance"].get(subset, {}).get("p_value") for r in mine] if row["compared_with"] else None,
                "deltas": [difference(r["significance"].get(subset, {})) for r in mine] if row["compared_with"] else None,
                "same_output": [bool(r["significance"].get(subset, {}).get("same_output")) for r in mine]}
        rows.append(row)
    return rows


def _fmt(mean_sd_pair, digits=2):
    m, sd = mean_sd_pair
    return "-" if m is None else f"{m:.{digits}f}" + ("" if sd is None else f" ± {sd:.{digits}f}")


SIGNIFICANT = 0.05  # the p below which the table stars a difference and the plot fills its dot


def difference(significance):
    """sacreBLEU of the run minus its baseline's, both with the run's checkpoint selection (the bootstrap's scores):
    the baseline's row may show another selection, so the means of two rows do not give it."""
    if significance.get("bleu") is None or significance.get("baseline_bleu") is None:
        return None
    return significance["bleu"] - significance["baseline_bleu"]


def _fmt_p(p, same_output, delta=None):
    if same_output:
        return "same output"
    if p is None:
        return "-"
    p_text = f"{p:.3f}{'*' if p < SIGNIFICANT else ''}"
    return p_text if delta is None else f"{delta:+.2f} ({p_text})"


def protocol_text(row, baseline):
    """The protocol cell: whose protocol, its stages, the tested checkpoint, what the p-values are against."""
    p = row["protocol"]
    select = {"last": "last checkpoint", "best": "best valid loss"}.get(p["select"]) or \
        f"average of the last {p['select'][len('average'):]}"
    who = "" if p["paper"] is None else recipe_settings.PAPERS[p["paper"]]["title"].split(" (")[0] + ": "
    if row["system"].endswith(CONTINUED) and p["stages"] == 2:
        stages = f"`{baseline}` continued as long as a second stage; "
    elif p["stages"] == 2:
        stages = f"2 stages, from `{baseline}`; "
    else:
        stages = ""
    against = "" if row["compared_with"] in (None, baseline) else f"; p vs `{row['compared_with']}`"
    return who + stages + select + against


def markdown(rows, subsets, baseline):
    with_protocol = any(r.get("protocol") for r in rows)
    head = "| system |" + (" protocol |" if with_protocol else "") + " params | train words/s (ratio) |"
    rule = "|---|" + ("---|" if with_protocol else "") + "---:|---:|"
    for subset in subsets:
        head += f" {subset} sacreBLEU | {subset} tok. BLEU | {subset} Δ (p) per seed |"
        rule += "---:|---:|---|"
    lines = [head, rule]
    for r in rows:
        what = r["arch"] + ("" if not r["flags"] else " " + " ".join(r["flags"]))
        name = f"`{r['system']}`" if r["system"] == r["arch"] and not r["flags"] else f"`{r['system']}` (`{what}`)"
        params = "-" if r["params"] is None else f"{r['params'] / 1e6:.2f}M"
        ratio = "" if r["words_per_s_ratio"] is None else f" ({r['words_per_s_ratio']:.2f})"
        line = f"| {name} |" + (f" {protocol_text(r, baseline)} |" if with_protocol else "") + \
            f" {params} | {'-' if r['words_per_s'] is None else format(r['words_per_s'], '.0f')}{ratio} |"
        for subset in subsets:
            c = r["subsets"][subset]
            n = len(c["p_values"] or [])
            p = "baseline" if c["p_values"] is None else ", ".join(_fmt_p(v, same, d) for v, same, d in zip(
                c["p_values"], c.get("same_output") or [False] * n, c.get("deltas") or [None] * n))
            line += f" {_fmt(c['sacrebleu_mean_sd'])} | {_fmt(c['tokenized_bleu_mean_sd'])} | {p} |"
        lines.append(line)
    return "\n".join(lines)


def results_figure(rows, subsets, title):
    """Top: sacreBLEU of each system per test subset, bars (mean, sd over seeds) and each seed as a dot. Bottom: the
    table's Δ, each seed's sacreBLEU minus its baseline's under the row's checkpoint selection (a filled dot: p < 0.05),
    and the mean over seeds as a bar; per (system, subset) the line of all seeds has the gid "SYSTEM SUBSET", that of
    the filled ones "SYSTEM SUBSET p<0.05" (the level SIGNIFICANT)."""
    from .outputs import figure_title, new_figure

    fig, (ax, ax_delta) = new_figure(2, 1, sharex=True, figsize=(max(5.0, 1.0 + 0.9 * len(rows)), 6.4))
    width = 0.8 / len(subsets)
    for j, subset in enumerate(subsets):
        xs = [i + (j - (len(subsets) - 1) / 2) * width for i in range(len(rows))]
        means = [r["subsets"][subset]["sacrebleu_mean_sd"][0] or 0.0 for r in rows]
        sds = [r["subsets"][subset]["sacrebleu_mean_sd"][1] or 0.0 for r in rows]
        color = ax.bar(xs, means, width, yerr=sds, capsize=3, label=subset).patches[0].get_facecolor()
        for x, r in zip(xs, rows):  # each seed as a dot
            seeds = r["subsets"][subset]["sacrebleu"]
            ax.plot([x] * len(seeds), seeds, "k.", markersize=3)
            deltas, ps = r["subsets"][subset].get("deltas"), r["subsets"][subset].get("p_values")
            if not deltas or None in deltas:
                continue  # a baseline, or a run from before the table had Δ
            ax_delta.bar([x], [statistics.mean(deltas)], width, color=color, alpha=0.5)
            ax_delta.plot([x] * len(deltas), deltas, "o", color="k", markerfacecolor="none", markersize=4,
                          gid=f"{r['system']} {subset}")
            significant = [d for d, p in zip(deltas, ps) if p is not None and p < SIGNIFICANT]
            ax_delta.plot([x] * len(significant), significant, "o", color="k", markersize=4,
                          gid=f"{r['system']} {subset} p<{SIGNIFICANT}")
    ax_delta.axhline(0.0, color="k", linewidth=0.8)
    ax_delta.set_xticks(range(len(rows)))
    ax_delta.set_xticklabels([r["system"] for r in rows], rotation=90, fontsize=7)
    ax.set_ylabel("sacreBLEU (mean ± sd over seeds)")
    ax_delta.set_ylabel(f"Δ vs baseline, per seed\n(filled: p < {SIGNIFICANT})")
    ax.legend(fontsize=7)
    return figure_title(fig, title, fontsize=9)


def plot(rows, subsets, path, title):
    import matplotlib.pyplot as plt

    fig = results_figure(rows, subsets, title)
    try:
        atomic_files.save_figure(fig, path, dpi=150)
    finally:
        plt.close(fig)


def machine():
    import platform

    import torch
    return {"platform": platform.platform(), "cpus": os.cpu_count(), "torch": torch.__version__,
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


README_MARKER = "RESULTS TABLE"


def readme_markers(marker=README_MARKER):
    return f"<!-- {marker} -->", f"<!-- /{marker} -->"


def update_readme(path, block, marker=README_MARKER):
    """Replace what stands between the ``marker`` lines of ``path`` (RESULTS TABLE) with ``block``."""
    begin, end = readme_markers(marker)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"--readme {path}: expected one '{begin}' line followed by one '{end}' line")
    head, rest = text.split(begin)
    _, tail_ = rest.split(end)
    atomic_files.write_text(path, head + begin + "\n" + block.strip() + "\n" + end + tail_)


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
                             "improving, trained for at most CAP updates (compare_budget.py; WORK/budget/budget.json).")
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


def run_one(args, system, seed, label, progress=True):
    """Train (or continue, or reuse) one run; returns its train summary. ``progress``: a progress bar (one run at
    a time)."""
    from .console_scripts import console_script

    run_dir = run_dir_of(args, system, seed)
    done = os.path.join(run_dir, "train.json")
    cmd = train_command(args, system, seed, run_dir)
    save_dir_lock.check_free(run_dir)  # a training holds the folder (another fusion-compare's): one line, untouched
    record_command(run_dir, portable_command(cmd))
    log = os.path.join(run_dir, "train.log")
    if os.path.exists(done):
        print(f"| {label}: trained before, reused", flush=True)
        with open(done) as f:
            recorded_summary = json.load(f)
        if not os.path.exists(log):
            return recorded_summary
        summary = train_summary(log)  # the log is the record (train.json marks the run finished): read it again
        if summary != recorded_summary:
            atomic_files.write_json(done, summary)
        return summary
    resumed = os.path.exists(os.path.join(run_dir, "checkpoint_last.pt"))
    print(f"| {label}: {'continuing from checkpoint_last.pt' if resumed else 'training'} (log {log})", flush=True)
    rc = run_logged([console_script("fairseq-train"), *cmd], log, progress=label,
                    total=args.max_update if progress else None)
    if rc != 0:
        raise RuntimeError(f"fairseq-train of {label} exited {rc}; the last lines of {log}:\n{tail(log)}")
    summary = train_summary(log)
    if args.max_update and summary["updates"] != args.max_update:
        raise RuntimeError(f"{label} stopped at {summary['updates']} updates, not --max-update {args.max_update}: see {log}")
    atomic_files.write_json(done, summary)
    return summary


def exit_on_sigterm(signum, frame):
    """fusion-compare's SIGTERM handler: exit by unwinding, so ``run_logged`` stops its fairseq-train."""
    sys.exit(128 + signum)


def write_results(args, systems, runs, baseline, command, complete, compared=None):
    rows = summarize(systems, runs, args.test_subsets, baseline, args.protocols, compared)
    table = markdown(rows, args.test_subsets, baseline)
    signature = runs[0]["eval"][args.test_subsets[0]]["sacrebleu"]["signature"]
    budget = f"{args.max_update} updates" if args.max_update else f"{args.max_minutes:g} minutes of training"
    if args.budget_from_curve:
        budget += (f" (where `{baseline}`'s validation BLEU stopped improving: the first validation within "
                   f"{args.budget_tolerance:g} BLEU of its best, `{args.work}/budget/budget.json`)")
    budget += " a stage" if any(s.get("continues") for s in systems) else ""
    block = (f"{table}\n\n{'' if complete else '**Incomplete** (runs still to come). '}"
             f"{len(args.seeds)} seed{'s' if len(args.seeds) > 1 else ''} ({', '.join(map(str, args.seeds))}), {budget} each, size `{args.size}`, beam {args.beam}; "
             f"mean ± sd over seeds; Δ: sacreBLEU minus that of `{baseline}` (or the row's `p vs`) of the same seed, "
             f"both with the row's checkpoint selection (the baseline's row shows its own); p: sacreBLEU's paired "
             f"bootstrap ({args.bootstrap_samples} samples) of the same pair (* p < {SIGNIFICANT}; `same output`: translations identical to the baseline's, "
             f"not tested); words/s: words over time in training steps (fairseq's train_wall: validation "
             f"and checkpoint saving left out), after the first log interval"
             f"{f' ({args.jobs} runs at once on one machine: not comparable between systems)' if args.jobs > 1 else ''}"
             f". sacreBLEU signature: `{signature}`.\n\n"
             f"{time.strftime('%Y-%m-%d')}, {machine()['platform']}, {machine()['cpus']} CPUs"
             f"{'' if not machine()['cuda'] else ', ' + machine()['cuda']}: `{command}`")
    out = os.path.join(args.work, "results")
    atomic_files.write_json(out + ".json", {
        "rows": rows, "runs": runs, "baseline": baseline, "command": command, "complete": complete,
        "machine": machine(), "date": time.strftime("%Y-%m-%d"), "settings": {
            k: v for k, v in vars(args).items() if k not in ("readme", "dry_run", "protocols")}})
    atomic_files.write_text(out + ".md", block + "\n")
    plot(rows, args.test_subsets, out + ".png", f"{os.path.basename(os.path.normpath(args.data))}: {budget}, "
         f"{len(args.seeds)} seeds, size {args.size}, beam {args.beam}")
    if args.readme and complete:
        update_readme(args.readme, block, args.readme_marker)
        print(f"| wrote the table into {args.readme}")
    print(f"| wrote {out}.json, {out}.md, {out}.png")
