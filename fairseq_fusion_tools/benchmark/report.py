"""Ratios of the benchmark's repeated, interleaved runs, and the papers' own speed ratios beside them.

Each arch's runs are paired with the ``transformer`` run just before it (A B A B ...); a ratio is
arch / transformer of one pair, and the table shows the median over the pairs with its spread
(lowest-highest). FLOPs are per target token (``torch.utils.flop_counter.FlopCounterMode`` on
the real training step and the real generator); the FLOP-ideal speed ratio is transformer FLOPs /
arch FLOPs and the efficiency is measured ratio / FLOP-ideal ratio. The operator ratio is the arch's operators
(non-view aten operators of the model's forward and backward, ``measure.count_operators``) over the transformer's:
where a step is bound by the host's kernel launches, its speed ratio tends to 1 / operator ratio, whatever its FLOPs.
"""
import statistics

from ..fairseq_runs import paper_ratios


def spread(values):
    """(median, lowest, highest) of a list of ratios."""
    return statistics.median(values), min(values), max(values)


def pair_ratios(runs, arch, key, baseline="transformer"):
    """arch / baseline of each (baseline run, arch run) pair, in run order; ``key`` may name a dict entry as 'a.b'."""
    def get(r):
        v = r
        for part in key.split("."):
            v = v[part]
        return v

    ratios, last_base = [], None
    for r in runs:
        if r["arch"] == baseline:
            last_base = r
        elif r["arch"] == arch and last_base is not None:
            ratios.append(get(r) / get(last_base))
    return ratios


def summarize(runs, baseline="transformer"):
    """One row per arch: median ratios and spreads, FLOP ratios, efficiencies, the papers' ratios."""
    base_runs = [r for r in runs if r["arch"] == baseline]
    archs = list(dict.fromkeys(r["arch"] for r in runs if r["arch"] != baseline))
    rows = []
    for arch in archs:
        mine = [r for r in runs if r["arch"] == arch]
        first, beam = mine[0], mine[0]["beam"]
        row = {"arch": arch, "params": first["params"], "beam": beam, "runs": len(mine)}
        row["train"] = spread(pair_ratios(runs, arch, "train_words_per_s", baseline))
        row["decode"] = spread(pair_ratios(runs, arch, f"decode_sentences_per_s.{beam}", baseline))
        row["memory"] = first["peak_train_step_mb"] / base_runs[0]["peak_train_step_mb"]
        at = runs.index(first)  # its pair: the transformer run just before, at the same beam
        flops_base = runs[at - 1] if at > 0 and runs[at - 1]["arch"] == baseline and "flops" in runs[at - 1] else None
        if "flops" in first and flops_base is not None:
            row["flop_ideal_train"] = flops_base["flops"]["train_per_token"] / first["flops"]["train_per_token"]
            row["flop_ideal_decode"] = flops_base["flops"]["decode_per_token"][str(beam)] / first["flops"]["decode_per_token"][str(beam)]
            row["efficiency_train"] = row["train"][0] / row["flop_ideal_train"]
            row["efficiency_decode"] = row["decode"][0] / row["flop_ideal_decode"]
        if "operators" in first.get("flops", {}) and flops_base is not None and "operators" in flops_base["flops"]:
            # a step bound by the host's kernel launches runs at transformer operators / arch operators
            row["operator_ratio_train"] = (first["flops"]["operators"]["forward_backward"]
                                           / flops_base["flops"]["operators"]["forward_backward"])
        row["paper"] = paper_ratios(arch)
        rows.append(row)
    return rows


def _fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def markdown(rows, baseline="transformer"):
    lines = [f"| arch | params | beam | train ratio (spread) | FLOP-ideal | efficiency | operators | paper | "
             f"decode ratio (spread) | FLOP-ideal | efficiency | paper | memory ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        t, d = r["train"], r["decode"]
        lines.append(
            f"| {r['arch']} | {r['params'] / 1e6:.1f}M | {r['beam']} | {t[0]:.2f} ({t[1]:.2f}-{t[2]:.2f}) | "
            f"{_fmt(r.get('flop_ideal_train'))} | {_fmt(r.get('efficiency_train'))} | "
            f"{_fmt(r.get('operator_ratio_train'))} | {_fmt(r['paper'][0])} | "
            f"{d[0]:.2f} ({d[1]:.2f}-{d[2]:.2f}) | {_fmt(r.get('flop_ideal_decode'))} | {_fmt(r.get('efficiency_decode'))} | "
            f"{_fmt(r['paper'][1])} | {r['memory']:.2f} |")
    return "\n".join(lines)


MEMORY_HEADER = "peak train-step memory (MB)"


def memory_table(results, baseline="transformer"):
    """The --memory-only table: peak train-step memory and its ratio to ``baseline``."""
    base = next((r for r in results if r["arch"] == baseline), None)
    lines = [f"| arch | params | {MEMORY_HEADER} | ratio to {baseline} |", "|---|---:|---:|---:|"]
    lines += [f"| {r['arch']} | {r['params'] / 1e6:.2f}M | {r['peak_train_step_mb']:.0f} | "
              f"{r['peak_train_step_mb'] / base['peak_train_step_mb']:.2f} |" if base else "-" for r in results]
    return "\n".join(lines)
