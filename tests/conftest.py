"""Shared fixtures: a binarized slice of the real Multi30k data, small model args, the CLI runner."""
import contextlib
import os
import signal
import subprocess

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import fairseq_fusion  # noqa: F401  (registers archs, allow-lists checkpoint classes)
from fairseq_fusion_tools import data_paths

import cli_runner

REPO = data_paths.REPO_ROOT
BIN = cli_runner.BIN

# a small model for CLI runs: fast on 2 CPU cores
SMALL_MODEL_ARGS = [
    "--encoder-layers", "2", "--decoder-layers", "2",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
]


_GEMMS = {torch.ops.aten.mm.default, torch.ops.aten.bmm.default, torch.ops.aten.addmm.default,
          torch.ops.aten.baddbmm.default}


class FastHalfGemm(TorchDispatchMode):
    """Half-precision matrix products computed in fp32 kernels, the result rounded once to the half dtype: what a
    GPU's half GEMM (cuBLAS, fp32 accumulation) computes, 4-5x faster on this CPU than torch's CPU half kernels,
    which accumulate in fp32 too. Every other op runs in the half dtype."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _GEMMS and args[0].dtype in (torch.float16, torch.bfloat16):
            up = [a.float() if torch.is_tensor(a) else a for a in args]
            return func(*up, **kwargs).to(args[0].dtype)
        return func(*args, **kwargs)


def pytest_configure(config):
    config.addinivalue_line("markers", "long_run: a whole pipeline of commands (minutes on 2 cores); its module runs first")


def pytest_collection_modifyitems(items):
    """The modules holding a long_run test first, their long_run tests at their head: pytest-xdist hands the tests
    out in this order, so the longest start at the beginning rather than making the tail of the run. A module stays
    together (its module fixtures are built once per worker, as before)."""
    first = {item.path for item in items if item.get_closest_marker("long_run")}
    module_at = {}
    for i, item in enumerate(items):
        module_at.setdefault(item.path, i)
    items.sort(key=lambda item: (item.path not in first, module_at[item.path], not item.get_closest_marker("long_run")))


@pytest.fixture(scope="session", autouse=True)
def command_line_run():
    """This process has a command-line run's settings and checks (fairseq_fusion.command_line) from the first test
    on: the tests call the commands' main (cli_runner.run_in_process) and fairseq's parsers in it, as each command's
    own process would run them. Without this, a test file run alone (pytest tests/test_arch_help.py) depended on an
    earlier test having run a fusion-* command here."""
    import signal

    from fairseq_fusion import command_line

    # Python's own Ctrl-C handler, which the tests of what Ctrl-C does expect (and the processes they start inherit):
    # a run started as a background job of a shell without job control starts with SIGINT ignored, which Python keeps
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    command_line.configure()


@pytest.fixture(scope="session", autouse=True)
def threads_per_worker(command_line_run):
    """torch's intra-op threads: the cores shared out among pytest-xdist's workers (one each with 2 workers on 2
    cores). With every worker at torch's default, one thread per core each, the OpenMP threads of the workers wait
    for each other: measured 5-10x slower on small ops. After the command-line run's own fitting of them."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // workers))
    yield
    torch.set_num_threads(before)


def write_dicts(directory, vocab, langs=("src", "tgt")):
    """A data directory with fairseq dictionaries of ``vocab`` symbols w0..w{vocab-1} per language
    (what fairseq-preprocess writes); enough for tasks.setup_task and build_model."""
    for lang in langs:
        with open(os.path.join(str(directory), f"dict.{lang}.txt"), "w") as f:
            f.writelines(f"w{i} {1000 - i}\n" for i in range(vocab))
    return str(directory)


def run_cli(cmd, cwd=None, env=None, check=True, stdin=None, process=False):
    """Run console script ``cmd[0]`` with ``cmd[1:]``: its entry point in this process (cli_runner.run_in_process,
    as fairseq's tests call main), or with ``process`` a new process (for what only a process shows: exit as the
    interpreter ends it, signals, a second plugin folder). ``stdin``: a file given as its standard input. With
    ``check``, a non-zero exit fails the test and shows the output."""
    run = cli_runner.run_process if process else cli_runner.run_in_process
    proc = run(cmd, cwd=cwd, env=dict(env or {}, OMP_NUM_THREADS="1"), stdin=stdin)
    if check:
        cli_runner.expect_success(proc)
    return proc


def build_model(data_dir, arch, *flags, seed=1, task="translation", langs=("src", "tgt"), criterion=None):
    """(model, task, args) as fairseq-train builds them: ``flags`` parsed by fairseq's training parser for ``arch``
    on ``data_dir`` (dictionaries only: write_dicts), the task set up, the model built after torch.manual_seed(seed).
    The test files' own ``build`` helpers add their sizes and defaults to this one."""
    from fairseq import options, tasks

    extra = [] if criterion is None else ["--criterion", criterion]
    args = options.parse_args_and_arch(options.get_training_parser(), [
        data_dir, "--task", task, "-s", langs[0], "-t", langs[1], "--arch", arch, "--cpu", *extra, *flags])
    t = tasks.setup_task(args)
    torch.manual_seed(seed)
    return t.build_model(args), t, args


def shell_env(env):
    """``env`` for a shell command (a documented command, a recipe): this environment's console scripts first on
    PATH, one OpenMP thread per command."""
    return dict(env, PATH=BIN + os.pathsep + env.get("PATH", ""), OMP_NUM_THREADS="1")


