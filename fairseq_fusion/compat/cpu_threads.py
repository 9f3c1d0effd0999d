"""torch's CPU threads fitted to the cores that other work leaves free.

torch starts one intra-op thread per core, and at every parallel operator they wait for each other. Beside other
work on the same cores that wait is long: the quick start's training on 2 cores beside a second training ran at 1926
words/s with torch's 2 threads and 2871 with 1 (alone: 5352 with 2, 2914 with 1; 2026-11-28, docs/performance.md).

So on a machine without CUDA, where the user has set neither ``OMP_NUM_THREADS`` nor ``MKL_NUM_THREADS``, the plugin
reads how busy this process's cores are over a short window at import (``/proc/stat``, the cores of its affinity)
and leaves torch one thread fewer per core that other work keeps busy, at least one. Alone it changes nothing; the
thread count it chooses is logged; ``OMP_NUM_THREADS`` chooses instead.
"""
import logging
import os
import time

logger = logging.getLogger(__name__)
WINDOW_S = 0.1


def cpu_times(cores, stat="/proc/stat"):
    """(all, idle) jiffies summed over ``cores`` (idle with iowait; guest time is inside user time)."""
    total = idle = 0
    with open(stat) as f:
        for line in f:
            name, *fields = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
                values = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
                total += sum(values)
                idle += values[3] + values[4]
    return total, idle


def busy_cores(before, after, n_cores):
    """Cores kept busy between two ``cpu_times`` readings, 0 .. n_cores."""
    total, idle = after[0] - before[0], after[1] - before[1]
    return 0.0 if total <= 0 else n_cores * (total - idle) / total


def threads_for(threads, n_cores, busy):
    """torch's threads beside ``busy`` cores of other work: one fewer per busy core, at least 1, at most ``threads``."""
    return max(1, min(threads, n_cores - int(round(busy))))


def fit_to_free_cores():
    if os.environ.get("OMP_NUM_THREADS") or os.environ.get("MKL_NUM_THREADS") or not os.path.exists("/proc/stat"):
        return
    import torch

    threads = torch.get_num_threads()
    if threads < 2 or torch.cuda.is_available():
        return
    cores = os.sched_getaffinity(0)
    before = cpu_times(cores)
    time.sleep(WINDOW_S)
    busy = busy_cores(before, cpu_times(cores), len(cores))
    chosen = threads_for(threads, len(cores), busy)
    if chosen < threads:
        torch.set_num_threads(chosen)
        logger.info(f"other work keeps {busy:.1f} of this process's {len(cores)} cores busy: torch uses {chosen} "
                    f"CPU thread{'s' if chosen > 1 else ''}, not {threads} (OMP_NUM_THREADS=N chooses)")
