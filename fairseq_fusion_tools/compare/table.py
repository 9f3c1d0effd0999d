"""fusion-compare's results: one row per system (means and sds over seeds, the bootstrap's differences), the
markdown table, the README block and ``results.{json,md,png}``."""
import os
import statistics
import time

from .. import atomic_files, recipe_settings
from .figure import SIGNIFICANT, plot
from .protocols import CONTINUED


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
