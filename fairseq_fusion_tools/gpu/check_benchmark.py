"""fusion-gpu-check's benchmark: the README's base-size benchmark (``recipes/benchmark/run.sh``, fusion-benchmark) with
what is left of the time budget, stopped at the budget (Ctrl-C, then SIGKILL), the pairs it finished summarized by
the benchmark's own report."""
import os
import shlex
import signal
import subprocess
import sys
import time

from ..user_files import fail

BENCH_MIN_S = 90  # less time than this left: the benchmark is not started
STOP_GRACE_S = 30  # how long a benchmark stopped at the budget (Ctrl-C) may take to exit before it is killed


def benchmark_script():
    """recipes/benchmark/run.sh, or one line saying the benchmark needs the repository's recipes."""
    from ..data_paths import recipe_path

    try:
        return recipe_path("benchmark", "run.sh", what="the benchmark of fusion-gpu-check")
    except FileNotFoundError as e:
        fail(f"{e}, or pass --skip-benchmark")


def benchmark_command(args, data, out):
    script = benchmark_script()
    env = {"SIZE": "base", "BIN": os.path.abspath(data), "OUT": os.path.abspath(out)}
    return script, env, ["bash", script, "--fp16", "--repeats", str(args.bench_repeats)]


def interruptible():
    """In a child before it runs: Ctrl-C (SIGINT) acts on it. A command started in the background (`&`, nohup) has
    SIGINT ignored, and its children inherit that: the budget's Ctrl-C would then wait for SIGKILL."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_benchmark(args, data, work, seconds):
    """The README's base-size benchmark with --fp16, stopped after ``seconds``; its finished pairs summarized."""
    import json

    from ..benchmark import report as benchmark_report
    from ..data_paths import REPO_ROOT

    out = os.path.join(work, "benchmark.json")
    script, env, cmd = benchmark_command(args, data, out)
    shown = " ".join(f"{k}={os.path.relpath(v) if os.path.isabs(v) else v}" for k, v in env.items()) + " " + \
        shlex.join(["bash", os.path.relpath(script, REPO_ROOT)] + cmd[2:])
    if not os.path.exists(script):
        return {"skipped": f"{script} not found (the check runs from the repository)"}
    if os.path.exists(out):
        os.remove(out)  # a previous run's results are not this run's
    print(f"| benchmark ({seconds:.0f} s left): {shown}", flush=True)
    full_env = dict(os.environ, **env, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=full_env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)
    stopped = False
    try:
        output, _ = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:  # Ctrl-C to the recipe, fusion-benchmark and its worker (one session): its
        os.killpg(proc.pid, signal.SIGINT)  # lock file is removed at exit; the runs finished so far are in its JSON
        try:
            output, _ = proc.communicate(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
        stopped = True
    result = {"command": shown, "elapsed_s": time.perf_counter() - start, "stopped": stopped,
              "json": os.path.relpath(out), "returncode": proc.returncode}
    runs = []
    if os.path.exists(out):
        with open(out) as f:
            runs = json.load(f).get("runs", [])
    if proc.returncode != 0 and not stopped:
        result["error"] = output.strip().splitlines()[-1] if output.strip() else f"exit status {proc.returncode}"
    rows = benchmark_report.summarize(runs) if runs else []
    result.update(runs=len(runs), rows=rows, table=benchmark_report.markdown(rows) if rows else None)
    print(output[-2000:] if result.get("error") else (result["table"] or "| benchmark: no pair finished"), flush=True)
    return result
