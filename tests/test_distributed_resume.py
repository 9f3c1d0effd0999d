"""Distributed CPU training through fairseq-train (gloo, one process per rank) and exact resume."""
import os
import re
import socket
import subprocess
import sys

import pytest
import torch
from cli_runner import expect
from conftest import REPO, run_cli, train_args

# a non-trivial arch: new parameters in the encoder and decoder, layer combination and a custom criterion
DIST_ARCH = "transformer_hierarchical_aggregation"
HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.long_run
@pytest.mark.parametrize("ddp_backend", ["legacy_ddp", "pytorch_ddp"])
def test_two_cpu_ranks_end_with_same_parameters(multi30k_slice, tmp_path, ddp_backend):
    port = free_port()
    procs = []
    for rank in range(2):
        args = train_args(multi30k_slice, str(tmp_path / "ckpt"), arch=DIST_ARCH, max_update=4, extra=[
            "--distributed-world-size", "2", "--distributed-rank", str(rank), "--distributed-backend", "gloo",
            "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-no-spawn", "--device-id", "0",
            "--ddp-backend", ddp_backend,
        ])
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "dist_worker.py"), str(tmp_path / f"rank{rank}.pt")] + args,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"),
        ))
    logs = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        logs.append(out)
        assert p.returncode == 0, f"expected rank {len(logs) - 1} to exit 0\n{out[-4000:]}"
    assert "distributed init (rank 1)" in logs[0] + logs[1], f"expected rank 1 to join\n{logs[1][-3000:]}"
    assert re.search(r"num_updates 4\b", logs[0]), f"expected 4 updates on rank 0\n{logs[0][-3000:]}"
    r0, r1 = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    assert r0.keys() == r1.keys()
    for k in r0:
        assert torch.equal(r0[k], r1[k]), f"expected the ranks to end with the same {k}"
    # the checkpoint (written by rank 0) holds the same parameters and has moved from its initialization
    ckpt = torch.load(tmp_path / "ckpt" / "checkpoint_last.pt")
    differ = [k for k in r0 if not torch.equal(ckpt["model"][k], r0[k])]
    assert not differ, f"expected checkpoint_last.pt to hold rank 0's parameters; these differ: {differ}"


def final_train_loss(log, update):
    m = re.findall(rf"loss ([\d.]+) .*num_updates {update}\b", log)
    assert m, f"expected a training log line for update {update}\n{log[-3000:]}"
    return float(m[-1])


@pytest.mark.long_run
def test_exact_resume(multi30k_slice, tmp_path):
    n = 7  # stops mid-epoch: the data iterator position must be restored too
    extra = ["--dropout", "0.1", "--no-epoch-checkpoints", "--save-interval-updates", str(n)]
    full = run_cli(train_args(multi30k_slice, str(tmp_path / "full"), arch=DIST_ARCH, max_update=2 * n, extra=extra))
    run_cli(train_args(multi30k_slice, str(tmp_path / "half"), arch=DIST_ARCH, max_update=n, extra=extra))
    resumed = run_cli(train_args(multi30k_slice, str(tmp_path / "half"), arch=DIST_ARCH, max_update=2 * n, extra=extra))
    expect(resumed, "Loaded checkpoint" in resumed.stdout + resumed.stderr, "the second half to load checkpoint_last.pt")
    assert final_train_loss(full.stdout + full.stderr, 2 * n) == final_train_loss(resumed.stdout + resumed.stderr, 2 * n)
    a = torch.load(tmp_path / "full" / "checkpoint_last.pt")
    b = torch.load(tmp_path / "half" / "checkpoint_last.pt")
    assert a["optimizer_history"][-1]["num_updates"] == b["optimizer_history"][-1]["num_updates"] == 2 * n
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), f"expected the resumed run to end with the full run's {k}"
