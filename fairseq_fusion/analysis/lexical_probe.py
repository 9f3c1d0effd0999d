"""Lexical probe (Emelin et al. 2019, §4.1, Fig. 3-4; A.1; A.3 Fig. 8-15).

For each layer of the frozen model (encoder and decoder; layer 0 = embedding layer), a
classifier reads the layer's state at a position and predicts the sub-word at that
position; its accuracy on held-out data measures how much lexical content the layer keeps.
Classifier (A.1): one hidden layer of 512 units, ReLU, dropout p = 0.5; trained with Adam
and cross-entropy on the states of one split (default valid), evaluated on another (test).

Frequency bins (A.3): the sub-word types of the held-out positions, ordered by their count
in the training data (the dictionary's counts), split into 10 groups of (nearly) equal
number of types; bin 1 holds the least frequent, bin 10 the most frequent. Accuracy per bin
is over the held-out positions whose sub-word falls in it. Positions of special symbols
(</s>, which also starts the decoder input, and <unk>) are left out of training and test.
"""
from typing import Dict, List

import torch
import torch.nn as nn
import torch.nn.functional as F


class LexicalClassifier(nn.Module):
    """A.1: one hidden layer of 512 units, dropout 0.5, ReLU."""

    def __init__(self, in_dim, n_classes, hidden=512, dropout=0.5):
        super().__init__()
        self.hidden = nn.Linear(in_dim, hidden)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.out(self.dropout(F.relu(self.hidden(x))))


def train_classifier(x, y, n_classes, epochs=5, batch_size=512, lr=1e-3, seed=1, hidden=512, dropout=0.5):
    torch.manual_seed(seed)
    clf = LexicalClassifier(x.size(1), n_classes, hidden, dropout).to(x.device)
    opt = torch.optim.Adam(clf.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    clf.train()
    for _ in range(epochs):
        for idx in torch.randperm(x.size(0), generator=g).split(batch_size):
            loss = F.cross_entropy(clf(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return clf.eval()


@torch.no_grad()
def predict(clf, x, batch_size=4096):
    return torch.cat([clf(chunk).argmax(-1) for chunk in x.split(batch_size)])


def frequency_bins(tokens, counts, n_bins=10) -> torch.Tensor:
    """Bin (0 = least frequent) of every position's sub-word: types split into equal-size groups."""
    types = torch.unique(tokens)
    order = sorted(types.tolist(), key=lambda t: (counts[t], t))
    bin_of = {}
    for b, group in enumerate(torch.tensor(order).tensor_split(n_bins)):
        for t in group.tolist():
            bin_of[t] = b
    return torch.tensor([bin_of[t] for t in tokens.tolist()])


def subwords_only(states, n_special):
    """Drop the positions of special symbols (</s>, <unk>, ...): they are not sub-words."""
    keep = states["tokens"] >= n_special
    return {"tokens": states["tokens"][keep], "layers": [x[keep] for x in states["layers"]]}


def probe(train_states, test_states, n_classes, counts, n_special=4, n_bins=10, **train_kwargs) -> Dict:
    """Accuracy per layer and per frequency bin, for each side (sub-word positions only)."""
    result = {}
    for side in train_states:
        tr, te = subwords_only(train_states[side], n_special), subwords_only(test_states[side], n_special)
        bins = frequency_bins(te["tokens"], counts, n_bins)
        acc: List[float] = []
        acc_bins: List[List[float]] = []
        for layer, (x_tr, x_te) in enumerate(zip(tr["layers"], te["layers"])):
            clf = train_classifier(x_tr, tr["tokens"], n_classes, **train_kwargs)
            correct = predict(clf, x_te).eq(te["tokens"]).float()
            acc.append(correct.mean().item())
            acc_bins.append([correct[bins == b].mean().item() if (bins == b).any() else float("nan") for b in range(n_bins)])
        result[side] = {
            "accuracy": acc, "accuracy_by_frequency_bin": acc_bins,
            "train_positions": int(tr["tokens"].numel()), "test_positions": int(te["tokens"].numel()),
            "positions_per_bin": torch.bincount(bins, minlength=n_bins).tolist(),
        }
    return result


def plot(result, title=""):
    from .common import new_figure
    from .lexical_states import layer_labels

    sides = list(result)
    fig, axes = new_figure(1, 1 + len(sides), figsize=(5 * (1 + len(sides)), 4))
    for side in sides:
        acc = result[side]["accuracy"]
        axes[0].plot(range(len(acc)), acc, marker="o", label=side)
    axes[0].set_xticks(range(len(acc)))
    axes[0].set_xticklabels(layer_labels(len(acc)))
    axes[0].set_xlabel("layer")
    axes[0].set_ylabel("held-out probe accuracy")
    axes[0].set_title(f"lexical probe {title}".strip())
    axes[0].legend()
    for ax, side in zip(axes[1:], sides):
        by_bin = result[side]["accuracy_by_frequency_bin"]
        labels = layer_labels(len(by_bin))
        for layer, accs in enumerate(by_bin):
            ax.plot(range(1, len(accs) + 1), accs, marker=".", label=labels[layer])
        ax.set_xlabel("frequency bin (1 = rarest)")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{side}: accuracy by sub-word frequency")
        ax.legend(title="layer", fontsize=7)
    return fig
