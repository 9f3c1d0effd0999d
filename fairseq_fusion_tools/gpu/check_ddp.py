"""fusion-gpu-check's DDP runs: ``fairseq-train --distributed-world-size 2 --fp16`` of each ``--ddp-archs`` arch, with
two or more GPUs, and what its log says (the processes that joined, the updates, the loss)."""
import math
import os
import re
import shlex
import subprocess
import time

from .. import atomic_files
from . import check_report
from .check_train import train_argv


def ddp_command(data, arch, updates, save_dir, seed=1, world_size=2):
    """fairseq-train of ``arch`` on ``world_size`` GPUs with --fp16 (fairseq spawns one process per GPU)."""
    from ..fairseq_runs import console_script

    argv = train_argv(data, arch, "fp16", "small", updates, seed)
    argv = [a for a in argv if a != "--no-save"]  # the checkpoint is written by rank 0 only: part of what is checked
    return [console_script("fairseq-train"), *argv, "--distributed-world-size", str(world_size),
            "--save-dir", save_dir, "--no-epoch-checkpoints", "--log-format", "json", "--log-interval", "1"]


RANK_LINE = re.compile(r"initialized host \S+ as rank (\d+)")  # fairseq's distributed_init, in every process


def parse_ddp_log(text):
    """What a fairseq-train log (``--log-format json --log-interval 1``, every rank's output) says of the run: the
    processes that joined, the updates, the first and last update's loss, words/s after the first update."""
    from ..fairseq_runs import LOG_LINE
    import json

    inner = [json.loads(m.group(2)) for m in (LOG_LINE.search(line) for line in text.splitlines())
             if m and m.group(1) == "train_inner"]
    return {"devices": len(set(RANK_LINE.findall(text))),
            "updates": int(inner[-1]["num_updates"]) if inner else 0,
            "first_loss": float(inner[0]["loss"]) if inner else math.nan,
            "last_loss": float(inner[-1]["loss"]) if inner else math.nan,
            "words_per_s": sum(float(s["wps"]) for s in inner[1:]) / len(inner[1:]) if len(inner) > 1 else None,
            "done": "done training" in text}


def run_ddp(args, archs, data, work):
    results = []
    for arch in archs:
        save_dir = os.path.join(work, "ddp", arch)
        os.makedirs(save_dir, exist_ok=True)
        cmd = ddp_command(data, arch, args.updates, save_dir, args.seed)
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        atomic_files.write_text(os.path.join(save_dir, "train.log"), log)
        r = {"arch": arch, "world_size": 2, "command": shlex.join(["fairseq-train"] + cmd[1:]),
             "seconds": time.perf_counter() - start, **parse_ddp_log(log)}
        if proc.returncode != 0 or not r["done"]:
            r["error"] = f"fairseq-train exited {proc.returncode}: {log.strip().splitlines()[-1] if log.strip() else ''}"
        elif not os.path.exists(os.path.join(save_dir, "checkpoint_last.pt")):
            r["error"] = "no checkpoint_last.pt written"
        r["problems"] = check_report.judge_ddp(r, args.updates)
        r["passed"] = not r["problems"]
        results.append(r)
        print(f"| DDP {arch}: {r['devices']} devices, loss {r['first_loss']:.3f} -> {r['last_loss']:.3f}; "
              f"{'pass' if r['passed'] else 'FAIL: ' + '; '.join(r['problems'])}", flush=True)
    return {"runs": results}