def run_recipe(task, step, *args, env=None, check=True):
    """bash recipes/``task``/``step``.sh ``args`` with ``env`` added to this environment; with ``check``, a non-zero
    exit fails the test and shows the output's tail."""
    proc = subprocess.run(["bash", os.path.join(REPO, "recipes", task, f"{step}.sh"), *args], capture_output=True,
                          text=True, env=shell_env(dict(os.environ, **(env or {}))))
    if check:
        cli_runner.expect_success(proc, f"{task}/{step}.sh to exit 0")
    return proc


def train_args(data_dir, save_dir, arch="fusion_transformer", max_update=6, extra=(), model_args=SMALL_MODEL_ARGS):
    """fairseq-train of ``arch`` at ``model_args``'s size on ``data_dir``, ``extra`` flags last."""
    return [
        "fairseq-train", data_dir, "--user-dir", os.path.join(REPO, "fairseq_fusion"),
        "--arch", arch, *model_args, "--share-all-embeddings",
        "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "4",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--max-tokens", "1500", "--max-update", str(max_update), "--save-dir", save_dir,
        "--cpu", "--no-progress-bar", "--log-format", "simple", "--log-interval", "1", "--seed", "1",
        "--num-workers", "0", *extra,
    ]


def with_a_longer_dictionary(data_dir, dest):
    """A copy of the binarized folder ``data_dir`` at ``dest`` whose dict.en.txt and dict.de.txt have one word more:
    data a checkpoint trained on ``data_dir`` does not fit. Returns ``dest``."""
    import shutil

    shutil.copytree(data_dir, dest)
    for lang in ("en", "de"):
        with open(os.path.join(dest, f"dict.{lang}.txt"), "a", encoding="utf-8") as f:
            f.write("zzextra 1\n")
    return dest


@pytest.fixture(scope="session")
def multi30k_slice(tmp_path_factory):
    """Multi30k En-De, first 1,000 lines of train/val/test_2016_flickr: tokenized, BPE (500 merges), binarized."""
    src = data_paths.data_path("multi30k")
    dest = str(tmp_path_factory.mktemp("multi30k_slice"))
    run_cli([
        "fusion-prepare-text", "-s", "en", "-t", "de",
        "--trainpref", os.path.join(src, "train"), "--validpref", os.path.join(src, "val"),
        "--testpref", os.path.join(src, "test_2016_flickr"), "--destdir", dest,
        "--max-lines", "1000", "--bpe-merges", "500", "--workers", "2",
    ])
    return dest


@pytest.fixture
def slice_work(multi30k_slice, tmp_path):
    """A ``--work`` folder whose data-bin is the Multi30k slice (fusion-gpu-check's and fusion-gpu-speed's layout)."""
    work = tmp_path / "work"
    work.mkdir()
    os.symlink(multi30k_slice, work / "data-bin")
    return work


def with_flag(args, flag, *values):
    """``args`` with option ``flag`` given ``values`` (replacing its value(s) where it is there, appended where not);
    no ``values``: ``flag`` and its values removed."""
    if flag not in args:
        return list(args) + ([flag, *values] if values else [])
    at = args.index(flag)
    end = at + 1
    while end < len(args) and not args[end].startswith("--"):
        end += 1
    return list(args[:at]) + ([flag, *values] if values else []) + list(args[end:])


TINY_MODEL_ARGS = [
    "--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
]


def tiny_train_args(data_dir, save_dir, arch, *extra, max_update=2):
    """fairseq-train of ``arch`` at the tiniest size (d=16, 1+1 layers): for what needs a checkpoint, not a model."""
    return train_args(data_dir, save_dir, arch=arch, max_update=max_update, extra=extra, model_args=TINY_MODEL_ARGS)


@pytest.fixture(scope="session")
def tiny_checkpoint(multi30k_slice, tmp_path_factory):
    """checkpoint_last.pt of transformer_surface_fusion after 2 updates on the Multi30k slice (d=16)."""
    save = str(tmp_path_factory.mktemp("tiny_checkpoint"))
    run_cli(tiny_train_args(multi30k_slice, save, "transformer_surface_fusion"))
    return os.path.join(save, "checkpoint_last.pt")


@pytest.fixture(scope="session")
def small_checkpoint(multi30k_slice, tmp_path_factory):
    """checkpoint_last.pt of fusion_transformer at the small size (train_args) after 4 updates on the Multi30k slice:
    one training for the tests that analyse a trained model (test_alignment.py, test_contrastive.py)."""
    save = str(tmp_path_factory.mktemp("small_checkpoint"))
    run_cli(train_args(multi30k_slice, save, arch="fusion_transformer", max_update=4))
    return os.path.join(save, "checkpoint_last.pt")


class TimeLimit(BaseException):
    """A test case ran past its time limit (a BaseException: a command's ``except Exception`` does not swallow it)."""


@contextlib.contextmanager
def time_limit(seconds):
    """Raise TimeLimit in this (main) thread once ``seconds`` have passed: a case's limit where pytest-timeout is not
    installed (SIGALRM; the earlier alarm, if any, is put back)."""
    def stop(signum, frame):
        raise TimeLimit(f"over the time limit of {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def unwritable_folder(tmp):
    """A folder this user cannot write in: a chmod 555 one, or (root writes through permissions) /sys, whose files
    root cannot create either; None if neither stops this user."""
    for folder in (tmp, "/sys"):
        try:
            open(os.path.join(folder, "probe"), "wb").close()
        except OSError:
            return folder
        os.remove(os.path.join(folder, "probe"))
    return None
