"""Lexical probe (Emelin et al. 2019, §4.1, Fig. 3-4; A.1; A.3 Fig. 8-23).

For each layer of the frozen model (encoder and decoder; layer 0 = embedding layer), a
classifier reads the layer's state at a position and predicts the sub-word at that
position (encoder: source dictionary, decoder: target dictionary); its accuracy on held-out
data measures how much lexical content the layer keeps. Classifier (A.1): one hidden layer
of 512 units, ReLU, dropout p = 0.5.

Streaming: the states of a sample of the training split, of the early-stopping split and of
the evaluated split are written to disk as float16 (``StateStore``, capped in positions),
then the probes are trained ``group_size`` at a time reading chunks from disk, so memory
does not grow with the number of sentences. Training: Adam, linear warm-up then the rate
halved whenever the held-out accuracy does not improve, early stopping after ``patience``
such epochs (the best epoch's weights are kept), at most ``max_epochs``.

Frequency bins (A.3): see ``lexical_frequency``. POS (A.3, Fig. 16-23): see ``lexical_pos``.
Positions of special symbols (</s>, which also starts the decoder input, and <unk>) are left
out of training and evaluation.
"""
import copy
from typing import Dict, List

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..progress import progress
from .lexical_frequency import frequency_bins, sum_by_bin, type_bins  # noqa: F401  (frequency_bins re-exported)
from .lexical_pos import CATEGORIES
from .lexical_states import iter_states, side_dictionaries


class LexicalClassifier(nn.Module):
    """A.1: one hidden layer of 512 units, dropout 0.5, ReLU."""

    def __init__(self, in_dim, n_classes, hidden=512, dropout=0.5):
        super().__init__()
        self.hidden = nn.Linear(in_dim, hidden)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.out(self.dropout(F.relu(self.hidden(x))))


def write_states(model, task, split, store, max_tokens=4000, max_sentences=None, max_positions=None,
                 sample_seed=None, categories=None, desc=None):
    """Append the sub-word positions of ``split`` to ``store`` (at most ``max_positions`` per side).

    ``categories``: side -> PositionCategories (POS of each position), optional."""
    dicts = side_dictionaries(task)
    for batch in iter_states(model, task, split, max_tokens, max_sentences, desc=desc, sample_seed=sample_seed):
        for side, s in batch.items():
            keep = (s["tokens"] >= dicts[side].nspecial).nonzero().flatten()
            if max_positions is not None:
                keep = keep[: max(max_positions - store.size(side), 0)]
            cat = None
            if categories and side in categories:
                cat = categories[side](s["sentence"][keep].cpu().numpy(), s["position"][keep].cpu().numpy())
            store.append(side, s["tokens"][keep], [x[keep] for x in s["layers"]], cat)
        if max_positions is not None and all(store.size(side) >= max_positions for side in batch):
            break
    store.close()
    return store


def warmup_factor(step, warmup):
    return min(1.0, step / warmup) if warmup > 0 else 1.0


@torch.no_grad()
def evaluate(probes: Dict[int, nn.Module], store, side, n_classes, device="cpu", chunk_rows=16384, eval_rows=2048):
    """layer -> per-type correct / total counts (n_classes), per-POS-category ones, summed loss."""
    layers = list(probes)
    stats = {l: {"correct": torch.zeros(n_classes), "total": torch.zeros(n_classes), "loss": 0.0,
                 "pos_correct": torch.zeros(len(CATEGORIES)), "pos_total": torch.zeros(len(CATEGORIES))} for l in layers}
    for p in probes.values():
        p.eval()
    for tokens, cats, xs in store.chunks(side, layers, chunk_rows):
        tokens, tagged = tokens.to(device), cats >= 0
        for l, x in zip(layers, xs):
            s = stats[l]
            predicted = []
            for part, y in zip(x.split(eval_rows), tokens.split(eval_rows)):  # logits of eval_rows x classes at a time
                logits = probes[l](part.to(device))
                s["loss"] += F.cross_entropy(logits, y, reduction="sum").item()
                predicted.append(logits.argmax(-1))
            correct = torch.cat(predicted).eq(tokens).float().cpu()
            s["correct"].index_add_(0, tokens.cpu(), correct)
            s["total"].index_add_(0, tokens.cpu(), torch.ones_like(correct))
            s["pos_correct"].index_add_(0, cats[tagged], correct[tagged])
            s["pos_total"].index_add_(0, cats[tagged], torch.ones(int(tagged.sum())))
        del tokens, xs, x
    return stats


