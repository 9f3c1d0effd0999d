"""recipes/<task>/train.sh on several nodes: the commands it builds (--print-command) for 1x8, 2x8 and 4x4 GPUs under
torchrun-like (NNODES/NODE_RANK/MASTER_ADDR) and SLURM-like environments, checked with torchrun's parser and fairseq's
own distributed initialization (infer_init_method, GPUs and scontrol faked); nothing trains."""
import itertools
import math
import os
import shlex
import subprocess
import sys

import pytest
import torch
from fairseq import options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.distributed import utils as distributed_utils

from conftest import shell_env
from fairseq_fusion_tools import data_paths

REPO = data_paths.REPO_ROOT
from fairseq_fusion_tools import recipe_settings as settings  # noqa: E402
TRAIN = os.path.join(REPO, "recipes", "wmt14_en_de", "train.sh")
ARCH = "transformer_lexical_shortcuts_ff"
# Emelin et al. A.1: 25,000 tokens per update on WMT14 En-De (recipes/README.md's table); Dou et al. 32,768
PAPER_TOKENS = {"emelin": 25000, "dou": 32768}
MAX_TOKENS = 1000  # per GPU: small, so that the update frequency differs with the number of nodes
LAUNCH_VARS = ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
               "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID")
LAYOUTS = [(1, 8), (2, 8), (4, 4)]  # nodes x GPUs per node
JOB_ID = 4242


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k not in LAUNCH_VARS}
    env = dict(env, OMP_NUM_THREADS="1", MAX_TOKENS=str(MAX_TOKENS), **extra)
    return env if "PYTHON" in extra else shell_env(env)  # a stub Python stands in for the commands


def launcher_env(launcher, nodes, gpus):
    """The environment of the last node of the job."""
    if launcher == "torchrun":
        return dict(N_GPUS=str(gpus), NNODES=str(nodes), NODE_RANK=str(nodes - 1), MASTER_ADDR="node0")
    env = dict(N_GPUS=str(gpus), SLURM_JOB_ID=str(JOB_ID), SLURM_JOB_NODELIST=f"node[0-{nodes - 1}]", SLURM_NNODES=str(nodes),
               SLURM_NTASKS_PER_NODE="1", SLURM_NODEID=str(nodes - 1), SLURM_PROCID=str(nodes - 1), SLURM_LOCALID="0")
    if nodes == 2:
        env["MASTER_PORT"] = "29999"  # chosen by the user; else derived from the job id
    return env


CASES = [(launcher, nodes, gpus) for launcher in ("torchrun", "slurm") for nodes, gpus in LAYOUTS]
# (arch, paper) per case: Emelin et al.'s, except Dou et al.'s two stages (the vanilla model, then the aggregation model
# from it: two commands) on 2 x 8 GPUs under torchrun
TWO_STAGE = ("torchrun", 2, 8)
ARCHS = {case: ("transformer_hierarchical_aggregation_big", "dou") if case == TWO_STAGE else (ARCH, "emelin")
         for case in CASES}


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """--print-command's output per case (the runs side by side: each reads the settings, which imports fairseq)."""
    work = tmp_path_factory.mktemp("work")
    procs = {case: subprocess.Popen(["bash", TRAIN, ARCHS[case][0], "--paper", ARCHS[case][1], "--print-command"], text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=clean_env(WORK=str(work), **launcher_env(*case))) for case in CASES}
    # a run on node 1 of 2, torchrun a stub (fairseq-train beside it, as beside the Python): where it logs
    bin_dir, logged = tmp_path_factory.mktemp("bin"), tmp_path_factory.mktemp("logged")
    stubs = {"python": f'exec {shlex.quote(sys.executable)} "$@"', "torchrun": 'echo "STUB torchrun $*"', "fairseq-train": "exit 3"}
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    data = logged / "data-emelin.en-de"
    data.mkdir()
    (data / "dict.en.txt").write_text("")
    procs["node 1"] = subprocess.Popen(["bash", TRAIN, ARCH, "--paper", "emelin"], text=True, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=clean_env(WORK=str(logged), PYTHON=str(bin_dir / "python"),
                                                                             **launcher_env("torchrun", 2, 8)))
    out = {"node 1 save": logged / "checkpoints" / f"{ARCH}.emelin.en-de", "bin": bin_dir}
    for case, proc in procs.items():
        stdout, stderr = proc.communicate()
        assert proc.returncode == 0, f"expected train.sh of {case} to exit 0, not {proc.returncode}\n{stderr[-3000:]}"
        out[case] = stdout.splitlines()
    assert not os.listdir(work), "--print-command wrote files"
    return out


