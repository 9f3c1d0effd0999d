"""Activation statistics of the lexical shortcut gates (Emelin et al. 2019, A.3, last
paragraph; the gate r of Eq. 9-10).

For every attention with shortcuts (encoder self-attention, decoder self-attention, decoder
encoder-attention), the key gate r^K and value gate r^V at every non-padding key position
and feature: mean, standard deviation, share above 0.5 (the lexical side dominates) and a
histogram, per layer; and mean / std / share by frequency bin of the sub-word at the key
position (A.3's bins: source dictionary for source keys, target dictionary for target keys).
r = 1 takes only the shortcut (E), r = 0 only the hidden state. Streams: per gate, sums per
sub-word type and a histogram are accumulated batch by batch.
"""
from typing import Dict

import torch

from fairseq_fusion.modules.lexical_shortcuts import ShortcutMultiheadAttention
from .common import MissingTechnique, capture, iterate_batches
from .lexical_frequency import sum_by_bin, type_bins

HIST_BINS = 20


def gate_sites(model) -> Dict[str, str]:
    """'encoder.layers.0.self_attn' -> its name, for every attention with shortcuts."""
    sites = [n for n, m in model.named_modules() if isinstance(m, ShortcutMultiheadAttention)]
    if not sites:
        raise MissingTechnique(
            "this checkpoint has no lexical shortcuts (trained without --lexical-shortcuts or "
            "--lexical-shortcuts-enc-dec): there are no gates to analyse"
        )
    return sites


def keys_are_target(name):
    """Decoder self-attention gates sit at target positions; the others at source positions."""
    return name.startswith("decoder") and ".self_attn." in name


class GateAccumulator:
    """Per gate and key sub-word type: sum, sum of squares, count and count above 0.5 of r
    (over positions and features) and the number of positions; and a histogram."""

    def __init__(self, names, vocab_sizes):
        self.acc = {n: {"stats": torch.zeros(vocab_sizes[n], 5, dtype=torch.float64),
                        "hist": torch.zeros(HIST_BINS, dtype=torch.float64)} for n in names}

    def add(self, name, r, tokens):
        """``r``: N x C gate values at N key positions, ``tokens``: N sub-word ids."""
        r = r.double().cpu()
        stats = torch.stack([r.sum(1), (r * r).sum(1), torch.full((len(r),), float(r.size(1)), dtype=torch.float64),
                             (r > 0.5).sum(1).double(), torch.ones(len(r), dtype=torch.float64)], 1)
        a = self.acc[name]
        a["stats"].index_add_(0, tokens.cpu(), stats)
        a["hist"] += torch.histc(r.flatten(), bins=HIST_BINS, min=0.0, max=1.0)

    def result(self, counts, n_bins=10) -> Dict:
        """``counts``: gate name -> the dictionary counts of its key side."""
        out = {}
        for name, a in self.acc.items():
            s, t = a["stats"].sum(0).tolist(), a["stats"]
            bins = type_bins(t[:, 2] > 0, counts[name], n_bins)
            by_bin = sum_by_bin(t, bins, n_bins)
            out[name] = {**moments(*s[:4]), "values": int(s[2]), "histogram": (a["hist"] / s[2]).tolist(),
                         "by_frequency_bin": {k: [moments(*row.tolist()[:4])[k] for row in by_bin]
                                              for k in ("mean", "std", "share_above_0.5")},
                         "positions_per_bin": by_bin[:, 4].long().tolist()}
        return out


def moments(total, squares, n, above):
    if n == 0:
        return {"mean": float("nan"), "std": float("nan"), "share_above_0.5": float("nan")}
    mean = total / n
    return {"mean": mean, "std": max(squares / n - mean * mean, 0.0) ** 0.5, "share_above_0.5": above / n}


