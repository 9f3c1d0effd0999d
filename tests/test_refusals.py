"""Bad input at fairseq's entry points ends in one line, ``fairseq-fusion: error: ...``, naming the flag or
file and what was expected, with a non-zero exit and no traceback (errors.py, entry_checks.py; every cut and corruption
of a checkpoint: test_checkpoint_files.py)."""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import BIN, REPO, run_cli, unwritable_folder, with_a_longer_dictionary
from fairseq_fusion_tools.gpu import check_benchmark
from conftest import tiny_train_args as tiny_train
from fairseq_fusion import errors
from fairseq_fusion.guards import command_output
from fairseq_fusion.errors import PREFIX, FusionError

USER_DIR = os.path.join(REPO, "fairseq_fusion")


def written(folder):
    """What a command wrote in ``folder``, but the training lock's empty file, which a training takes in its --save-dir
    before anything else and leaves there (save_dir_lock.py)."""
    return sorted(n for n in os.listdir(folder) if n != "training.lock")


def one_line_refusal(proc, *expected):
    """Exit status 1, no traceback, and the last stderr line is the plugin's refusal naming ``expected``."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(PREFIX), proc.stderr[-3000:]
    for word in expected:
        assert word in last, last
    return last


@pytest.fixture(scope="module")
def checkpoint(tiny_checkpoint):
    return tiny_checkpoint


@pytest.mark.parametrize("case, expected", [
    (["transformer_surface_fusion", "--surface-fusion-lambda", "1.5"], ["--surface-fusion-lambda", "[0, 1]", "1.5"]),
    (["transformer_multilayer_attention", "--lexical-shortcuts"], ["--multilayer-attention", "--lexical-shortcuts"]),
    (["fusion_transformer", "--lexical-shortcuts-sides", "encoder"], ["--lexical-shortcuts-sides", "--lexical-shortcuts"]),
])
def test_fairseq_train_refuses_bad_flags_in_one_line(multi30k_slice, tmp_path, case, expected):
    proc = run_cli(tiny_train(multi30k_slice, str(tmp_path), *case), check=False)
    one_line_refusal(proc, *expected)
    assert not written(tmp_path), "a refused run must not write a checkpoint"


def test_fairseq_train_names_a_missing_data_folder(tmp_path):
    missing = str(tmp_path / "data-bin")
    proc = run_cli(tiny_train(missing, str(tmp_path / "ck"), "fusion_transformer"), check=False)
    one_line_refusal(proc, f"data folder {missing}", "no such directory", "dict.SRC.txt")


def generate(data, path, *extra):
    return run_cli(["fairseq-generate", data, "--user-dir", USER_DIR, "--path", path, "--cpu", "--beam", "1",
                    "--max-len-b", "5", "--max-sentences", "16", "--quiet", *extra], check=False)


def test_fairseq_generate_names_a_bad_checkpoint_file(multi30k_slice, checkpoint, tmp_path):
    truncated, empty = str(tmp_path / "truncated.pt"), str(tmp_path / "empty.pt")
    with open(checkpoint, "rb") as f, open(truncated, "wb") as out:
        out.write(f.read()[:4000])
    open(empty, "wb").close()
    one_line_refusal(generate(multi30k_slice, truncated), f"checkpoint {truncated}", "4000 bytes", "truncated")
    one_line_refusal(generate(multi30k_slice, empty), f"checkpoint {empty}", "empty (0 bytes)")
    missing = str(tmp_path / "missing.pt")
    one_line_refusal(generate(multi30k_slice, missing), f"checkpoint {missing}", "no such file")


def test_fairseq_generate_refuses_a_misspelt_model_override(multi30k_slice, checkpoint):
    proc = generate(multi30k_slice, checkpoint, "--model-overrides", "{'surface_fusion_lamda': 0.5}")
    last = one_line_refusal(proc, "'surface_fusion_lamda'", "surface_fusion_lambda")
    assert last.index("did you mean surface_fusion_lambda") > 0


def test_fairseq_generate_refuses_a_model_override_outside_the_flags_range(multi30k_slice, checkpoint):
    """The registry's check of choices and ranges (tests/test_flag_values.py: every flag) on a loaded checkpoint."""
    proc = generate(multi30k_slice, checkpoint, "--model-overrides", "{'surface_fusion_lambda': 1.5}")
    one_line_refusal(proc, "--surface-fusion-lambda 1.5: expected a weight in [0, 1]")


