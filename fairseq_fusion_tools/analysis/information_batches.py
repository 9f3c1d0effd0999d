"""Streaming batches of a random sample of a binarized split (for the information probe).

Only sentence indices are held in memory; each batch is collated when it is asked for and
dropped once consumed, so memory does not grow with the number of sentences.
"""
import numpy as np
import torch

from ..progress import progress


def sample_indices(task, split, n_sentences=None, seed=1):
    """Indices of ``n_sentences`` sentences of ``split`` drawn at random (all when None or larger)."""
    task.load_dataset(split)
    size = len(task.dataset(split))
    if size == 0:
        raise ValueError(f"split {split!r} is empty")
    if n_sentences is None or n_sentences >= size:
        return np.arange(size)
    rng = np.random.RandomState(seed)
    return np.sort(rng.choice(size, n_sentences, replace=False))


def batches(task, split, indices, max_tokens, device, shuffle_seed=None, desc=None):
    """Collated batches of the sentences ``indices`` of ``split``, on ``device``.

    Length-ordered buckets of at most ``max_tokens`` tokens; the order of the buckets is
    shuffled with ``shuffle_seed`` (training) or kept (evaluation).
    """
    from fairseq import utils

    dataset = task.dataset(split)
    order = dataset.ordered_indices()
    keep = np.zeros(len(dataset), dtype=bool)
    keep[indices] = True
    batch_sampler = dataset.batch_by_size(order[keep[order]], max_tokens=max_tokens)
    if shuffle_seed is not None:
        perm = torch.randperm(len(batch_sampler), generator=torch.Generator().manual_seed(shuffle_seed))
        batch_sampler = [batch_sampler[i] for i in perm.tolist()]
    for batch in progress(batch_sampler, desc=desc or split, leave=False):
        sample = dataset.collater([dataset[i] for i in batch])
        if sample:
            yield utils.move_to_cuda(sample) if device.type == "cuda" else sample
