"""A UTF-8 byte-order mark (U+FEFF) at the start of a text is not a word: every command that reads text removes it,
with one warning naming the file (fairseq_fusion/guards/text_files.py): fusion-prepare-text (no vocabulary entry, no
tokenized text holding it), fairseq-interactive (no <unk>), the hub, the scorers (the score of the text without it)."""
import json
import os

from conftest import REPO, run_cli
from fairseq_fusion.guards.text_files import BOM, bom_removed
from test_input_warnings import CLEAN, DECODE, hub, outputs, recorded, warning_lines

USER_DIR = os.path.join(REPO, "fairseq_fusion")
MARK = BOM.encode("utf-8")  # EF BB BF
EN = "A dog runs .\nA girl plays .\nTwo men walk .\n"
DE = "Ein Hund läuft .\nEin Mädchen spielt .\nZwei Männer gehen .\n"


def test_prepare_text_removes_it_from_the_vocabulary_and_the_text(tmp_path):
    (tmp_path / "corpus.en").write_bytes(MARK + EN.encode())
    (tmp_path / "corpus.de").write_bytes(DE.encode())
    prefix, dest = str(tmp_path / "corpus"), str(tmp_path / "data-bin")
    proc = run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", prefix, "--validpref", prefix,
                    "--destdir", dest, "--bpe-merges", "20", "--workers", "1"])
    assert warning_lines(proc.stderr) == [bom_removed(prefix + ".en")] * 2  # read as the train and the valid split
    for name in ("dict.en.txt", "dict.de.txt", "tok/train.en", "tok/train.bpe.en", "tok/valid.bpe.en"):
        with open(os.path.join(dest, name), encoding="utf-8") as f:
            assert BOM not in f.read(), name
    with open(os.path.join(dest, "tok", "train.en"), encoding="utf-8") as f:
        assert f.readline().split()[0] == "A"


def test_interactive_removes_it_from_the_first_input_line(multi30k_slice, tiny_checkpoint, tmp_path):
    given = tmp_path / "input.en"
    given.write_bytes(MARK + "\n".join(CLEAN).encode() + b"\n")
    plain = tmp_path / "plain.en"
    plain.write_bytes("\n".join(CLEAN).encode() + b"\n")
    argv = ["fairseq-interactive", multi30k_slice, "--user-dir", USER_DIR, "--path", tiny_checkpoint, *DECODE,
            "--bpe", "prepared"]
    expected = outputs(run_cli(argv, stdin=str(plain)).stdout, "S")
    proc = run_cli(argv, stdin=str(given))
    assert warning_lines(proc.stderr) == [bom_removed("standard input")]
    assert outputs(proc.stdout, "S") == expected and "<unk>" not in expected[0]
    proc = run_cli(argv + ["--input", str(given)])
    assert warning_lines(proc.stderr) == [bom_removed(f"--input {given}")]
    assert outputs(proc.stdout, "S") == expected


def test_hub_removes_it_from_a_sentence(multi30k_slice, tiny_checkpoint):
    mt = hub(multi30k_slice, tiny_checkpoint, bpe="prepared")
    expected = mt.translate(CLEAN, beam=2, max_len_b=5)
    translations, messages = recorded(lambda: mt.translate([BOM + CLEAN[0]] + CLEAN[1:], beam=2, max_len_b=5))
    assert translations == expected and messages == [bom_removed("input sentence 1")]
    translation, messages = recorded(lambda: mt.translate(BOM + CLEAN[0], beam=2, max_len_b=5))
    assert translation == expected[0] and messages == [bom_removed("input sentence 1")]


def test_scorers_score_the_text_without_it(tmp_path):
    ref, hyp, marked = tmp_path / "ref.de", tmp_path / "hyp.de", tmp_path / "marked.de"
    ref.write_bytes(DE.encode())
    hyp.write_bytes(DE.replace("läuft", "rennt").encode())
    marked.write_bytes(MARK + hyp.read_bytes())
    scores = {}
    for name, path in (("plain", hyp), ("marked", marked)):
        out = str(tmp_path / name)
        proc = run_cli(["fusion-score-bleu", "--hyp", str(path), "--hyp-format", "detok", "--ref", str(ref), "-t", "de",
                        "--out", out])
        assert warning_lines(proc.stderr) == ([bom_removed(str(marked))] if name == "marked" else [])
        with open(out + ".json", encoding="utf-8") as f:
            scores[name] = {k: v for k, v in json.load(f).items() if k != "hyp"}
    assert scores["marked"] == scores["plain"]
