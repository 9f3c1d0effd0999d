"""fusion-compare's figure: sacreBLEU per system and subset over the seeds, and each seed's difference from its
baseline."""
import statistics

from .. import atomic_files

SIGNIFICANT = 0.05  # the p below which the table stars a difference and the plot fills its dot


def results_figure(rows, subsets, title):
    """Top: sacreBLEU of each system per test subset, bars (mean, sd over seeds) and each seed as a dot. Bottom: the
    table's Δ, each seed's sacreBLEU minus its baseline's under the row's checkpoint selection (a filled dot: p < 0.05),
    and the mean over seeds as a bar; per (system, subset) the line of all seeds has the gid "SYSTEM SUBSET", that of
    the filled ones "SYSTEM SUBSET p<0.05" (the level SIGNIFICANT)."""
    from ..outputs import figure_title, mark_narrow_range, new_figure

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
    mark_narrow_range(ax_delta)
    return figure_title(fig, title, fontsize=9)


def plot(rows, subsets, path, title):
    import matplotlib.pyplot as plt

    fig = results_figure(rows, subsets, title)
    try:
        atomic_files.save_figure(fig, path, dpi=150)
    finally:
        plt.close(fig)
