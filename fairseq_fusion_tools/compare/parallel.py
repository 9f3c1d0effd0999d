"""fusion-compare ``--jobs N``: N runs train (and are then translated) at once, e.g. many small models on one GPU.

Each run is trained by ``training.run_one`` and translated by ``evaluation.evaluate`` under every checkpoint selection
the table will ask of it (its own, and those of the systems tested against it), in a pool of N threads that each
wait on one fairseq-train or fairseq-generate process. A second stage (Dou et al.'s archs, the baseline continued)
starts when the baseline run of its seed has finished. The table is then made as without ``--jobs``, from the cached
runs and translations (the paired bootstraps run there, in this process). A run that fails stops new starts; the runs
in flight finish (resumable), then the command fails with the first error.
"""
import os
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from .evaluation import evaluate
from .training import run_one, stop_running


def selections(args, systems, compared):
    """Every checkpoint selection each system's runs are translated with."""
    need = {s["name"]: {args.protocols[s["name"]]["select"]} for s in systems}
    for s in systems:
        against = compared[s["name"]]
        if against is not None:
            need[against].add(args.protocols[s["name"]]["select"])
    return need


def depends_on(args, system):
    """The system whose run of the same seed must finish first (a second stage starts from it), or None."""
    if system.get("continues"):
        return system["continues"]["name"]
    if args.protocols[system["name"]]["stages"] == 2:
        return args.baseline
    return None


def train_and_translate_all(args, systems, compared, jobs):
    need = selections(args, systems, compared)
    pending = [(seed, s) for seed in args.seeds for s in systems]
    done, lock, total = set(), threading.Lock(), len(pending)

    def one(seed, system):
        label = f"{system['name']} seed {seed}"
        run_one(args, system, seed, label, progress=False)
        run_dir = os.path.join(args.work, "runs", system["name"], f"seed{seed}")
        for select in sorted(need[system["name"]]):
            for subset in args.test_subsets:
                evaluate(args, run_dir, subset, select)
        with lock:
            done.add((seed, system["name"]))
            print(f"| [{len(done)}/{total}] {label}: trained and translated", flush=True)

    def ready():
        return [(seed, s) for seed, s in pending
                if depends_on(args, s) is None or (seed, depends_on(args, s)) in done]

    running, error = {}, None
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        try:
            while pending or running:
                for seed, s in (ready() if error is None else [])[:max(0, jobs - len(running))]:
                    pending.remove((seed, s))
                    running[pool.submit(one, seed, s)] = (seed, s)
                if not running:
                    break  # nothing can start: after an error
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    running.pop(future)
                    if future.exception() is not None and error is None:
                        error = future.exception()
        except BaseException:  # Ctrl-C, SIGTERM: the fairseq-train processes in flight stop too (resumable)
            stop_running()
            raise
    if error is not None:
        raise error