def test_fairseq_generate_names_the_dictionary_of_another_vocabulary(multi30k_slice, checkpoint, tmp_path):
    other = with_a_longer_dictionary(multi30k_slice, tmp_path / "other-bin")
    with open(other / "dict.en.txt") as f:
        n_other = sum(1 for _ in f) + 4  # + the special symbols fairseq adds
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    n_trained = state["model"]["encoder.embed_tokens.weight"].shape[0]
    last = one_line_refusal(generate(str(other), checkpoint), f"{other}/dict.en.txt", f"gives {n_other}",
                            f"{n_trained} entries")
    assert n_other == n_trained + 1, last


def test_traceback_on_request(multi30k_slice, tmp_path):
    proc = run_cli(tiny_train(multi30k_slice, str(tmp_path), "transformer_surface_fusion", "--surface-fusion-lambda", "2"),
                   check=False, env={errors.TRACEBACK_ENV: "1"})
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "FusionError" in proc.stderr


def test_hub_raises_the_same_message(tmp_path):
    from fairseq_fusion.models import FusionTransformerModel

    missing = str(tmp_path / "no-such-folder")
    with pytest.raises(FusionError) as e:
        FusionTransformerModel.from_pretrained(missing, checkpoint_file="checkpoint_best.pt", data_name_or_path="data-bin")
    assert str(e.value) == f"{PREFIX}from_pretrained: {missing}: no such folder; expected the folder that holds checkpoint_best.pt"
    (tmp_path / "run").mkdir()
    with pytest.raises(FusionError, match=r"checkpoint .*run/checkpoint_best\.pt: no such file"):
        FusionTransformerModel.from_pretrained(str(tmp_path / "run"), checkpoint_file="checkpoint_best.pt")


