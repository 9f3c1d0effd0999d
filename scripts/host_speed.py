"""The host's speed today, in two figures that a test-suite time can be read against.

fp32 matrix products (torch, 1 and 2 threads: GFLOP/s, the median of 7 rounds) and a pure-Python loop (million
simple operations a second, one core). The same script on another day tells whether a slower `make test` is the
host or the code: docs/tests.md records each measured suite time with these figures.

    .venv/bin/python scripts/host_speed.py
"""
import statistics
import time

import torch


def matmul_gflops(threads, size=512, reps=50, rounds=7):
    torch.set_num_threads(threads)
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm-up
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(reps):
            a @ b
        rates.append(2 * size ** 3 * reps / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def python_mops(n=3_000_000, rounds=5):
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        total = 0
        for i in range(n):
            total += i & 7
        rates.append(n / (time.perf_counter() - start) / 1e6)
    return statistics.median(rates)


if __name__ == "__main__":
    print(f"matmul fp32 512x512: {matmul_gflops(1):.1f} GFLOP/s on 1 thread, {matmul_gflops(2):.1f} on 2; "
          f"Python loop: {python_mops():.1f} M ops/s (torch {torch.__version__})")
