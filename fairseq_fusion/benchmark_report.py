"""Ratios of the benchmark's repeated, interleaved runs, and the papers' own speed ratios beside them.

Each arch's runs are paired with the ``transformer`` run just before it (A B A B ...); a ratio is
arch / transformer of one pair, and the table shows the median over the pairs with its spread
(lowest-highest). FLOPs are per target token (``torch.utils.flop_counter.FlopCounterMode`` on
the real training step and the real generator); the FLOP-ideal speed ratio is transformer FLOPs /
arch FLOPs and the efficiency is measured ratio / FLOP-ideal ratio.
"""
import statistics

# speed of the paper's model / its baseline, as the papers report it: (train, decode); None: not reported.
# Emelin et al. Table 5 (words/s, 4 P100); Dou et al. Table 1 (train steps/s, decode sentences/s, P40);
# Yang et al. Table 4 (En-De base) and Table 6 (En-De big), words/s and sentences/s; Liu et al. 4.1:
# "an additional 10% inference latency" with SurfaceFusion.
PAPER_RATIOS = {
    "transformer_lexical_shortcuts": (26423 / 29698, None),
    "transformer_lexical_shortcuts_ff": (23601 / 29698, None),
    "transformer_lexical_shortcuts_ff_big": (6769 / 10215, None),
    "transformer_dense": (1.69 / 1.82, 1.28 / 1.33),
    "transformer_linear_combination": (1.59 / 1.82, 1.26 / 1.33),
    "transformer_iterative_aggregation": (1.32 / 1.82, 1.22 / 1.33),
    "transformer_hierarchical_aggregation": (1.46 / 1.82, 1.25 / 1.33),
    "transformer_hierarchical_aggregation_big": (1.41 / 1.82, 1.25 / 1.33),  # Table 1 row 9, + Ldiversity (base)
    "transformer_multilayer_attention": (1.19 / 1.82, 1.05 / 1.33),
    "transformer_multilayer_attention_k3": (1.12 / 1.82, 1.00 / 1.33),
    "transformer_simplified_decoder": (71.08 / 63.93, 72.93 / 65.35),
    "transformer_simplified_decoder_big": (125.2 / 103.7, 90.5 / 74.3),
    "transformer_surface_fusion": (None, 1 / 1.1),
    "transformer_surface_fusion_soft": (None, 1 / 1.1),
    "transformer_surface_fusion_big": (None, 1 / 1.1),
    "transformer_surface_fusion_soft_big": (None, 1 / 1.1),
}


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
        row["paper"] = PAPER_RATIOS.get(arch, (None, None))
        rows.append(row)
    return rows


def _fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def markdown(rows, baseline="transformer"):
    lines = [f"| arch | params | beam | train ratio (spread) | FLOP-ideal | efficiency | paper | decode ratio (spread) | "
             f"FLOP-ideal | efficiency | paper | memory ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        t, d = r["train"], r["decode"]
        lines.append(
            f"| {r['arch']} | {r['params'] / 1e6:.1f}M | {r['beam']} | {t[0]:.2f} ({t[1]:.2f}-{t[2]:.2f}) | "
            f"{_fmt(r.get('flop_ideal_train'))} | {_fmt(r.get('efficiency_train'))} | {_fmt(r['paper'][0])} | "
            f"{d[0]:.2f} ({d[1]:.2f}-{d[2]:.2f}) | {_fmt(r.get('flop_ideal_decode'))} | {_fmt(r.get('efficiency_decode'))} | "
            f"{_fmt(r['paper'][1])} | {r['memory']:.2f} |")
    return "\n".join(lines)
