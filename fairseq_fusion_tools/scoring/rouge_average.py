"""The per-system average ROUGE-1.5.5.pl prints with ``-a -c 95 -r 1000`` (its ``computeAverages``).

The printed ``Average_R`` (and _P, _F) is not the mean of the documents' figures but the mean of the
means of 1000 bootstrap resamples. Resample k is drawn after ``srand(k)``: N times
``int(rand(N))`` over the documents sorted as strings by their ``"EVALID.PEERID"`` key (documents
given EVAL IDs 1..N in input order sort as "1.", "10.", "100.", "11.", ...). Perl's ``rand`` is its
own ``drand48`` (Perl >= 5.20 on every platform, and the C library's before that on Linux): a 48-bit
LCG seeded with ``(seed << 16) + 0x330E``. The 1000 means are sorted, summed in that order and
divided by 1000, then printed as ``%7.5f``. We do the same float operations in the same order.
"""
import numpy as np

RESAMPLES = 1000
LCG_MULTIPLIER, LCG_INCREMENT, LCG_MASK = 0x5DEECE66D, 0xB, (1 << 48) - 1


def perl_sort_order(n):
    """Input positions in the order Perl's ``sort keys`` visits EVAL IDs 1..n."""
    return sorted(range(n), key=lambda i: f"{i + 1}.")


def bootstrap_mean(scores, resamples=RESAMPLES):
    """``scores``: one row per document (input order), columns of rounded figures -> the printed averages."""
    values = np.asarray(scores, dtype=np.float64)[perl_sort_order(len(scores))]
    n = len(values)
    if n == 0:
        return [0.0] * values.shape[1] if values.ndim == 2 else []
    # drand48 states of the 1000 seeds, uint64 arithmetic wraps mod 2^64, masked to 48 bits
    state = (np.arange(resamples, dtype=np.uint64) << np.uint64(16)) + np.uint64(0x330E)
    sums = np.zeros((resamples, values.shape[1]))
    for _ in range(n):
        state = (state * np.uint64(LCG_MULTIPLIER) + np.uint64(LCG_INCREMENT)) & np.uint64(LCG_MASK)
        picked = (float(n) * (state.astype(np.float64) * 2.0 ** -48)).astype(np.int64)  # int(rand(n))
        sums += values[picked]  # one addition per draw, in draw order, as Perl
    means = sums / n
    averages = []
    for column in means.T:
        total = 0.0
        for mean in sorted(column.tolist()):
            total += mean
        averages.append(float(f"{total / resamples:7.5f}"))
    return averages
