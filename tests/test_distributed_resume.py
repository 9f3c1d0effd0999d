"""Distributed CPU training through fairseq-train (gloo, one process per rank) and exact resume."""
import os
import re
import socket
import subprocess
import sys

import pytest
import torch
from cli_runner import expect
from conftest import REPO, SMALL_MODEL_ARGS, TINY_MODEL_ARGS, run_cli, train_args

# a non-trivial arch: new parameters in the encoder and decoder, layer combination and a custom criterion
DIST_ARCH = "transformer_hierarchical_aggregation"
HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_two_ranks(data, tmp_path, ddp_backend, *extra, arch=DIST_ARCH, updates=4, model_args=SMALL_MODEL_ARGS):
    """fairseq-train on two CPU ranks (gloo), one process each: (rank 0's log, rank 1's log, rank 0's parameters,
    rank 1's parameters) after ``updates`` updates; rank 0 writes its checkpoints to ``tmp_path``/ckpt."""
    port = free_port()
    procs = []
    for rank in range(2):
        args = train_args(data, str(tmp_path / "ckpt"), arch=arch, max_update=updates, model_args=model_args, extra=[
            "--distributed-world-size", "2", "--distributed-rank", str(rank), "--distributed-backend", "gloo",
            "--distributed-init-method", f"tcp://127.0.0.1:{port}", "--distributed-no-spawn", "--device-id", "0",
            "--ddp-backend", ddp_backend, *extra,
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
    assert re.search(rf"num_updates {updates}\b", logs[0]), f"expected {updates} updates on rank 0\n{logs[0][-3000:]}"
    return (*logs, torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt"))


def assert_ranks_agree_and_checkpoint_is_rank0s(tmp_path, r0, r1):
    assert r0.keys() == r1.keys()
    for k in r0:
        assert torch.equal(r0[k], r1[k]), f"expected the ranks to end with the same {k}"
    # the checkpoint (written by rank 0) holds the same parameters and has moved from its initialization
    ckpt = torch.load(tmp_path / "ckpt" / "checkpoint_last.pt")
    differ = [k for k in r0 if not torch.equal(ckpt["model"][k], r0[k])]
    assert not differ, f"expected checkpoint_last.pt to hold rank 0's parameters; these differ: {differ}"


@pytest.mark.long_run
def test_two_cpu_ranks_end_with_same_parameters(multi30k_slice, tmp_path):
    """fairseq's own DDP (legacy_ddp: gradients all-reduced after the backward)."""
    _, _, r0, r1 = train_two_ranks(multi30k_slice, tmp_path, "legacy_ddp")
    assert_ranks_agree_and_checkpoint_is_rank0s(tmp_path, r0, r1)


@pytest.mark.long_run
def test_pytorch_ddp_eager_and_with_the_forward_compiled(multi30k_slice, tmp_path):
    """torch's DDP (pytorch_ddp), eager: the ranks agree; then with ``--fusion-compile aot_eager`` (DDP's gradient
    hooks fire during the compiled graph's backward): both ranks build the graph and end on the eager run's
    parameters, bit for bit. The plain model at the tiniest size (1+1 layers): what DDP does with a compiled graph
    does not depend on the arch (test_compile.py compiles each technique), and its trace takes a third of the time."""
    tiny = dict(arch="fusion_transformer", model_args=TINY_MODEL_ARGS)
    log, _, eager, r1 = train_two_ranks(multi30k_slice, tmp_path / "eager", "pytorch_ddp", **tiny)
    assert_ranks_agree_and_checkpoint_is_rank0s(tmp_path / "eager", eager, r1)
    assert "| torch.compile graphs built: 0" in log
    logs = train_two_ranks(multi30k_slice, tmp_path / "compiled", "pytorch_ddp", "--fusion-compile", "aot_eager", **tiny)
    for log in logs[:2]:
        built = re.search(r"\| torch.compile graphs built: (\d+)", log)
        assert built and int(built.group(1)) >= 1, log[-2000:]
    for rank, state in enumerate(logs[2:]):
        assert list(state) == list(eager)
        differ = [k for k in eager if not torch.equal(eager[k], state[k])]
        assert not differ, f"rank {rank} ends elsewhere than the eager run: {len(differ)} tensors, e.g. {differ[0]}"


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