def test_hydra_train_refuses_in_one_line(multi30k_slice, tmp_path):
    """fairseq-hydra-train reports a FusionError through hydra's compact error path: the message, no traceback."""
    proc = subprocess.run(
        [os.path.join(BIN, "fairseq-hydra-train"), "--config-dir", os.path.join(REPO, "recipes", "hydra"),
         "--config-name", "transformer_surface_fusion", f"task.data={multi30k_slice}", "task.source_lang=en", "task.target_lang=de",
         f"common.user_dir={USER_DIR}",
         "model.surface_fusion_lambda=1.5", "common.cpu=true", "distributed_training.distributed_world_size=1",
         f"checkpoint.save_dir={tmp_path}/ck", f"hydra.run.dir={tmp_path}/run"],
        capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
    assert lines and "model.surface_fusion_lambda=1.5: expected a weight in [0, 1]" in lines[0], proc.stderr[-3000:]


def test_ctrl_c_during_training_names_the_checkpoint_to_resume_from(multi30k_slice, tmp_path):
    save = tmp_path / "ck"
    cmd = tiny_train(multi30k_slice, str(save), "fusion_transformer", "--save-interval-updates", "2",
                     "--no-epoch-checkpoints", max_update=100000)
    # started as a terminal's shell starts it: Ctrl-C acts (a suite run in the background has SIGINT ignored, and
    # its children would inherit that)
    proc = subprocess.Popen([os.path.join(BIN, cmd[0])] + cmd[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), preexec_fn=check_benchmark.interruptible)
    try:
        deadline = time.time() + 120
        while not (save / "checkpoint_last.pt").exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
        time.sleep(1.0)  # past the save: the hook has recorded it
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "Traceback" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    updates = state["optimizer_history"][-1]["num_updates"]
    assert last == (f"fairseq-fusion: interrupted; the same command resumes from {save}/checkpoint_last.pt "
                    f"(update {updates})"), stderr[-2000:]


def test_ctrl_c_before_the_first_checkpoint(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["fairseq-train", "data-bin", "--save-dir", str(tmp_path / "ck")])
    monkeypatch.setattr(command_output, "LAST_SAVED", {})
    assert command_output.interrupted_message() == (
        f"fairseq-fusion: interrupted before the first checkpoint ({tmp_path}/ck/checkpoint_last.pt does not exist): "
        "the same command starts from scratch")


def test_commands_refuse_only_through_the_one_line_form():
    """Every refusal of the plugin and of a fusion-* command goes through FusionError or the tools' fail
    (fairseq_fusion_tools/user_files.py): no bare SystemExit/sys.exit with a message, whose line would lack the
    ``fairseq-fusion: error:`` prefix."""
    import glob
    import re

    bare = re.compile(r"(raise SystemExit|sys\.exit)\(\s*(f?[\"']|[a-z_]+\s*\+|str\()")
    found = []
    paths = [p for package in ("fairseq_fusion", "fairseq_fusion_tools")
             for p in glob.glob(os.path.join(REPO, package, "**", "*.py"), recursive=True)]
    assert len(paths) > 100
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if bare.search(line) and not path.endswith(("errors.py", "user_files.py")):
                    found.append(f"{os.path.relpath(path, REPO)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("cmd, expected", [
    (["fusion-score-bleu", "--hyp", "no-such-hyp.txt", "--ref", "no-such-ref.txt", "-t", "de"], ["--hyp no-such-hyp.txt"]),
    (["fusion-archs", "transformer_phraze"], ["transformer_phraze", "transformer_phrase"]),
])
def test_fusion_commands_refuse_in_one_line(cmd, expected, tmp_path):
    one_line_refusal(run_cli(cmd, cwd=str(tmp_path), check=False), *expected)


def test_hub_names_a_bad_data_folder_bpe_or_language_pair(multi30k_slice, checkpoint, tmp_path):
    """from_pretrained's other arguments: fairseq went on with None (TypeError), read a plain file as an archive
    (CompressionError), looked up an unknown bpe (KeyError) or could not tell the languages (bare Exception)."""
    from fairseq_fusion.models import FusionTransformerModel

    folder, name = os.path.dirname(checkpoint), os.path.basename(checkpoint)

    def refusal(**kwargs):
        with pytest.raises(FusionError) as e:
            FusionTransformerModel.from_pretrained(folder, checkpoint_file=name, **kwargs)
        assert "\n" not in str(e.value)
        return str(e.value)

    missing, a_file = str(tmp_path / "no-data"), os.path.join(multi30k_slice, "dict.en.txt")
    assert f"data_name_or_path {missing}: no such folder" in refusal(data_name_or_path=missing)
    assert f"data_name_or_path {a_file}: is a file" in refusal(data_name_or_path=a_file)
    assert "bpe='subword-nmt': no such bpe (did you mean subword_nmt?)" in refusal(
        data_name_or_path=multi30k_slice, bpe="subword-nmt")
    dicts_only = tmp_path / "dicts-only"
    dicts_only.mkdir()
    for lang in ("en", "de"):
        shutil.copy(os.path.join(multi30k_slice, f"dict.{lang}.txt"), dicts_only)
    # fairseq-interactive cannot tell the languages of a folder of dictionaries alone: one line with the flags
    proc = run_cli(["fairseq-interactive", str(dicts_only), "--user-dir", USER_DIR, "--path", checkpoint, "--cpu"],
                   check=False)
    one_line_refusal(proc, f"data folder {dicts_only}: no binarized split", "-s SRC -t TGT")
    # the hub takes them from the checkpoint (fairseq-train records the languages it inferred)
    hub = FusionTransformerModel.from_pretrained(folder, checkpoint_file=name, data_name_or_path=str(dicts_only))
    with open(dicts_only / "dict.en.txt") as f:
        assert len(hub.task.source_dictionary) == sum(1 for _ in f) + 4  # + fairseq's special symbols