def split(line):
    """(launcher words, fairseq-train's arguments after its name) of one printed command."""
    words = shlex.split(line)
    i = next(i for i, w in enumerate(words) if os.path.basename(w) == "fairseq-train")
    return words[:i], words[i + 1:]


def fairseq_cfg(args, gpus):
    parsed = options.parse_args_and_arch(options.get_training_parser(), args)
    cfg = convert_namespace_to_omegaconf(parsed).distributed_training
    if "--distributed-world-size" not in args:  # fairseq's default: the GPUs of the machine that parses it
        cfg.distributed_world_size = gpus
    return parsed, cfg


@pytest.fixture
def fake_cluster(monkeypatch):
    """GPUs and scontrol as on a cluster node, for fairseq's infer_init_method."""
    for k in list(os.environ):
        if k.startswith("SLURM_") or k in LAUNCH_VARS:
            monkeypatch.delenv(k)

    def cluster(gpus, nodes, env):
        monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
        monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
        hosts = "".join(f"node{i}\n" for i in range(nodes)).encode()
        monkeypatch.setattr(distributed_utils.subprocess, "check_output",
                            lambda cmd: hosts if cmd[:3] == ["scontrol", "show", "hostnames"] else pytest.fail(cmd))
        for k, v in env.items():
            monkeypatch.setenv(k, v)
    return cluster


def test_the_layouts_tell_the_node_count_apart():
    """Each layout of several nodes needs another --update-freq than its GPUs alone would (the tests below could fail)."""
    for (nodes, gpus), tokens in itertools.product(LAYOUTS[1:], PAPER_TOKENS.values()):
        assert math.ceil(tokens / (MAX_TOKENS * gpus)) != math.ceil(tokens / (MAX_TOKENS * gpus * nodes))


@pytest.mark.parametrize("launcher,nodes,gpus", CASES)
def test_train_sh_on_several_nodes(printed, fake_cluster, launcher, nodes, gpus):
    """The paper's tokens per update over every GPU of every node; fairseq initializes the whole group: env:// under
    torchrun, tcp://first node:port under SLURM (one task per node spawning a process per GPU); one node as before."""
    arch, paper = ARCHS[(launcher, nodes, gpus)]
    lines = printed[(launcher, nodes, gpus)]
    if arch == ARCH:
        assert len(lines) == 1
    else:  # the vanilla model first, then the aggregation model initialized from it, both launched alike
        assert len(lines) == 2 and split(lines[0])[0] == split(lines[1])[0]
        assert split(lines[0])[1][split(lines[0])[1].index("--arch") + 1] == "fusion_transformer_big"
        assert "--init-from-vanilla" in split(lines[1])[1] and "--init-from-vanilla" not in split(lines[0])[1]
    for line in lines:
        check_command(line, arch if line == lines[-1] else "fusion_transformer_big", paper, launcher, nodes, gpus,
                      fake_cluster)


