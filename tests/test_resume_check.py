"""A save folder holds one run (resume_check.py): resuming it with another model (a technique value, another arch,
another size) is refused in one line naming the folder and each differing setting with both values, and leaves the
folder as it was; training settings (lr, dropout, batch size, budget) resume, and fine-tuning (--reset-optimizer,
--finetune-from-model) loads the weights into a new setup where the parameters fit. fusion-compare's run folders
refuse another command the same way."""
import hashlib
import json
import os
import re
import shutil
import subprocess

import pytest
import torch

from conftest import BIN, REPO, run_cli, with_a_longer_dictionary
from conftest import tiny_train_args as tiny_train
from fairseq_fusion_tools.compare import commands
from test_refusals import USER_DIR, one_line_refusal, written

FINE_TUNE = ["--reset-optimizer", "--reset-dataloader", "--reset-meters"]


def saved_model_cfg(path):
    """The model settings a checkpoint file holds, read with torch.load (independent of the plugin's reading)."""
    return torch.load(path, map_location="cpu", weights_only=False)["cfg"]["model"]


def saved_updates(path):
    return torch.load(path, map_location="cpu", weights_only=False)["optimizer_history"][-1]["num_updates"]


def snapshot(folder):
    """Every file of a folder: its bytes' hash and modification time."""
    return {name: (hashlib.sha256(open(os.path.join(folder, name), "rb").read()).hexdigest(),
                   os.stat(os.path.join(folder, name)).st_mtime_ns) for name in sorted(os.listdir(folder))}


def differing(last_line):
    """The '(checkpoint -> this command: ...)' list of a refusal."""
    return re.search(r"\(checkpoint -> this command: (.*?)\)[;:]", last_line).group(1)


@pytest.fixture
def run_folder(tiny_checkpoint, tmp_path):
    """A copy of a finished 2-update run of transformer_surface_fusion (d=16) and its checkpoint_last.pt's settings."""
    folder = str(tmp_path / "ck")
    shutil.copytree(os.path.dirname(tiny_checkpoint), folder)
    return folder, saved_model_cfg(os.path.join(folder, "checkpoint_last.pt"))


@pytest.mark.parametrize("arch, extra, expected", [
    ("transformer_surface_fusion", ["--surface-fusion-lambda", "0.8"],
     lambda saved: f"--surface-fusion-lambda {saved.surface_fusion_lambda} -> 0.8"),
    ("transformer_surface_fusion", ["--encoder-layers", "2"], lambda saved: f"--encoder-layers {saved.encoder_layers} -> 2"),
    ("transformer_lexical_shortcuts", [],
     lambda saved: f"--arch {saved.arch} -> transformer_lexical_shortcuts, --surface-fusion {saved.surface_fusion} -> none"),
], ids=["technique-value", "layers", "arch"])
def test_resuming_another_model_is_refused_and_changes_nothing(multi30k_slice, run_folder, arch, extra, expected):
    folder, saved = run_folder
    before = snapshot(folder)
    proc = run_cli(tiny_train(multi30k_slice, folder, arch, *extra), check=False)
    last = one_line_refusal(proc, f"--save-dir {folder} holds a run of another model (checkpoint_last.pt)",
                            "start fresh with another --save-dir",
                            f"--restore-file {folder}/checkpoint_last.pt --reset-optimizer --reset-dataloader --reset-meters",
                            "--finetune-from-model")
    if arch == "transformer_surface_fusion":
        assert differing(last) == expected(saved)  # that setting alone: the run's other flags are the same
    else:  # another preset: --arch first, then the flags the presets set differently, a few of them
        assert differing(last).startswith(expected(saved)) and re.search(r" and \d+ more$", differing(last)), last
    assert snapshot(folder) == before


def test_training_settings_resume(multi30k_slice, run_folder):
    """lr, dropout (fairseq's and a technique's), batch size and budget are training settings: the run resumes."""
    folder, saved = run_folder
    assert saved.lr != [5e-4] and saved.dropout != 0.3 and saved.surface_fusion_embed_dropout
    proc = run_cli(tiny_train(multi30k_slice, folder, "transformer_surface_fusion", "--lr", "5e-4", "--dropout", "0.3",
                              "--surface-fusion-embed-dropout", "false", "--max-tokens", "1000", max_update=3))
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch 1 @ 2 updates\)", proc.stdout + proc.stderr)
    last = os.path.join(folder, "checkpoint_last.pt")
    assert saved_updates(last) == 3
    assert (saved_model_cfg(last).dropout, saved_model_cfg(last).surface_fusion_embed_dropout) == (0.3, False)


