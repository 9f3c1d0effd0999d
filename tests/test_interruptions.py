"""Interruptions and stop conditions (issue 58, item 4): Ctrl-C in any command is one line with exit status 130 and
no half-written file; a budget is fairseq's "no limit" (documented) or refused in one line naming the flag; a diverged
training is one line naming the update and the likely flags; ``--retain-dropout-modules`` acts on the plugin's modules
as on fairseq's.

A Ctrl-C test starts the command as a process in its own session (a terminal's Ctrl-C goes to the whole process
group, the command's workers too), waits for a line of its output that marks the moment, and sends SIGINT to the
group. Every case has a time limit (``time_limit``; the processes' own waits are bounded too).
"""
import filecmp
import functools
import gzip
import inspect
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from importlib import metadata

import pytest
import torch

from cli_runner import BIN, command_state, entry_point, output_tail
from conftest import REPO, SMALL_MODEL_ARGS, build_model, run_cli, write_dicts
from conftest import tiny_train_args as tiny_train
from fairseq_fusion.errors import PREFIX
from fairseq_fusion.guards import command_output, entry_checks, stop_conditions
from fairseq_fusion.models import dropout_names

USER_DIR = os.path.join(REPO, "fairseq_fusion")
INTERRUPTED = re.compile(r"^fairseq-fusion: interrupted; (\S+) stopped before it finished$")
LIMIT_S = 180  # a case's time limit; a process test's waits stay well under it


