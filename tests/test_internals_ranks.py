"""--fusion-log-internals on two ranks: each figure logged is the mean of both ranks' figures, reduced with the
logging outputs as fairseq reduces ``loss`` (``fairseq_fusion/compat/trainer_figures.py``).

Two CPU processes (gloo) drive fairseq's Trainer, each on its own batch (tests/internals_rank_worker.py), every case in
one launch; each also computes its batch's figures alone. Both ranks must log the mean of the two, for fairseq's criteria and the
plugin's, through fairseq's summed path (``all_reduce_dict``; its gathered one, ``all_gather_list``, needs CUDA).
"""
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import write_dicts
from test_distributed_resume import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
# fairseq's gathered path (all_gather_list, for a criterion whose outputs cannot be summed) allocates a CUDA buffer:
# on CPU it ends in TypeError for fairseq's own figures too, so it runs here only where CUDA is
CASES = [("cross_entropy", "summed"), ("label_smoothed_cross_entropy", "summed"),
         ("label_smoothed_cross_entropy_with_diversity", "summed"),
         pytest.param("label_smoothed_cross_entropy", "gathered", marks=pytest.mark.skipif(
             not torch.cuda.is_available(), reason="fairseq's all_gather_list needs CUDA"))]
LAYERDROP = ("cross_entropy", "layerdrop")


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """Every case in one two-rank launch (one process group, the cases in turn): case -> (rank 0's, rank 1's) record."""
    tmp_path = tmp_path_factory.mktemp("ranks")
    cases = [c.values if hasattr(c, "values") else c for c in CASES]
    cases = [":".join(c) for c in cases if c[1] != "gathered" or torch.cuda.is_available()] + [":".join(LAYERDROP)]
    data = write_dicts(tmp_path, 40)
    port = free_port()
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "internals_rank_worker.py"), str(rank), str(port),
                               data, str(tmp_path / f"rank{rank}.json"), *cases],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1")) for rank in range(2)]
    for rank, p in enumerate(procs):
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, f"rank {rank}:\n{out[-4000:]}"
    r0, r1 = (json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2))
    return {tuple(case.split(":")): (r0[case], r1[case]) for case in cases}


@pytest.mark.parametrize("criterion,mode", CASES)
def test_two_ranks_log_the_mean_of_each_ranks_figures(two_ranks, criterion, mode):
    r0, r1 = two_ranks[criterion, mode]
    assert len(r0["own"]) >= 4 and sorted(r0["own"]) == sorted(r1["own"])
    assert all(abs(r0["own"][k] - r1["own"][k]) > 1e-6 for k in r0["own"]), (r0["own"], r1["own"])
    for rank in (r0, r1):
        assert sorted(rank["logged"]) == sorted(r0["own"])
        for name, value in rank["logged"].items():
            assert value == pytest.approx((r0["own"][name] + r1["own"][name]) / 2, abs=1e-6), name
        # fairseq's per-update aggregator (read at every update) never holds them
        assert "loss" in rank["per_update"] and not [k for k in rank["per_update"] if k.startswith("fusion")]


def test_under_layerdrop_each_rank_logs_its_own_training_figures(two_ranks):
    """A rank that skips a layer records fewer figures, so the ranks' figures are not summed in one buffer (that
    would fail or hang): each rank logs its own, a subset of the model's figures, and the update ends on both."""
    r0, r1 = two_ranks[LAYERDROP]
    for rank in (r0, r1):
        assert rank["logged"] and set(rank["logged"]) <= set(rank["own"]), (sorted(rank["logged"]), sorted(rank["own"]))
        assert not [k for k in rank["per_update"] if k.startswith("fusion")]