def train_group(train, valid, side, layers: List[int], n_classes, hidden=512, dropout=0.5, lr=1e-3, warmup=200,
                max_epochs=20, patience=3, batch_size=512, seed=1, device="cpu", chunk_rows=16384, log=print):
    """Train one probe per layer of ``layers`` on ``train``, early stopping on ``valid``.

    Returns (layer -> probe with its best held-out weights, layer -> per-epoch history)."""
    dim = train.meta[side]["dim"]
    torch.manual_seed(seed)
    probes = {l: LexicalClassifier(dim, n_classes, hidden, dropout).to(device) for l in layers}
    opts = {l: torch.optim.Adam(p.parameters(), lr=lr) for l, p in probes.items()}
    base_lr = {l: lr for l in layers}
    best = {l: (-1.0, None) for l in layers}
    bad = {l: 0 for l in layers}
    history = {l: [] for l in layers}
    active, step = list(layers), 0
    g = torch.Generator().manual_seed(seed)
    for epoch in range(max_epochs):
        for l in active:
            probes[l].train()
        for tokens, _, xs in train.chunks(side, active, chunk_rows, shuffle_seed=seed * 1000 + epoch):
            tokens = tokens.to(device)
            for idx in torch.randperm(len(tokens), generator=g).split(batch_size):
                step += 1
                for l, x in zip(active, xs):
                    for group in opts[l].param_groups:
                        group["lr"] = base_lr[l] * warmup_factor(step, warmup)
                    loss = F.cross_entropy(probes[l](x[idx].to(device)), tokens[idx])
                    opts[l].zero_grad()
                    loss.backward()
                    opts[l].step()
            del tokens, xs, x  # free this chunk before the next is read
        stats = evaluate({l: probes[l] for l in active}, valid, side, n_classes, device, chunk_rows)
        for l in list(active):
            n = stats[l]["total"].sum().item()
            acc, loss = stats[l]["correct"].sum().item() / n, stats[l]["loss"] / n
            history[l].append({"epoch": epoch + 1, "lr": base_lr[l], "valid_accuracy": acc, "valid_loss": loss})
            if acc > best[l][0]:
                best[l], bad[l] = (acc, copy.deepcopy(probes[l].state_dict())), 0
            else:
                bad[l] += 1
                base_lr[l] *= 0.5  # reduce on plateau
                if bad[l] >= patience:
                    active.remove(l)
        log(f"| {side} layers {layers} epoch {epoch + 1}: held-out accuracy "
            + " ".join(f"{history[l][-1]['valid_accuracy']:.3f}" for l in layers if history[l][-1]["epoch"] == epoch + 1))
        if not active:
            break
    for l, p in probes.items():
        p.load_state_dict(best[l][1])
    return probes, history


def summarize(stats, counts, n_bins):
    """Accuracy overall, per frequency bin and per POS category from the per-type counts."""
    layers = sorted(stats)
    total = stats[layers[0]]["total"]
    bins = type_bins(total > 0, counts, n_bins)
    per_bin_total = sum_by_bin(total, bins, n_bins)
    pos_total = stats[layers[0]]["pos_total"]

    def ratio(a, b):
        return [x / y if y > 0 else float("nan") for x, y in zip(a.tolist(), b.tolist())]

    return {
        "accuracy": [stats[l]["correct"].sum().item() / total.sum().item() for l in layers],
        "accuracy_by_frequency_bin": [ratio(sum_by_bin(stats[l]["correct"], bins, n_bins), per_bin_total) for l in layers],
        "positions_per_bin": [int(x) for x in per_bin_total.tolist()],
        "types_per_bin": torch.bincount(bins[bins >= 0], minlength=n_bins).tolist(),
        "accuracy_by_pos": {c: [ratio(stats[l]["pos_correct"], pos_total)[i] for l in layers] for i, c in enumerate(CATEGORIES)},
        "positions_per_pos": dict(zip(CATEGORIES, [int(x) for x in pos_total.tolist()])),
        "test_positions": int(total.sum().item()),
    }


