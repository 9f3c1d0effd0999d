"""fusion-compare's training runs: fairseq-train in a subprocess with its log appended (stopped with this process),
a run trained, continued or reused (``run_one``), and what the table reads from its log (``train_summary``)."""
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

from .. import atomic_files
from ..fairseq_runs import LOG_LINE
from .commands import portable_command, record_command, run_dir_of, train_command
from fairseq_fusion.guards import save_dir_lock

PARAMS_LINE = re.compile(r"num\. shared model params: ([\d,]+)")


def fairseq_logs(path):
    """(train_inner stats list, last train stats, params) from a fairseq-train log (json format); each
    train_inner entry gets ``attempt``, the number of the fairseq-train process that logged it (``run_logged``
    writes a ``# TIME COMMAND`` line before each)."""
    inner, train, params, attempt = [], None, None, 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("# "):
                attempt += 1
            m = LOG_LINE.search(line)
            if m:
                stats = json.loads(m.group(2))
                if m.group(1) == "train_inner":
                    inner.append({**stats, "attempt": attempt})
                elif m.group(1) == "train":
                    train = stats
            p = PARAMS_LINE.search(line)
            if p:
                params = int(p.group(1).replace(",", ""))
    return inner, train, params


def train_summary(log_path):
    """What the table takes from a finished run's log: updates, training words/s after warm-up, parameters.

    Words/s is words over time in ``train_step``: the sum of wpb x updates over the sum of fairseq's
    ``train_wall``, for every log interval but each process's first (the warm-up: first batches, allocator).
    fairseq's own ``wps`` is words over wall time, which counts the validations and checkpoint saves that a
    protocol places inside an interval; its median is kept as ``wps_median``. train_wall is logged in whole
    seconds: summed over the intervals, that rounding stays near 0.2 % (a per-interval median would move in
    steps of 3 %)."""
    inner, train, params = fairseq_logs(log_path)
    if not inner:
        raise ValueError(f"{log_path}: no train_inner lines (the run logs with --log-format json)")
    timed = [(prev, s) for prev, s in zip(inner, inner[1:]) if s["attempt"] == prev["attempt"]]
    words = sum(float(s["wpb"]) * (int(s["num_updates"]) - int(prev["num_updates"])) for prev, s in timed)
    seconds = sum(float(s["train_wall"]) for _, s in timed)
    return {"updates": int(inner[-1]["num_updates"]) if train is None else int(train["train_num_updates"]),
            "words_per_s": words / seconds if seconds > 0 else None, "train_seconds": seconds,
            "wps_median": statistics.median(float(s["wps"]) for _, s in timed) if timed else None,
            "wps_intervals": len(timed), "params": params,
            "train_loss": None if train is None else float(train["train_loss"])}


RUNNING = set()  # the fairseq-train processes run_logged waits on (several with --jobs)


def stop_running():
    for proc in list(RUNNING):
        if proc.poll() is None:
            proc.terminate()


def run_logged(cmd, log_path, progress=None, total=None, env=None):
    """Run ``cmd``, appending its output to ``log_path``; a progress bar over num_updates when ``total``."""
    from ..progress import progress as progress_bar

    bar = progress_bar(total=total, desc=progress, unit="upd", leave=False, dynamic_ncols=True, mininterval=0.1) if total else None
    with open(log_path, "a", encoding="utf-8", buffering=1) as log:  # line by line: a killed run keeps its log
        log.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(cmd)}\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        RUNNING.add(proc)
        try:
            for line in proc.stdout:
                log.write(line)
                m = LOG_LINE.search(line) if bar is not None else None
                if m and m.group(1) == "train_inner":
                    bar.n = int(json.loads(m.group(2))["num_updates"])
                    bar.refresh()
            rc = proc.wait()
        finally:  # stopped (Ctrl-C; SIGTERM: exit_on_sigterm): fairseq-train would train on unseen, beside the next attempt
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
            RUNNING.discard(proc)
    if bar is not None:
        bar.close()
    return rc


def tail(path, n=30):
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-n:])


def run_one(args, system, seed, label, progress=True):
    """Train (or continue, or reuse) one run; returns its train summary. ``progress``: a progress bar (one run at
    a time)."""
    from ..fairseq_runs import console_script

    run_dir = run_dir_of(args, system, seed)
    done = os.path.join(run_dir, "train.json")
    cmd = train_command(args, system, seed, run_dir)
    save_dir_lock.check_free(run_dir)  # a training holds the folder (another fusion-compare's): one line, untouched
    record_command(run_dir, portable_command(cmd))
    log = os.path.join(run_dir, "train.log")
    if os.path.exists(done):
        print(f"| {label}: trained before, reused", flush=True)
        with open(done) as f:
            recorded_summary = json.load(f)
        if not os.path.exists(log):
            return recorded_summary
        summary = train_summary(log)  # the log is the record (train.json marks the run finished): read it again
        if summary != recorded_summary:
            atomic_files.write_json(done, summary)
        return summary
    resumed = os.path.exists(os.path.join(run_dir, "checkpoint_last.pt"))
    print(f"| {label}: {'continuing from checkpoint_last.pt' if resumed else 'training'} (log {log})", flush=True)
    rc = run_logged([console_script("fairseq-train"), *cmd], log, progress=label,
                    total=args.max_update if progress else None)
    if rc != 0:
        raise RuntimeError(f"fairseq-train of {label} exited {rc}; the last lines of {log}:\n{tail(log)}")
    summary = train_summary(log)
    if args.max_update and summary["updates"] != args.max_update:
        raise RuntimeError(f"{label} stopped at {summary['updates']} updates, not --max-update {args.max_update}: see {log}")
    atomic_files.write_json(done, summary)
    return summary


def exit_on_sigterm(signum, frame):
    """fusion-compare's SIGTERM handler: exit by unwinding, so ``run_logged`` stops its fairseq-train."""
    sys.exit(128 + signum)