def test_fairseq_commands_name_an_unusable_folder_file_or_split(multi30k_slice, checkpoint, tmp_path):
    """fairseq's NotADirectoryError / PermissionError / FileNotFoundError tracebacks, and its 'Dataset not found'
    that names no flag, become one line naming the flag (command_paths.py)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    proc = run_cli(tiny_train(multi30k_slice, str(a_file / "ck"), "fusion_transformer"), check=False)
    one_line_refusal(proc, f"--save-dir {a_file}/ck", f"{a_file} is a file; expected a folder")
    readonly = tmp_path / "readonly"
    readonly.mkdir(mode=0o555)
    unwritable = unwritable_folder(str(readonly))
    if unwritable is not None:
        proc = run_cli(tiny_train(multi30k_slice, os.path.join(unwritable, "ck"), "fusion_transformer"), check=False)
        one_line_refusal(proc, f"--save-dir {unwritable}/ck: cannot write in it")
    splits = sorted({n.split(".")[0] for n in os.listdir(multi30k_slice) if n.endswith(".en-de.en.idx")})
    proc = generate(multi30k_slice, checkpoint, "--gen-subset", "tset")
    one_line_refusal(proc, "split 'tset'", f"data folder {multi30k_slice}", f"it has {', '.join(splits)}")
    proc = run_cli(tiny_train(multi30k_slice, str(tmp_path / "ck"), "fusion_transformer", "--valid-subset", "vaild"),
                   check=False)
    one_line_refusal(proc, "split 'vaild'", "--valid-subset")
    proc = generate(multi30k_slice, checkpoint, "--results-path", str(a_file / "out"))
    one_line_refusal(proc, f"--results-path {a_file}/out", f"{a_file} is a file")
    for given, what in ((tmp_path / "no-input.txt", "no such file"), (tmp_path, "is a folder")):
        proc = run_cli(["fairseq-interactive", multi30k_slice, "--user-dir", USER_DIR, "--path", checkpoint, "--cpu",
                        "--input", str(given)], check=False)
        one_line_refusal(proc, f"--input {given}: {what}")
    assert a_file.read_text() == "not a folder\n"


def test_generate_results_file_is_written_whole(multi30k_slice, checkpoint, tmp_path):
    """fairseq-generate --results-path: a run that finishes replaces an earlier generate-test.txt with its own, and
    leaves nothing else in the folder (it wrote into a scratch folder there)."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "generate-test.txt").write_text("an earlier run's translations\n")
    proc = generate(multi30k_slice, checkpoint, "--gen-subset", "test", "--results-path", str(results))
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = (results / "generate-test.txt").read_text()
    assert written.startswith("Generate test with beam=1: BLEU4 = ") and "an earlier run" not in written  # --quiet
    assert os.listdir(results) == ["generate-test.txt"]