def probe(stores, dictionaries, group_size=4, n_bins=10, log=print, **train_kwargs) -> Dict:
    """``stores``: {"train", "valid", "test"} StateStores; ``dictionaries``: side -> Dictionary.

    Per side: held-out accuracy per layer, per frequency bin, per POS category."""
    result = {}
    for side, d in dictionaries.items():
        n_layers = stores["train"].meta[side]["layers"]
        stats, history = {}, {}
        groups = [list(range(n_layers))[i:i + group_size] for i in range(0, n_layers, group_size)]
        for layers in progress(groups, desc=f"probes {side}"):
            probes, hist = train_group(stores["train"], stores["valid"], side, layers, len(d), log=log, **train_kwargs)
            stats.update(evaluate(probes, stores["test"], side, len(d), train_kwargs.get("device", "cpu")))
            history.update(hist)
            del probes
        result[side] = {
            **summarize(stats, np.asarray(d.count), n_bins),
            "train_positions": stores["train"].size(side), "valid_positions": stores["valid"].size(side),
            "epochs": [len(history[l]) for l in sorted(history)],
            "best_valid_accuracy": [max(h["valid_accuracy"] for h in history[l]) for l in sorted(history)],
            "history": [history[l] for l in sorted(history)],
        }
    return result


def plot(result, title=""):
    from ..outputs import figure_title, mark_narrow_range, new_figure, share_range
    from .lexical_states import layer_labels

    sides = list(result)
    with_pos = any(sum(result[s]["positions_per_pos"].values()) > 0 for s in sides)
    rows = 2 if with_pos else 1
    fig, axes = new_figure(rows, 1 + len(sides), figsize=(5 * (1 + len(sides)), 4 * rows), squeeze=False)
    for side in sides:
        acc = result[side]["accuracy"]
        axes[0][0].plot(range(len(acc)), acc, marker="o", label=side)
    axes[0][0].set_xticks(range(len(acc)))
    axes[0][0].set_xticklabels(layer_labels(len(acc)))
    axes[0][0].set_xlabel("layer")
    axes[0][0].set_ylabel("held-out probe accuracy")
    axes[0][0].set_title("accuracy by layer")
    figure_title(fig, f"Lexical probe {title}".strip())
    axes[0][0].legend()
    for ax, side in zip(axes[0][1:], sides):
        by_bin = result[side]["accuracy_by_frequency_bin"]
        labels = layer_labels(len(by_bin))
        for layer, accs in enumerate(by_bin):
            ax.plot(range(1, len(accs) + 1), accs, marker=".", label=labels[layer])
        ax.set_xlabel("frequency bin (1 = rarest)")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{side}: by sub-word frequency")
        ax.legend(title="layer", fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    if with_pos:
        axes[1][0].axis("off")
        for ax, side in zip(axes[1][1:], sides):
            for cat, accs in result[side]["accuracy_by_pos"].items():
                ax.plot(range(len(accs)), accs, marker=".", label=f"{cat} ({result[side]['positions_per_pos'][cat]})")
            ax.set_xticks(range(len(accs)))
            ax.set_xticklabels(layer_labels(len(accs)))
            ax.set_xlabel("layer")
            ax.set_ylabel("accuracy")
            ax.set_title(f"{side}: by part of speech")
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    accuracy_axes = [ax for row in axes for ax in row]
    share_range(accuracy_axes)  # every panel is an accuracy: one scale
    for ax in accuracy_axes:
        if ax.axison:
            mark_narrow_range(ax)
    return fig