@pytest.fixture(autouse=True)
def time_limit(request):
    """Each case ends as a failure after LIMIT_S seconds (SIGALRM: a hung wait in this process is interrupted)."""
    limit = getattr(request.node.get_closest_marker("time_limit"), "args", (LIMIT_S,))[0]

    def expired(signum, frame):
        raise TimeoutError(f"{request.node.name}: over its time limit of {limit} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, limit)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def interrupted(cmd, marker, delay=0.0, cwd=None, stdin=None, wait_s=90):
    """Start console script ``cmd`` in its own process group, wait for ``marker`` (a regex; None: no wait) in its
    output, then ``delay`` seconds, send SIGINT to the group (a terminal's Ctrl-C); CompletedProcess with stdout and
    stderr together, and whether the marker was seen before the signal."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([os.path.join(BIN, cmd[0])] + list(cmd[1:]), cwd=cwd, env=env, text=True,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines, seen = [], threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if marker is not None and re.search(marker, line):
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.flush()
        if marker is None:
            seen.set()
        seen.wait(wait_s)
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=wait_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(10)
    result = subprocess.CompletedProcess(cmd, proc.returncode, "".join(lines), "")
    result.marker_seen = seen.is_set()
    return result


def one_interrupt_line(proc, command):
    """Exit status 130, no traceback from any process of the command, the Ctrl-C line last."""
    out = proc.stdout
    assert proc.marker_seen, output_tail(proc)
    assert proc.returncode == 130, output_tail(proc)
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, output_tail(proc)
    last = out.strip().splitlines()[-1]
    found = INTERRUPTED.match(last)
    assert found and found.group(1) == command, output_tail(proc)


def snapshot(folder):
    return {name: os.path.getsize(os.path.join(folder, name)) for name in sorted(os.listdir(folder))}


# ------------------------------------------------------------------------------------------------ Ctrl-C

def test_ctrl_c_in_fairseq_generate_is_one_line_and_keeps_an_earlier_results_file(multi30k_slice, tiny_checkpoint,
                                                                                  tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "generate-test.txt").write_text("an earlier run's translations\n")
    proc = interrupted(["fairseq-generate", multi30k_slice, "--user-dir", USER_DIR, "--path", tiny_checkpoint,
                        "--cpu", "--beam", "5", "--batch-size", "2", "--gen-subset", "test",
                        "--results-path", str(results)], r"loaded 1,000 examples from", delay=1.0)
    one_interrupt_line(proc, "fairseq-generate")
    assert sorted(os.listdir(results)) == ["generate-test.txt"]
    assert (results / "generate-test.txt").read_text() == "an earlier run's translations\n"


def test_ctrl_c_in_fairseq_interactive_waiting_for_input_is_one_line(multi30k_slice, tiny_checkpoint):
    proc = interrupted(["fairseq-interactive", multi30k_slice, "--user-dir", USER_DIR, "--path", tiny_checkpoint,
                        "--cpu", "-s", "en", "-t", "de"], r"Type the input sentence", delay=0.5, stdin="")
    one_interrupt_line(proc, "fairseq-interactive")


@pytest.fixture(scope="module")
def long_bpe_text(multi30k_slice, tmp_path_factory):
    """60,000 lines per language (the slice's BPE text, repeated): fairseq-preprocess binarizes them for seconds."""
    folder = tmp_path_factory.mktemp("long_bpe_text")
    for lang in ("en", "de"):
        with open(os.path.join(multi30k_slice, "tok", f"train.bpe.{lang}"), encoding="utf-8") as f:
            text = f.read()
        (folder / f"train.{lang}").write_text(text * 60, encoding="utf-8")
    return str(folder / "train")


def test_ctrl_c_in_fairseq_preprocess_with_workers_is_one_line_and_leaves_no_half_written_file(
        multi30k_slice, long_bpe_text, tmp_path):
    """An earlier split of the same name stays whole; no cut .bin, no .partial or workers' part file is left; the
    workers (a fork pool, Ctrl-C reaches them too) print nothing."""
    dest = tmp_path / "data-bin"
    dest.mkdir()
    for name in ("train.en-de.en.bin", "train.en-de.en.idx", "train.en-de.de.bin", "train.en-de.de.idx"):
        shutil.copy(os.path.join(multi30k_slice, name), dest / name)
    before = snapshot(dest)
    proc = interrupted(["fairseq-preprocess", "--user-dir", USER_DIR, "-s", "en", "-t", "de",
                        "--srcdict", os.path.join(multi30k_slice, "dict.en.txt"),
                        "--tgtdict", os.path.join(multi30k_slice, "dict.de.txt"),
                        "--trainpref", long_bpe_text, "--destdir", str(dest), "--workers", "2"],
                       r"\[en\] Dictionary: ", delay=0.5)
    one_interrupt_line(proc, "fairseq-preprocess")
    after = snapshot(dest)
    assert {n: s for n, s in after.items() if n in before} == before
    for name in ("train.en-de.en.bin", "train.en-de.en.idx"):
        assert filecmp.cmp(dest / name, os.path.join(multi30k_slice, name), shallow=False), name
    assert not [n for n in after if n.startswith(".") or "partial" in n or re.search(r"\d\.(bin|idx)$", n)], after


def test_fairseq_preprocess_renames_each_split_into_place_when_whole(multi30k_slice, tmp_path):
    """The control: finished, the same command writes the splits under their names and nothing else."""
    dest = tmp_path / "data-bin"
    run_cli(["fairseq-preprocess", "--user-dir", USER_DIR, "-s", "en", "-t", "de",
             "--srcdict", os.path.join(multi30k_slice, "dict.en.txt"),
             "--tgtdict", os.path.join(multi30k_slice, "dict.de.txt"),
             "--trainpref", os.path.join(multi30k_slice, "tok", "train.bpe"), "--destdir", str(dest), "--workers", "2"])
    assert sorted(os.listdir(dest)) == ["dict.de.txt", "dict.en.txt", "preprocess.log", "train.en-de.de.bin",
                                        "train.en-de.de.idx", "train.en-de.en.bin", "train.en-de.en.idx"]
    for name in ("train.en-de.en.bin", "train.en-de.en.idx"):
        assert filecmp.cmp(dest / name, os.path.join(multi30k_slice, name), shallow=False), name


@pytest.mark.parametrize("delay", [0.3, 1.5])
def test_ctrl_c_while_a_fusion_command_imports_is_one_line(delay, tmp_path):
    """Before the command has loaded torch, fairseq or the plugin (the tools' hook), and while it does."""
    proc = interrupted(["fusion-archs"], None, delay=delay, cwd=str(tmp_path))
    one_interrupt_line(proc, "fusion-archs")


def test_ctrl_c_in_fusion_prepare_text_with_a_worker_pool_is_one_line_and_leaves_no_folder(tmp_path):
    """58,000 lines per language: tokenized by a pool of workers started from a fork server (text_steps.py), which
    ignore Ctrl-C; the command ends the pool and removes its building folder."""
    raw = tmp_path / "raw"
    raw.mkdir()
    for lang in ("en", "de"):
        with gzip.open(os.path.join(os.environ.get("FUSION_DATA", ""), "multi30k", f"train.{lang}.gz"), "rt",
                       encoding="utf-8") as f:
            text = f.read()
        (raw / f"train.{lang}").write_text(text * 2, encoding="utf-8")
        with gzip.open(os.path.join(os.environ.get("FUSION_DATA", ""), "multi30k", f"val.{lang}.gz"), "rt",
                       encoding="utf-8") as f:
            (raw / f"val.{lang}").write_text(f.read(), encoding="utf-8")
    proc = interrupted(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", str(raw / "train"),
                        "--validpref", str(raw / "val"), "--destdir", str(tmp_path / "data-bin"), "--workers", "2"],
                       None, delay=8.0, cwd=str(tmp_path))
    one_interrupt_line(proc, "fusion-prepare-text")
    assert sorted(os.listdir(tmp_path)) == ["raw"]


FUSION_COMMANDS = sorted(n for n in metadata.entry_points(group="console_scripts").names
                         if n.startswith("fusion-") and n != "fusion-user-dir")


class Exited(Exception):
    def __init__(self, status):
        super().__init__(status)
        self.status = status


@pytest.mark.parametrize("command", FUSION_COMMANDS)
def test_ctrl_c_in_every_fusion_command_is_its_one_line_and_status_130(command, monkeypatch, capsys):
    """In-process: each command's parser is where Ctrl-C lands (its start); the exception goes to the process's hook,
    as the interpreter would give it; the hook says the line and ends with 130."""
    import argparse

    def pressed(self, *args, **kwargs):
        raise KeyboardInterrupt

    def exit_now(status):
        raise Exited(status)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", pressed)
    monkeypatch.setattr(os, "_exit", exit_now)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # the hook ignores a second Ctrl-C: not this process's
    monkeypatch.setattr(command_output, "stop_children", lambda: None)  # nor stops its workers
    main = entry_point(command)
    with command_state([command, "--help"]), pytest.raises(Exited) as ended:
        try:
            main()
        except KeyboardInterrupt:
            sys.excepthook(*sys.exc_info())
    assert ended.value.status == 130
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"fairseq-fusion: interrupted; {command} stopped before it finished"


def test_ctrl_c_while_a_split_is_opened_says_only_its_line(multi30k_slice, monkeypatch, capsys):
    """Ctrl-C inside fairseq's MMapIndexedDataset.__init__ (a training loading its data) leaves it half-built; its
    __del__ then fails (AttributeError) when the interrupted frames are collected: nothing of that is said after the
    one line."""
    from fairseq.data import indexed_dataset

    def pressed(path):
        raise KeyboardInterrupt

    def exit_now(status):
        raise Exited(status)

    unsaid = []
    monkeypatch.setattr(indexed_dataset, "_warmup_mmap_file", pressed)
    monkeypatch.setattr(sys, "unraisablehook", unsaid.append)  # what Python would print as "Exception ignored in"
    monkeypatch.setattr(os, "_exit", exit_now)
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    monkeypatch.setattr(command_output, "stop_children", lambda: None)
    try:
        indexed_dataset.MMapIndexedDataset(os.path.join(multi30k_slice, "train.en-de.en"))
    except KeyboardInterrupt as e:
        tb = e.__traceback__
    else:
        pytest.fail("MMapIndexedDataset no longer calls _warmup_mmap_file: the Ctrl-C did not land in its __init__")
    with command_state(["fairseq-generate"]), pytest.raises(Exited) as ended:
        command_output.report_interrupt(tb)
    assert ended.value.status == 130 and unsaid == []
    assert capsys.readouterr().err.strip().splitlines() == [
        "fairseq-fusion: interrupted; fairseq-generate stopped before it finished"]
    assert sys.unraisablehook == unsaid.append  # the hook is Python's again for what follows


def test_a_checkpoint_save_finishes_before_ctrl_c_ends_the_training(tmp_path):
    """Ctrl-C in the middle of fairseq's save (here: between its checkpoint and the copy it makes, a plain file copy):
    the save finishes, then the KeyboardInterrupt comes, and the Ctrl-C line names the update saved."""
    written = []

    def save_checkpoint(cfg, trainer, epoch_itr, val_loss):
        (tmp_path / "checkpoint3.pt").write_bytes(b"x" * 1000)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the signal has been delivered (and held) by now
        shutil.copyfile(tmp_path / "checkpoint3.pt", tmp_path / "checkpoint_last.pt")
        written.append("all")

    class Trainer:
        cfg = task = None

        def get_num_updates(self):
            return 42

    cfg = type("Cfg", (), {"save_dir": str(tmp_path)})()
    saved = entry_checks._recorded_save(save_checkpoint)
    command_output.LAST_SAVED.clear()
    with pytest.raises(KeyboardInterrupt):
        saved(cfg, Trainer(), None, None)
    assert written == ["all"]
    assert (tmp_path / "checkpoint_last.pt").read_bytes() == b"x" * 1000
    assert command_output.LAST_SAVED["num_updates"] == 42
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_ctrl_c_a_held_block_runs_and_returns_as_it_is():
    with command_output.interrupts_held("nothing"):
        value = 1 + 1
    assert value == 2 and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_during_fairseq_train_before_its_first_checkpoint_is_one_line(multi30k_slice, tmp_path):
    """The existing test (test_refusals.py) interrupts after a checkpoint; this one as the model is being built."""
    save = tmp_path / "ck"
    proc = interrupted(tiny_train(multi30k_slice, str(save), "transformer_surface_fusion", max_update=100000),
                       r"num\. shared model params", delay=0.0)
    assert proc.marker_seen and proc.returncode == 130, output_tail(proc)
    assert "Traceback" not in proc.stdout, output_tail(proc)
    assert proc.stdout.strip().splitlines()[-1].startswith("fairseq-fusion: interrupted"), output_tail(proc)


# ------------------------------------------------------------------------------------------------ budgets

@pytest.mark.parametrize("flag, value", [("--stop-time-hours", "-1"), ("--stop-time-hours", "nan"),
                                         ("--stop-time-hours", "inf"), ("--max-update", "-5"),
                                         ("--max-epoch", "-1")])
def test_a_training_budget_without_a_meaning_is_one_line_naming_it(multi30k_slice, tmp_path, flag, value):
    args = tiny_train(multi30k_slice, str(tmp_path / "ck"), "fusion_transformer")
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    proc = run_cli(args, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, output_tail(proc)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(PREFIX + f"{flag} {value}"), output_tail(proc)
    assert "(0: no limit)" in last
    assert not os.path.exists(tmp_path / "ck" / "checkpoint_last.pt")


def test_usage_documents_fairseqs_no_limit_budgets():
    with open(os.path.join(REPO, "docs", "usage.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Ctrl-C, and when a training stops"):]
    for flag in ("--max-update 0", "--max-epoch 0", "--stop-time-hours 0", "--patience", "--stop-min-lr"):
        assert flag in section, flag


@pytest.mark.parametrize("cmd, flag", [
    (["fusion-compare", "{data}", "--system", "transformer", "--max-minutes", "0", "--target-lang", "de",
      "--work", "{work}"], "--max-minutes 0"),
    (["fusion-compare", "{data}", "--system", "transformer", "--max-minutes", "nan", "--target-lang", "de",
      "--work", "{work}"], "--max-minutes nan"),
    (["fusion-compare", "{data}", "--system", "transformer", "--max-minutes", "inf", "--target-lang", "de",
      "--work", "{work}"], "--max-minutes inf"),
    (["fusion-compare", "{data}", "--system", "transformer", "--max-update", "0", "--target-lang", "de",
      "--work", "{work}"], "--max-update 0"),
    (["fusion-gpu-check", "--device", "cpu", "--dtypes", "fp32", "--budget-minutes", "nan", "--work", "{work}", "--out", "{work}/r"],
     "--budget-minutes nan"),
    (["fusion-gpu-speed", "--device", "cpu", "--dtypes", "fp32", "--budget-minutes", "inf", "--work", "{work}", "--out", "{work}/r"],
     "--budget-minutes inf"),
    (["fusion-information-probe", "--path", "{work}/c.pt", "--out", "{work}/o", "--max-epochs", "0"], "--max-epochs 0"),
    (["fusion-information-probe", "--path", "{work}/c.pt", "--out", "{work}/o", "--patience", "0"], "--patience 0"),
    (["fusion-lexical-probe", "--path", "{work}/c.pt", "--out", "{work}/o", "--max-epochs", "-1"], "--max-epochs -1"),
])
def test_a_tools_budget_without_a_meaning_is_one_line_naming_it(tmp_path, cmd, flag):
    work = tmp_path / "work"
    cmd = [part.format(data=str(tmp_path), work=str(work)) for part in cmd]
    proc = run_cli(cmd, cwd=str(tmp_path), check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, output_tail(proc)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(PREFIX) and flag in last and "no 'no limit' value" in last, output_tail(proc)
    assert not work.exists() or all(n.endswith(".lock") for n in os.listdir(work))  # the --out lock's file stays


# ------------------------------------------------------------------------------------------------ divergence

@pytest.mark.parametrize("arch", ["fusion_transformer", "transformer"])
def test_divergence_is_one_line_naming_the_update_and_the_flags(multi30k_slice, tmp_path, arch):
    """--lr 1e20: the third update's gradients are NaN (fairseq: FloatingPointError, then its NanDetector's re-run
    ends in StopIteration on the encoders' dict output)."""
    args = tiny_train(multi30k_slice, str(tmp_path / "ck"), arch, max_update=50)
    args[args.index("--lr") + 1] = "1e20"
    proc = run_cli(args, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout, output_tail(proc)
    last = proc.stderr.strip().splitlines()[-1]
    assert re.match(re.escape(PREFIX) + r"training diverged at update \d+: the loss or its gradients are NaN or "
                    r"infinite; try a lower --lr \(now 1e\+20\), a longer --warmup-updates \(now 4\), --clip-norm",
                    last), output_tail(proc)
    assert f"{tmp_path}/ck/crash.pt" in last


def test_fp16s_minimum_loss_scale_is_named_with_its_flag():
    """fairseq's other divergence, fp16's loss scale at its floor (DynamicLossScaler), worded with its flags."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"optimization": {"lr": [0.0005], "clip_norm": 0.0}, "lr_scheduler": {"warmup_updates": 4000},
                            "checkpoint": {"save_dir": "/nonexistent"},
                            "common": {"fp16": True, "bf16": False, "min_loss_scale": 0.0001}})
    trainer = type("Trainer", (), {"cfg": cfg})()
    error = FloatingPointError("Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the "
                               "learning rate, using gradient clipping or increasing the batch size.")
    line = stop_conditions.divergence_line(error, trainer, 1234)
    assert line == ("training diverged at update 1234: the fp16 loss scale fell to --min-loss-scale 0.0001, the loss "
                    "overflows fp16 at every scale; try a lower --lr (now 0.0005), a longer --warmup-updates (now 4000), "
                    "--clip-norm 0.1 (now none), --bf16, or fp32 (no --fp16)")
    stop = StopIteration()
    stop.__context__ = error
    assert stop_conditions._divergence(stop) is error
    assert stop_conditions._divergence(StopIteration()) is None


# ------------------------------------------------------------------------------------------------ module names

def dropout_on(arch, value, data):
    """The module paths whose dropout fairseq-generate's --retain-dropout [--retain-dropout-modules VALUE] keeps on."""
    from fairseq.modules import FairseqDropout

    model, _, _ = build_model(data, arch, *SMALL_MODEL_ARGS, "--dropout", "0.1", "--attention-dropout", "0.1",
                              "--activation-dropout", "0.1")
    # fairseq's own prepare_for_inference_: this process may have run a command in-process, whose check of the names
    # (module_names.py, tested below) would refuse the ones that keep nothing on
    inspect.unwrap(type(model).prepare_for_inference_)(model, generation_config(value, data))
    return model, sorted(n for n, m in model.named_modules() if isinstance(m, FairseqDropout) and m.apply_during_inference)


@functools.lru_cache(maxsize=None)
def generation_config(value, data):
    """fairseq-generate's configuration with --retain-dropout [--retain-dropout-modules VALUE] (read, not changed)."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    flags = ["--retain-dropout"] + (["--retain-dropout-modules", value] if value is not None else [])
    gen = options.parse_args_and_arch(options.get_generation_parser(), [data, "-s", "src", "-t", "tgt", *flags])
    return convert_namespace_to_omegaconf(gen)


@pytest.fixture(scope="module")
def dicts(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("dicts"), 20)


@functools.lru_cache(maxsize=None)
def transformer_dropout_on(value, data):
    """``dropout_on`` of fairseq's transformer, once per value."""
    return dropout_on("transformer", value, data)[1]


PLUGIN_ARCHS = ["fusion_transformer", "transformer_lexical_shortcuts", "transformer_multilayer_attention"]


@pytest.mark.parametrize("value", ["TransformerEncoderLayerBase", "TransformerDecoderLayerBase", "MultiheadAttention",
                                   "TransformerEncoder", "TransformerDecoder,MultiheadAttention",
                                   "TransformerEncoderLayer", None])
@pytest.mark.parametrize("arch", PLUGIN_ARCHS)
def test_monte_carlo_dropout_keeps_the_named_modules_on_as_for_transformer(dicts, arch, value):
    """The same module paths on as fairseq's transformer, by fairseq's own test on the command line's text (where
    ``TransformerEncoderLayer`` keeps only the encoder's embedding dropout on: ``TransformerEncoder`` is in it)."""
    theirs = transformer_dropout_on(value, dicts)
    model, ours = dropout_on(arch, value, dicts)
    assert theirs, "the control: fairseq's transformer keeps some dropout on"
    assert ours == theirs


def test_monte_carlo_dropout_is_on_where_kept_and_off_elsewhere(tmp_path):
    """Two passes of a plugin arch in inference mode differ where the decoder layers keep dropout on, and agree
    without (the flags' effect, not only their record)."""
    data = write_dicts(tmp_path, 20)
    tokens = torch.tensor([[5, 6, 7, 2]])
    outputs = {}
    for value in ("TransformerDecoderLayerBase", "NoSuchModuleName"):
        model, _ = dropout_on("transformer_lexical_shortcuts", value, data)
        passes = [model(tokens, torch.tensor([4]), tokens)[0] for _ in range(2)]
        outputs[value] = torch.equal(*passes)
    assert outputs == {"TransformerDecoderLayerBase": False, "NoSuchModuleName": True}


def test_the_plugins_own_class_names_keep_their_modules_on(tmp_path):
    data = write_dicts(tmp_path, 20)
    _, on = dropout_on("fusion_transformer", "FusionDecoderLayer", data)
    assert on and all(name.startswith("decoder.layers.") for name in on)


def test_every_dropout_module_of_every_arch_answers_to_a_name(tmp_path):
    """A new plugin class that builds a dropout under its own class name, and plays a fairseq module's part, needs
    its fairseq name in dropout_names.FAIRSEQ_NAMES (or is a technique's own module)."""
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.modules import FairseqDropout

    data = write_dicts(tmp_path, 20)
    model, _, _ = build_model(data, "transformer", *SMALL_MODEL_ARGS)
    fairseq_names = {m.module_name for m in model.modules() if isinstance(m, FairseqDropout)}
    known = fairseq_names | set(dropout_names.FAIRSEQ_NAMES) | set(dropout_names.TECHNIQUE_ONLY)
    unknown = {}
    archs = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m.__module__.startswith("fairseq_fusion"))
    assert len(archs) > 30
    for arch in archs:
        model, _, _ = build_model(data, arch, *SMALL_MODEL_ARGS)
        names = {m.module_name for m in model.modules() if isinstance(m, FairseqDropout)}
        if names - known:
            unknown[arch] = sorted(names - known)
    assert not unknown, unknown


def test_retain_dropout_modules_naming_no_module_is_one_line(multi30k_slice, tiny_checkpoint):
    base = ["fairseq-generate", multi30k_slice, "--user-dir", USER_DIR, "--path", tiny_checkpoint, "--cpu",
            "--gen-subset", "test", "--max-sentences", "8", "--num-shards", "100", "--shard-id", "0", "--beam", "2",
            "--max-len-a", "0", "--max-len-b", "3"]
    proc = run_cli(base + ["--retain-dropout", "--retain-dropout-modules", "TransformerEncoderLayer"], check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, output_tail(proc)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(PREFIX + "--retain-dropout-modules: no dropout module of this model") and \
        "named TransformerEncoderLayer," in last and "TransformerEncoderLayerBase" in last, last
    proc = run_cli(base + ["--retain-dropout-modules", "MultiheadAttention"], check=False)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "without --retain-dropout" in last, output_tail(proc)
    run_cli(base + ["--retain-dropout", "--retain-dropout-modules", "TransformerDecoderLayerBase"])