def test_refused_generate_keeps_an_earlier_results_file(multi30k_slice, tmp_path):
    """A refused run (fairseq opened generate-test.txt for writing before it loaded the model) leaves an earlier
    results file as it was, and no folder it would have made."""
    results = tmp_path / "results"
    results.mkdir()
    earlier = results / "generate-test.txt"
    earlier.write_text("an earlier run's translations\n")
    proc = generate(multi30k_slice, str(tmp_path / "no-such.pt"), "--gen-subset", "test", "--results-path", str(results))
    one_line_refusal(proc, "no-such.pt")
    assert earlier.read_text() == "an earlier run's translations\n"
    assert os.listdir(results) == ["generate-test.txt"]
    proc = generate(multi30k_slice, str(tmp_path / "no-such.pt"), "--results-path", str(tmp_path / "new"))
    one_line_refusal(proc, "no-such.pt")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("flags, expected", [
    (["--restore-file", "{tmp}/no-such.pt"], ["--restore-file {tmp}/no-such.pt: no such file", "starts fresh"]),
    (["--finetune-from-model", "{tmp}/no-such.pt"], ["--finetune-from-model {tmp}/no-such.pt: no such file"]),
    (["--restore-file", "{ckpt}", "--finetune-from-model", "{ckpt}"], ["--restore-file {ckpt} and --finetune-from-model", "give one"]),
])
def test_fairseq_train_refuses_a_checkpoint_to_start_from_that_is_not_there(multi30k_slice, checkpoint, tmp_path, flags,
                                                                             expected):
    """fairseq trained from scratch without a word when an explicit --restore-file was missing."""
    fill = dict(tmp=tmp_path, ckpt=checkpoint)
    save = tmp_path / "ck"
    proc = run_cli(tiny_train(multi30k_slice, str(save), "fusion_transformer", *[f.format(**fill) for f in flags]),
                   check=False)
    one_line_refusal(proc, *[e.format(**fill) for e in expected])
    assert not save.exists() or not written(save)


def test_user_dir_by_another_path_is_the_imported_plugin(tmp_path):
    """In a process that imported the plugin (conftest did), --user-dir naming its folder through a link or with
    `..` is the plugin; another folder of the same name is still fairseq's "not globally unique" ImportError."""
    import argparse

    from fairseq import utils

    os.symlink(USER_DIR, tmp_path / "fairseq_fusion")
    for spelling in (str(tmp_path / "fairseq_fusion"), os.path.join(REPO, "tests", "..", "fairseq_fusion")):
        assert utils.import_user_module(argparse.Namespace(user_dir=spelling)) is None
    other = tmp_path / "other" / "fairseq_fusion"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    with pytest.raises(ImportError, match="not globally unique"):
        utils.import_user_module(argparse.Namespace(user_dir=str(other)))


def longest_pair(data, split):
    """(line number, tokens, source tokens, target tokens) of the longest pair of a split of the prepared folder
    ``data``, counted from its BPE'd text: words + </s> on each side, the pair's length the longer side."""
    sides = []
    for lang in ("en", "de"):
        with open(os.path.join(data, "tok", f"{split}.bpe.{lang}"), encoding="utf-8") as f:
            sides.append([len(line.split()) + 1 for line in f])
    pairs = [(max(s, t), -i, s, t) for i, (s, t) in enumerate(zip(*sides))]
    length, minus_index, src, tgt = max(pairs)
    return 1 - minus_index, length, src, tgt


def test_fairseq_train_with_max_tokens_below_a_validation_sentence_names_it(multi30k_slice, tmp_path):
    line, length, src, tgt = longest_pair(multi30k_slice, "valid")
    proc = run_cli(tiny_train(multi30k_slice, str(tmp_path), "fusion_transformer", "--max-tokens", "20"), check=False)
    one_line_refusal(proc, "--max-tokens 20", f"line {line} of valid: {length} tokens (source {src}, target {tgt}",
                     f"give --max-tokens {length} or more", "--skip-invalid-size-inputs-valid-test")
    assert not written(tmp_path), "a refused run must not write a checkpoint"
    proc = run_cli(tiny_train(multi30k_slice, str(tmp_path), "fusion_transformer", "--max-tokens", str(length)))
    assert proc.returncode == 0  # the value the line gives works


