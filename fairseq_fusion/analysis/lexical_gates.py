"""Activation statistics of the lexical shortcut gates (Emelin et al. 2019, A.3, last
paragraph; the gate r of Eq. 9-10).

For every attention with shortcuts (encoder self-attention, decoder self-attention, decoder
encoder-attention), the key gate r^K and value gate r^V at every non-padding position and
feature: mean, standard deviation, share above 0.5 (the lexical side dominates) and a
histogram, per layer. r = 1 takes only the shortcut (E), r = 0 only the hidden state.
"""
from typing import Dict

import torch

from ..modules.lexical_shortcuts import ShortcutMultiheadAttention
from .common import capture, iterate_batches

HIST_BINS = 20


def gate_sites(model) -> Dict[str, str]:
    """'encoder.layers.0.self_attn' -> its name, for every attention with shortcuts."""
    sites = [n for n, m in model.named_modules() if isinstance(m, ShortcutMultiheadAttention)]
    if not sites:
        raise ValueError(
            "this checkpoint has no lexical shortcuts (trained without --lexical-shortcuts or "
            "--lexical-shortcuts-enc-dec): there are no gates to analyse"
        )
    return sites


@torch.no_grad()
def gate_statistics(model, task, split, max_tokens=4000, max_sentences=None):
    sites = gate_sites(model)
    names = [f"{s}.{g}" for s in sites for g in ("k_gate", "v_gate")]
    pad = task.source_dictionary.pad()
    acc = {n: {"sum": 0.0, "sq": 0.0, "n": 0, "above": 0, "hist": torch.zeros(HIST_BINS)} for n in names}
    for sample in iterate_batches(task, split, max_tokens, max_sentences, model=model, desc="gates"):
        net = sample["net_input"]
        with capture(model, names) as rec:
            model(**net)
        for name in names:
            # positions of the keys: source for the encoder and encoder-attention, else target
            tokens = net["prev_output_tokens"] if name.startswith("decoder") and ".self_attn." in name else net["src_tokens"]
            keep = tokens.ne(pad).t()
            r = rec[name][0][keep].float().flatten().cpu()
            a = acc[name]
            a["sum"] += r.sum().item()
            a["sq"] += (r * r).sum().item()
            a["n"] += r.numel()
            a["above"] += int((r > 0.5).sum())
            a["hist"] += torch.histc(r, bins=HIST_BINS, min=0.0, max=1.0)
    result = {}
    for name, a in acc.items():
        mean = a["sum"] / a["n"]
        result[name] = {
            "mean": mean, "std": max(a["sq"] / a["n"] - mean * mean, 0.0) ** 0.5,
            "share_above_0.5": a["above"] / a["n"], "values": a["n"],
            "histogram": (a["hist"] / a["n"]).tolist(),
        }
    return result


def plot(result, title=""):
    from .common import new_figure

    fig, axes = new_figure(1, 2, figsize=(12, 4))
    groups = {}
    for name, stats in result.items():
        site, gate = name.rsplit(".", 1)
        stack, _, layer, attn = site.split(".")
        groups.setdefault((stack, attn, gate), []).append((int(layer) + 1, stats))
    for (stack, attn, gate), rows in sorted(groups.items()):
        rows.sort(key=lambda r: r[0])
        layers = [r[0] for r in rows]
        means = [r[1]["mean"] for r in rows]
        stds = [r[1]["std"] for r in rows]
        axes[0].errorbar(layers, means, yerr=stds, marker="o", capsize=3, label=f"{stack} {attn} r^{gate[0].upper()}")
        hist = torch.tensor([r[1]["histogram"] for r in rows]).mean(0)
        axes[1].plot((torch.arange(HIST_BINS) + 0.5) / HIST_BINS, hist, marker=".", label=f"{stack} {attn} r^{gate[0].upper()}")
    axes[0].set_xticks(sorted({r[0] for rows in groups.values() for r in rows}))
    axes[0].axhline(0.5, color="grey", lw=0.5)
    axes[0].set_xlabel("layer")
    axes[0].set_ylabel("gate mean (+- std)")
    axes[0].set_title(f"lexical shortcut gates {title}".strip())
    axes[0].legend(fontsize=7)
    axes[1].set_xlabel("gate value (1 = lexical)")
    axes[1].set_ylabel("share of values (mean over layers)")
    axes[1].legend(fontsize=7)
    return fig