@torch.no_grad()
def gate_statistics(model, task, split, max_tokens=4000, max_sentences=None, n_bins=10):
    sites = gate_sites(model)
    names = [f"{s}.{g}" for s in sites for g in ("k_gate", "v_gate")]
    pad = task.source_dictionary.pad()
    dicts = {n: task.target_dictionary if keys_are_target(n) else task.source_dictionary for n in names}
    acc = GateAccumulator(names, {n: len(d) for n, d in dicts.items()})
    for sample in iterate_batches(task, split, max_tokens, max_sentences, model=model, desc="gates"):
        net = sample["net_input"]
        with capture(model, names) as rec:
            model(**net)
        for name in names:
            tokens = net["prev_output_tokens"] if keys_are_target(name) else net["src_tokens"]
            keep = tokens.ne(pad).t()  # T x B, as r
            acc.add(name, rec[name][0][keep], tokens.t()[keep])
    return acc.result({n: d.count for n, d in dicts.items()}, n_bins)


def site_groups(gates):
    """(stack, attention, gate) -> [(layer 1-based, stats)] sorted by layer."""
    groups = {}
    for name, stats in gates.items():
        site, gate = name.rsplit(".", 1)
        stack, _, layer, attn = site.split(".")
        groups.setdefault((stack, attn, gate), []).append((int(layer) + 1, stats))
    return {k: sorted(v, key=lambda r: r[0]) for k, v in sorted(groups.items())}


ATTENTION_NAMES = {"self_attn": "self-attention", "encoder_attn": "encoder-attention"}


def plot(results, title=""):
    """``results``: checkpoint label -> gate statistics. One row per gate (stack, attention, r^K or r^V), columns: mean
    (+- std band) by layer, mean by frequency bin, histogram of the values; the checkpoints overlaid, each in its own
    colour, line style and marker (one legend below). The mean panels span the gates' range [0, 1] in every row."""
    from ..outputs import checkpoint_styles, figure_title, integer_axis, new_figure

    groups = {label: site_groups(gates) for label, gates in results.items()}
    rows = sorted({key for g in groups.values() for key in g},  # encoder self-, decoder self-, encoder-attention
                  key=lambda k: (k[0] != "encoder", k[1] != "self_attn", k))
    fig, axes = new_figure(len(rows), 3, figsize=(13, 1.2 + 2.2 * len(rows)), squeeze=False, sharex="col")
    for (label, sites), style in zip(groups.items(), checkpoint_styles(len(groups))):
        for ax_row, key in zip(axes, rows):
            if key not in sites:
                continue
            layers, stats = [r[0] for r in sites[key]], [r[1] for r in sites[key]]
            mean, std = torch.tensor([s["mean"] for s in stats]), torch.tensor([s["std"] for s in stats])
            ax_row[0].plot(layers, mean, label=label, **style)
            ax_row[0].fill_between(layers, mean - std, mean + std, color=style["color"], alpha=0.15, linewidth=0)
            by_bin = torch.tensor([s["by_frequency_bin"]["mean"] for s in stats]).nanmean(0)
            ax_row[1].plot(range(1, len(by_bin) + 1), by_bin, label=label, markersize=4, **style)
            hist = torch.tensor([s["histogram"] for s in stats]).mean(0)
            ax_row[2].plot((torch.arange(HIST_BINS) + 0.5) / HIST_BINS, hist, label=label, markersize=4, **style)
    for ax_row, (stack, attn, gate) in zip(axes, rows):
        ax_row[0].axhline(0.5, color="grey", lw=0.5)
        for ax in ax_row[:2]:  # gate means on the gate's range: the same scale in every row, no zoom into noise
            ax.set_ylim(0, 1)
        ax_row[0].set_ylabel(f"{stack} {ATTENTION_NAMES.get(attn, attn)}\n$r^{gate[0].upper()}$ mean (+- std)", fontsize=8)
        ax_row[1].set_ylabel("mean over layers", fontsize=8)
        ax_row[2].set_ylabel("share of values", fontsize=8)
        integer_axis(ax_row[0])
        integer_axis(ax_row[1])
    for ax, name in zip(axes[0], ("gate mean by layer", "gate mean by frequency bin", "gate values (mean over layers)")):
        ax.set_title(name, fontsize=10)
    axes[-1][0].set_xlabel("layer")
    axes[-1][1].set_xlabel("frequency bin of the key sub-word (1 = rarest)")
    axes[-1][2].set_xlabel("gate value (1 = lexical)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)), fontsize=8, handlelength=4)
    return figure_title(fig, f"Lexical shortcut gates {title}".strip())