def test_fairseq_generate_with_max_tokens_below_a_test_sentence_names_it(multi30k_slice, checkpoint):
    line, length, _, _ = longest_pair(multi30k_slice, "test")
    for extra in ([], ["--skip-invalid-size-inputs-valid-test"]):  # fairseq's flag skips only over-long positions
        proc = generate(multi30k_slice, checkpoint, "--gen-subset", "test", "--max-tokens", "20", *extra)
        one_line_refusal(proc, "--max-tokens 20", f"source line {line} of test: {length} tokens",
                         f"give --max-tokens {length} or more")


@pytest.mark.parametrize("flag, value", [("--max-tokens", "0"), ("--max-tokens", "-5"), ("--batch-size", "0"),
                                         ("--batch-size", "-1"), ("--max-tokens-valid", "0"), ("--batch-size-valid", "-2")])
def test_a_batch_limit_of_zero_or_less_is_one_line(multi30k_slice, checkpoint, tmp_path, flag, value):
    """fairseq ends in an IndexError on --max-tokens 0 or less, trains with no limit on --batch-size 0 and allocates
    the whole split on a negative one (30 GB for Multi30k): fairseq-train, -generate and -interactive refuse it."""
    expected = (f"{flag} {value}: expected a number of {'tokens' if 'tokens' in flag else 'sentences'} per batch >= 1",)
    proc = run_cli(tiny_train(multi30k_slice, str(tmp_path), "fusion_transformer", flag, value), check=False)
    one_line_refusal(proc, *expected)
    assert not os.listdir(tmp_path)
    one_line_refusal(generate(multi30k_slice, checkpoint, "--gen-subset", "test", flag, value), *expected)
    proc = run_cli(["fairseq-interactive", multi30k_slice, "--user-dir", USER_DIR, "--path", checkpoint, "--cpu", flag,
                    value, "--input", str(tmp_path / "missing.txt")], check=False)
    one_line_refusal(proc, *expected)


@pytest.mark.parametrize("flags, expected", [
    (["--beam", "0"], "--beam 0: expected a number of hypotheses the search keeps >= 1"),
    (["--beam", "-2"], "--beam -2: expected a number of hypotheses the search keeps >= 1"),
    (["--nbest", "0"], "--nbest 0: expected a number of hypotheses printed per sentence >= 1"),
    (["--beam", "2", "--nbest", "3"], "--nbest 3 with --beam 2: the search keeps 2 hypotheses; give --nbest 2 or less"),
    (["--min-len", "50", "--max-len-a", "0", "--max-len-b", "10"], "--min-len 50 is more than --max-len-a 0.0 x the "
     "source length + --max-len-b 10 allows"),
])
def test_a_search_fairseq_cannot_run_is_one_line(multi30k_slice, checkpoint, tmp_path, flags, expected):
    """fairseq-generate and -interactive: --beam or --nbest of 0 or less (a reshape error, a negative dimension, a
    ZeroDivisionError in fairseq), more hypotheses than the beam keeps, an empty output length window (fairseq's
    assertion)."""
    proc = run_cli(["fairseq-generate", multi30k_slice, "--user-dir", USER_DIR, "--path", checkpoint, "--cpu",
                    "--gen-subset", "test", "--max-sentences", "16", "--quiet", *flags], check=False)
    one_line_refusal(proc, expected)
    source = tmp_path / "source.txt"
    source.write_text("A dog runs through the grass .\n")
    proc = run_cli(["fairseq-interactive", multi30k_slice, "--user-dir", USER_DIR, "--path", checkpoint, "--cpu",
                    "--input", str(source), *flags], check=False)
    one_line_refusal(proc, expected)


def test_fairseq_train_without_a_batch_size_names_both_flags(multi30k_slice, tmp_path):
    args = tiny_train(multi30k_slice, str(tmp_path), "fusion_transformer")
    at = args.index("--max-tokens")
    proc = run_cli(args[:at] + args[at + 2:], check=False)
    one_line_refusal(proc, "no batch size", "--max-tokens N", "--batch-size N")
    assert not os.listdir(tmp_path)