@pytest.mark.parametrize("how", ["restore-file", "finetune-from-model"])
def test_fine_tuning_may_change_a_technique_value(multi30k_slice, run_folder, tmp_path, how):
    """--restore-file X --reset-optimizer ... (into the same folder) or --finetune-from-model X (into a new one): the
    weights go into a new setup, which counts its updates from 0."""
    folder, saved = run_folder
    source = os.path.join(folder, "checkpoint_last.pt")
    if how == "restore-file":
        save, extra = folder, ["--restore-file", source, *FINE_TUNE]
    else:
        save, extra = str(tmp_path / "fine-tuned"), ["--finetune-from-model", source]
    proc = run_cli(tiny_train(multi30k_slice, save, "transformer_surface_fusion", "--surface-fusion-lambda", "0.8", *extra))
    assert re.search(r"Loaded checkpoint .*" + re.escape(source), proc.stdout + proc.stderr)
    last = os.path.join(save, "checkpoint_last.pt")
    assert saved.surface_fusion_lambda == 0.9 and saved_model_cfg(last).surface_fusion_lambda == 0.8
    assert saved_updates(last) == 2


def test_fine_tuning_parameters_that_do_not_fit_is_one_line(multi30k_slice, run_folder, tmp_path):
    folder, saved = run_folder
    source = os.path.join(folder, "checkpoint_last.pt")
    save = tmp_path / "other"
    proc = run_cli(tiny_train(multi30k_slice, str(save), "transformer_surface_fusion", "--decoder-layers", "2",
                              "--finetune-from-model", source), check=False)
    last = one_line_refusal(proc, f"checkpoint {source}: its parameters do not fit this command's model",
                            "fusion-convert-checkpoint")
    assert differing(last) == f"--decoder-layers {saved.decoder_layers} -> 2"
    assert not written(save)


def test_resuming_with_another_vocabulary_names_the_dictionary(multi30k_slice, run_folder, tmp_path):
    """The model's own refusal on load (guards/vocabulary_sizes.py), which fairseq wraps in a bare Exception, stays one line."""
    folder, saved = run_folder
    other = with_a_longer_dictionary(multi30k_slice, tmp_path / "other-bin")
    before = snapshot(folder)
    proc = run_cli(tiny_train(str(other), folder, "transformer_surface_fusion"), check=False)
    one_line_refusal(proc, "checkpoint does not match this model's source dictionary", f"{other}/dict.en.txt")
    assert snapshot(folder) == before


def test_an_explicit_restore_file_resumes_only_its_own_model(multi30k_slice, run_folder, tmp_path):
    folder, saved = run_folder
    source = os.path.join(folder, "checkpoint_last.pt")
    save = tmp_path / "elsewhere"
    proc = run_cli(tiny_train(multi30k_slice, str(save), "transformer_surface_fusion", "--surface-fusion-tau", "2",
                              "--restore-file", source), check=False)
    last = one_line_refusal(proc, f"--restore-file {source} is a checkpoint of another model")
    assert differing(last) == f"--surface-fusion-tau {saved.surface_fusion_tau} -> 2.0"
    assert not written(save)


def test_fairseqs_own_transformer_is_checked_too(multi30k_slice, tmp_path):
    folder = str(tmp_path / "ck")
    run_cli(tiny_train(multi30k_slice, folder, "transformer"))
    saved = saved_model_cfg(os.path.join(folder, "checkpoint_last.pt"))
    before = snapshot(folder)
    proc = run_cli(tiny_train(multi30k_slice, folder, "transformer", "--decoder-attention-heads", "4"), check=False)
    last = one_line_refusal(proc, f"--save-dir {folder} holds a run of another model")
    assert differing(last) == f"--decoder-attention-heads {saved.decoder_attention_heads} -> 4"
    assert snapshot(folder) == before


