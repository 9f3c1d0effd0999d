"""Sub-word frequency bins (Emelin et al. 2019, A.3, Fig. 8-15).

The sub-word types seen in the analysed positions, ordered by their count in the training
data (the side's dictionary counts), split into ``n_bins`` groups of (nearly) equal numbers
of types; bin 0 (plotted as 1) holds the least frequent types. The analyses accumulate
per-type counts while streaming and bin them at the end, so no position is kept.
"""
import torch


def type_bins(seen, counts, n_bins=10) -> torch.Tensor:
    """Bin of every type id (-1 for types not seen): ``seen`` is a bool mask over the vocabulary."""
    types = seen.nonzero().flatten().tolist()
    order = sorted(types, key=lambda t: (counts[t], t))
    bins = torch.full((len(seen),), -1, dtype=torch.long)
    for b, group in enumerate(torch.tensor(order, dtype=torch.long).tensor_split(n_bins)):
        bins[group] = b
    return bins


def frequency_bins(tokens, counts, n_bins=10) -> torch.Tensor:
    """Bin of every position's sub-word (types of ``tokens`` split into equal-size groups)."""
    vocab = max(int(tokens.max()) + 1, len(counts))
    seen = torch.zeros(vocab, dtype=torch.bool)
    seen[tokens] = True
    return type_bins(seen, counts, n_bins)[tokens]


def sum_by_bin(per_type, bins, n_bins):
    """Sum a per-type tensor (vocab, or vocab x K) over the types of each bin."""
    keep = bins >= 0
    out = torch.zeros((n_bins,) + tuple(per_type.shape[1:]), dtype=per_type.dtype)
    return out.index_add_(0, bins[keep], per_type[keep])