def check_command(line, arch, paper, launcher, nodes, gpus, fake_cluster):
    launch, args = split(line)
    parsed, cfg = fairseq_cfg(args, gpus)
    total = nodes * gpus
    assert parsed.arch == arch and parsed.max_tokens == MAX_TOKENS
    assert parsed.update_freq == [math.ceil(PAPER_TOKENS[paper] / (MAX_TOKENS * total))]
    assert parsed.update_freq[0] * MAX_TOKENS * total >= PAPER_TOKENS[paper]
    assert parsed.ddp_backend == "legacy_ddp" and parsed.fp16
    node = nodes - 1
    if nodes == 1:  # unchanged: fairseq-train itself with the settings of one node, fairseq spawning a process per GPU
        assert launch == [] and not any(a.startswith("--distributed") for a in args), line
        one_node = settings.train_settings("wmt14_en_de", arch, paper, n_gpus=gpus, max_tokens=MAX_TOKENS)
        assert args[args.index("--arch"):args.index("--save-dir")] == settings.train_command_args(one_node, n_gpus=gpus)
        fake_cluster(gpus, 1, {"SLURM_JOB_NODELIST": "node0", "SLURM_NNODES": "1", "SLURM_NTASKS_PER_NODE": "1",
                               "SLURM_NODEID": "0"} if launcher == "slurm" else {})
        distributed_utils.infer_init_method(cfg)
        assert cfg.distributed_init_method.startswith("tcp://localhost:")
        assert (cfg.distributed_world_size, cfg.distributed_num_procs, cfg.distributed_no_spawn) == (8, 8, False)
    elif launcher == "torchrun":
        from torch.distributed.run import get_args_parser
        t = get_args_parser().parse_args([*launch[1:], "fairseq-train", *args])
        assert os.path.basename(launch[0]) == "torchrun" and t.training_script_args == args
        assert (t.nnodes, t.nproc_per_node, t.node_rank, t.master_addr, t.master_port) == (str(nodes), str(gpus), node, "node0", 29500)
        local = gpus - 1  # the node's last process, with the variables torchrun gives it
        fake_cluster(gpus, nodes, dict(WORLD_SIZE=str(total), RANK=str(node * gpus + local), LOCAL_RANK=str(local),
                                       MASTER_ADDR="node0", MASTER_PORT="29500"))
        distributed_utils.infer_init_method(cfg)
        assert (cfg.distributed_init_method, cfg.distributed_world_size, cfg.distributed_rank, cfg.device_id,
                cfg.distributed_no_spawn) == ("env://", total, node * gpus + local, local, True)
    else:
        assert launch == [] and parsed.distributed_world_size == total
        port = 29999 if nodes == 2 else 10000 + JOB_ID % 50000  # MASTER_PORT, else from the job id: the same on every node
        assert parsed.distributed_port == port
        fake_cluster(gpus, nodes, {k: v for k, v in launcher_env(launcher, nodes, gpus).items() if k.startswith("SLURM_")})
        distributed_utils.infer_init_method(cfg)
        assert (cfg.distributed_init_method, cfg.distributed_world_size, cfg.distributed_rank,
                cfg.distributed_num_procs, cfg.distributed_no_spawn) == (f"tcp://node0:{port}", total, node * gpus, gpus, False)


def test_nodes_after_the_first_log_beside_it(printed):
    """Node R > 0 writes train.nodeR.log and command.nodeR.txt (node 0 keeps train.log, which the recipe and
    fusion-training-curve read); the recipe ran torchrun with fairseq-train's path."""
    save = printed["node 1 save"]
    assert sorted(os.listdir(save)) == ["command.node1.txt", "recipe_settings.sh", "train.node1.log"]
    log = (save / "train.node1.log").read_text()
    assert "(base, 2 nodes x 8 GPUs, node 1, criterion" in printed["node 1"][0]
    launched = next(line for line in log.splitlines() if line.startswith("STUB torchrun "))
    from torch.distributed.run import get_args_parser
    t = get_args_parser().parse_args(shlex.split(launched.removeprefix("STUB torchrun ")))
    assert (t.nnodes, t.nproc_per_node, t.node_rank, t.master_addr, t.master_port, t.training_script) == (
        "2", "8", 1, "node0", 29500, str(printed["bin"] / "fairseq-train")), f"expected node 1 of 2 x 8 GPUs: {launched}"


@pytest.mark.parametrize("env,message", [
    (dict(NNODES="2"), "NNODES=2: set NODE_RANK"),
    (dict(NNODES="two"), "NNODES=two: expected a whole number of 1 or more"),
    (dict(NNODES="2", NODE_RANK="2", MASTER_ADDR="node0"), "NODE_RANK=2: expected a whole number from 0 to 1"),
    (dict(NNODES="2", NODE_RANK="1"), "NNODES=2: set MASTER_ADDR"),
    (dict(NNODES="2", NODE_RANK="1", MASTER_ADDR="node0", MASTER_PORT="http"), "MASTER_PORT=http: expected"),
    (dict(NNODES="2", NODE_RANK="1", MASTER_ADDR="node0", N_GPUS="0"), "N_GPUS=0: training on 2 nodes needs GPUs"),
    (dict(SLURM_JOB_NODELIST="node[0-1]", SLURM_NNODES="2", SLURM_NTASKS_PER_NODE="8", SLURM_NODEID="0"),
     "SLURM_NTASKS_PER_NODE=8: train.sh takes one SLURM task per node"),
    (dict(SLURM_JOB_NODELIST="node[0-1]", SLURM_NNODES="2", SLURM_NTASKS="2", SLURM_NODEID="0"),
     "SLURM_NNODES=2 without SLURM_JOB_ID: set MASTER_PORT"),
    (dict(LOCAL_RANK="0", WORLD_SIZE="16"), "train.sh runs under torchrun"),
])
def test_bad_launch_settings_get_one_line(env, message, tmp_path):
    proc = subprocess.run(["bash", TRAIN, ARCH, "--print-command"], capture_output=True, text=True,
                          env=clean_env(WORK=str(tmp_path), **{"N_GPUS": "8", **env}))
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: " + message), proc.stderr
