"""A checkpoint is used only with the dictionaries it was trained with (dictionary_check.py, issue 49 item 1): two
dictionaries of one size (fairseq pads them to a multiple of 8) are refused in one line naming the dictionary file, at
fairseq-generate, fairseq-interactive, the hub, a resume and --finetune-from-model; a checkpoint without the
fingerprint (older, or fairseq's own) loads as before, with a one-line note in the log."""
import hashlib
import os
import shutil

import pytest
import torch

from conftest import run_cli
from conftest import tiny_train_args as tiny_train
from fairseq_fusion.errors import FusionError
from test_refusals import USER_DIR, generate, one_line_refusal
from test_resume_check import snapshot

NOTE = "records no fingerprint of its dictionaries"
KEY = "fusion_dictionaries"  # dictionary_check.KEY, spelt here so the tests run (and fail) on code without it


def reverse_dictionaries(folder):
    """dict.en.txt and dict.de.txt with their lines in reverse order: the same sizes, every word another id."""
    for lang in ("en", "de"):
        path = os.path.join(folder, f"dict.{lang}.txt")
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(reversed(lines))


@pytest.fixture(scope="module")
def reversed_data(multi30k_slice, tmp_path_factory):
    """The slice with its dictionaries reversed (its binarized splits unchanged): the issue's repro."""
    folder = str(tmp_path_factory.mktemp("reversed") / "data-bin")
    shutil.copytree(multi30k_slice, folder)
    reverse_dictionaries(folder)
    return folder


@pytest.fixture(scope="module")
def unrecorded(tiny_checkpoint, tmp_path_factory):
    """The tiny checkpoint without the fingerprint: a checkpoint saved before issue 49, or by fairseq alone."""
    state = torch.load(tiny_checkpoint, map_location="cpu", weights_only=False)
    state["extra_state"].pop(KEY, None)
    path = str(tmp_path_factory.mktemp("unrecorded") / "checkpoint_last.pt")
    torch.save(state, path)
    return path


def symbols_sha256(dict_file):
    """Independent of the plugin: fairseq's Dictionary of the file, its symbols one per line."""
    from fairseq.data import Dictionary

    return hashlib.sha256("\n".join(Dictionary.load(dict_file).symbols).encode("utf-8")).hexdigest()


def test_checkpoints_record_their_dictionaries(multi30k_slice, tiny_checkpoint):
    recorded = torch.load(tiny_checkpoint, map_location="cpu", weights_only=False)["extra_state"][KEY]
    for side, lang in (("source", "en"), ("target", "de")):
        dict_file = os.path.join(multi30k_slice, f"dict.{lang}.txt")
        assert recorded[side]["sha256"] == symbols_sha256(dict_file)
        assert recorded[side]["file"] == dict_file


def test_generate_refuses_another_dictionary_of_the_same_size(reversed_data, tiny_checkpoint):
    proc = generate(reversed_data, tiny_checkpoint)
    last = one_line_refusal(proc, f"{reversed_data}/dict.en.txt is not the source dictionary checkpoint "
                                  f"{tiny_checkpoint} was trained with", "the same", "fairseq-preprocess --srcdict")
    assert "BLEU" not in proc.stdout, last


def test_interactive_and_the_hub_refuse_it(reversed_data, tiny_checkpoint, tmp_path):
    from fairseq_fusion.models import FusionTransformerModel

    stdin = tmp_path / "stdin.txt"
    stdin.write_text("A dog runs .\n", encoding="utf-8")
    proc = run_cli(["fairseq-interactive", reversed_data, "--user-dir", USER_DIR, "--path", tiny_checkpoint, "--cpu",
                    "--beam", "1"], stdin=str(stdin), check=False)
    one_line_refusal(proc, f"{reversed_data}/dict.en.txt is not the source dictionary")
    assert not [line for line in proc.stdout.splitlines() if line.startswith("H-")]
    folder, name = os.path.split(tiny_checkpoint)
    with pytest.raises(FusionError, match=f"{reversed_data}/dict.en.txt is not the source dictionary"):
        FusionTransformerModel.from_pretrained(folder, checkpoint_file=name, data_name_or_path=reversed_data)


def test_resume_and_fine_tune_refuse_it_and_write_nothing(reversed_data, tiny_checkpoint, tmp_path):
    folder = str(tmp_path / "ck")
    shutil.copytree(os.path.dirname(tiny_checkpoint), folder)
    before = snapshot(folder)
    proc = run_cli(tiny_train(reversed_data, folder, "transformer_surface_fusion", max_update=3), check=False)
    one_line_refusal(proc, f"{reversed_data}/dict.en.txt is not the source dictionary checkpoint "
                           f"{folder}/checkpoint_last.pt was trained with")
    assert snapshot(folder) == before
    fine_tuned = tmp_path / "fine-tuned"
    proc = run_cli(tiny_train(reversed_data, str(fine_tuned), "transformer_surface_fusion", "--finetune-from-model",
                              tiny_checkpoint), check=False)
    one_line_refusal(proc, f"{reversed_data}/dict.en.txt is not the source dictionary checkpoint {tiny_checkpoint}")
    assert not [p for p in fine_tuned.iterdir() if p.suffix == ".pt"]


def test_a_checkpoint_without_the_fingerprint_loads_as_before_with_a_note(reversed_data, multi30k_slice, unrecorded):
    for data in (multi30k_slice, reversed_data):  # not checkable: today's behaviour, said once
        proc = generate(data, unrecorded)
        assert proc.returncode == 0, proc.stderr[-3000:]
        notes = [line for line in (proc.stdout + proc.stderr).splitlines() if NOTE in line]
        assert len(notes) == 1 and f"checkpoint {unrecorded} {NOTE}" in notes[0], notes


def test_fairseqs_transformer_names_another_dictionary_size(multi30k_slice, tmp_path):
    """fairseq's own transformer given a data folder whose dictionaries have 8 more words (fairseq's padding step):
    one line naming the checkpoint's and the folder's sizes, not torch's size-mismatch traceback."""
    save = str(tmp_path / "ck")
    run_cli(tiny_train(multi30k_slice, save, "transformer"))
    bigger = str(tmp_path / "bigger")
    shutil.copytree(multi30k_slice, bigger)
    sizes = {}
    for lang in ("en", "de"):
        with open(os.path.join(bigger, f"dict.{lang}.txt"), "a", encoding="utf-8") as f:
            f.writelines(f"extraword{i} 1\n" for i in range(8))
        from fairseq.data import Dictionary
        sizes[lang] = len(Dictionary.load(os.path.join(bigger, f"dict.{lang}.txt")))
    proc = generate(bigger, os.path.join(save, "checkpoint_last.pt"), "--gen-subset", "test")
    last = one_line_refusal(proc, "checkpoint does not match this model's source dictionary")
    assert f"gives {sizes['en']} " in last and f"has {sizes['en'] - 8} entries" in last
