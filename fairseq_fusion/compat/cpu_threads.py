"""torch's CPU threads fitted to the cores that other work leaves free.

torch starts one intra-op thread per core, and at every parallel operator they wait for each other. Beside other
work on the same cores that wait is long: the quick start's training on 2 cores beside a second training ran at 1926
words/s with torch's 2 threads and 2871 with 1 (alone: 5352 with 2, 2914 with 1; 2026-11-28, docs/performance.md).

So in a command-line run (``command_line.py``) on a machine without CUDA, the plugin reads how busy this process's
cores are over a short window (``/proc/stat``, the cores of its affinity) and leaves torch one thread fewer per core
that other work keeps busy, at least one. It never overrides a choice: not where a thread variable is set
(``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``), not where torch's count differs from its default (one per core of the
affinity: ``torch.set_num_threads`` was called), not with ``FUSION_CPU_THREADS=off``. Alone it changes nothing; a
change is said at WARNING with the way to turn it off (docs/usage.md, "CPU threads").
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


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
SWITCH = "FUSION_CPU_THREADS"


def chosen_elsewhere(threads, cores, environ=None):
    """Why the fitting leaves torch's count alone, or None: a variable set, or a count other than torch's default."""
    environ = os.environ if environ is None else environ
    if environ.get(SWITCH, "").strip().lower() in ("off", "0", "no", "false"):
        return f"{SWITCH}=off"
    chosen = [v for v in THREAD_VARIABLES if environ.get(v)]
    if chosen:
        return chosen[0] + " is set"
    if threads != len(cores):
        return f"torch's thread count {threads} is not its default {len(cores)}"
    return None


def fit_to_free_cores():
    if not os.path.exists("/proc/stat"):
        return False
    import torch

    threads, cores = torch.get_num_threads(), os.sched_getaffinity(0)
    if threads < 2 or chosen_elsewhere(threads, cores) or torch.cuda.is_available():
        return False
    before = cpu_times(cores)
    time.sleep(WINDOW_S)
    busy = busy_cores(before, cpu_times(cores), len(cores))
    chosen = threads_for(threads, len(cores), busy)
    if chosen >= threads:
        return False
    torch.set_num_threads(chosen)
    logger.warning(f"fairseq-fusion: other work keeps {busy:.1f} of this process's {len(cores)} cores busy: torch uses "
                   f"{chosen} CPU thread{'s' if chosen > 1 else ''}, not {threads} ({SWITCH}=off keeps {threads}; "
                   "OMP_NUM_THREADS=N chooses)")
    return True