def test_hydra_train_into_the_folder_is_refused(multi30k_slice, run_folder, tmp_path):
    """fairseq-hydra-train (the recipe's YAML, lambda 0.8) into the folder of a fairseq-train run at the same size."""
    folder, saved = run_folder
    before = snapshot(folder)
    sizes = [f"+model.{k}={v}" for k, v in (("encoder_layers", 1), ("decoder_layers", 1), ("encoder_embed_dim", 16),
             ("decoder_embed_dim", 16), ("encoder_ffn_embed_dim", 32), ("decoder_ffn_embed_dim", 32),
             ("encoder_attention_heads", 2), ("decoder_attention_heads", 2))]
    proc = subprocess.run(
        [os.path.join(BIN, "fairseq-hydra-train"), "--config-dir", os.path.join(REPO, "recipes", "hydra"),
         "--config-name", "transformer_surface_fusion", f"task.data={multi30k_slice}", "task.source_lang=en",
         "task.target_lang=de", f"common.user_dir={USER_DIR}", "common.cpu=true", "common.fp16=false",
         "distributed_training.distributed_world_size=1", *sizes, "model.surface_fusion_lambda=0.8", "dataset.max_tokens=1500",
         f"checkpoint.save_dir={folder}", f"hydra.run.dir={tmp_path}/run"],
        capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("fairseq-fusion: error: ")]
    assert lines and f"--save-dir {folder} holds a run of another model" in lines[0], proc.stderr[-3000:]
    assert differing(lines[0]) == f"--surface-fusion-lambda {saved.surface_fusion_lambda} -> 0.8"
    assert snapshot(folder) == before


def test_compare_run_folders_refuse_another_command(tmp_path):
    """A fusion-compare run folder records its command; another (here: one system flag) is refused in one line naming
    the folder and the option with both values, and the record is kept."""
    run_dir = str(tmp_path / "runs" / "x" / "seed1")
    first = ["data-bin", "--arch", "transformer_surface_fusion", "--dropout", "0.1", "--share-all-embeddings"]
    commands.record_command(run_dir, first)
    recorded = open(os.path.join(run_dir, "command.json")).read()
    commands.record_command(run_dir, first)  # the same command: continues
    for now, shown in [(first + ["--surface-fusion-lambda", "0.8"], "--surface-fusion-lambda absent -> 0.8"),
                       (first + ["--dropout", "0.3"], "--dropout 0.1 -> 0.3"),
                       (first[:-1], "--share-all-embeddings set -> absent")]:
        with pytest.raises(ValueError) as e:
            commands.record_command(run_dir, now)
        assert str(e.value) == (f"{run_dir} was trained with another command (recorded -> now: {shown}): use another "
                                "--work, or remove that folder to retrain")
    assert open(os.path.join(run_dir, "command.json")).read() == recorded and json.loads(recorded) == first


@pytest.mark.parametrize("extra, expected", [
    (["--optimizer", "sgd"], "optimizer does not match ({saved_optimizer} -> SGD)"),
    (["--criterion", "cross_entropy"], "criterion does not match ({saved_criterion} -> CrossEntropyCriterion)"),
], ids=["optimizer", "criterion"])
def test_resuming_with_another_optimizer_or_criterion_is_one_line(multi30k_slice, run_folder, extra, expected):
    """fairseq's AssertionError traceback ('Criterion does not match; please reset the optimizer') as one line."""
    folder, _ = run_folder
    last = os.path.join(folder, "checkpoint_last.pt")
    history = torch.load(last, map_location="cpu", weights_only=False)["optimizer_history"][-1]
    before = snapshot(folder)
    args = tiny_train(multi30k_slice, folder, "transformer_surface_fusion", max_update=3)
    args[args.index(extra[0]) + 1] = extra[1]
    if extra[1] == "cross_entropy":  # takes no --label-smoothing
        del args[args.index("--label-smoothing"):args.index("--label-smoothing") + 2]
    proc = run_cli(args, check=False)
    one_line_refusal(proc, f"checkpoint {last}: " + expected.format(saved_optimizer=history["optimizer_name"],
                                                                      saved_criterion=history["criterion_name"]),
                     "--reset-optimizer")
    assert snapshot(folder) == before
