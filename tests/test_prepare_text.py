"""fusion-prepare-text: truecasing, the vocabulary threshold, per-language BPE and already-preprocessed releases,
each checked against an independent computation or hand-written expectations."""
import json
import os
from collections import Counter

import pytest
from conftest import run_cli

from fairseq_fusion_tools import data_paths


def write(folder, name, lines):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def read(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def test_truecasing_follows_moses_rules(tmp_path):
    """Moses truecase.perl: a sentence-initial word takes its most frequent casing seen inside sentences;
    elsewhere a known casing stays and an unknown one takes the best casing (expected tokens by hand)."""
    raw = str(tmp_path / "raw")
    en = ["The cat sat on the mat .", "A cat saw the dog .", "The dog and the cat met .", "Paris is in France .",
          "We love Paris and the cat ."]
    de = ["Die Katze sass auf der Matte .", "Eine Katze sah den Hund .", "Der Hund und die Katze trafen sich .",
          "Paris liegt in Frankreich .", "Wir lieben Paris und die Katze ."]
    for split in ("train", "valid"):
        write(raw, f"{split}.en", en)
        write(raw, f"{split}.de", de)
    write(raw, "test.en", ["The Cat likes Paris .", "THE dog sat ."])
    write(raw, "test.de", ["Die Katze mag Paris .", "DER Hund sass ."])
    out = str(tmp_path / "data")
    run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", f"{raw}/train", "--validpref", f"{raw}/valid",
             "--testpref", f"{raw}/test", "--destdir", out, "--bpe-merges", "20", "--workers", "1", "--truecase"])
    # "the" is lower-case inside sentences; "Cat"/"THE" are unseen casings -> "cat"/"the"; "Paris" is known
    assert read(f"{out}/tok/test.en") == ["the cat likes Paris .", "the dog sat ."]
    # German: "die" (3x inside) beats "Die"; "Katze" is only seen capitalized
    assert read(f"{out}/tok/test.de") == ["die Katze mag Paris .", "der Hund sass ."]
    assert read(f"{out}/tok/train.en")[0] == "the cat sat on the mat ."
    from fairseq_fusion.encoders.text_pipeline import TextPipeline

    assert TextPipeline(out, "en").tokenize("The Cat likes Paris.") == "the cat likes Paris ."


def test_vocabulary_threshold_splits_rare_subwords(tmp_path):
    """--bpe-vocab-threshold N (subword-nmt --vocabulary-threshold): every produced subword was seen >= N times in
    that language's BPE'd training text (recounted here with subword-nmt directly) or cannot be split further."""
    from subword_nmt.apply_bpe import BPE

    src = data_paths.data_path("multi30k")
    common = ["-s", "en", "-t", "de", "--trainpref", os.path.join(src, "train"), "--validpref", os.path.join(src, "val"),
              "--testpref", os.path.join(src, "test_2016_flickr"), "--max-lines", "300", "--bpe-merges", "300", "--workers", "1"]
    plain, filtered = str(tmp_path / "plain"), str(tmp_path / "filtered")
    run_cli(["fusion-prepare-text", *common, "--destdir", plain])
    run_cli(["fusion-prepare-text", *common, "--destdir", filtered, "--bpe-vocab-threshold", "5"])
    changed = 0
    for lang in ("en", "de"):
        with open(os.path.join(filtered, "bpe.codes"), encoding="utf-8") as f:
            bpe = BPE(f)
        counts = Counter(t for line in read(f"{filtered}/tok/train.{lang}") for t in bpe.process_line(line).split())
        test = read(f"{filtered}/tok/test.bpe.{lang}")
        for tok in (t for line in test for t in line.split()):
            assert counts[tok] >= 5 or len(tok.replace("@@", "")) == 1, (lang, tok, counts[tok])
        # the same words, only split differently
        assert [line.replace("@@ ", "") for line in test] == read(f"{filtered}/tok/test.{lang}")
        changed += sum(a != b for a, b in zip(test, read(f"{plain}/tok/test.bpe.{lang}")))
    assert changed > 0  # the filter made a difference on this data


def test_separate_bpe_codes_per_language(tmp_path):
    """--separate-bpe: codes learned on each language alone, applied to that language (checked with subword-nmt)."""
    from subword_nmt.apply_bpe import BPE

    from fairseq_fusion.encoders.text_pipeline import TextPipeline

    src = data_paths.data_path("multi30k")
    out = str(tmp_path / "sep")
    run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", os.path.join(src, "train"),
             "--validpref", os.path.join(src, "val"), "--testpref", os.path.join(src, "test_2016_flickr"), "--destdir", out,
             "--max-lines", "200", "--bpe-merges", "150", "--workers", "1", "--separate-bpe", "--separate-dictionaries"])
    assert not os.path.exists(os.path.join(out, "bpe.codes"))
    codes = {lang: read(os.path.join(out, f"bpe.codes.{lang}"))[1:] for lang in ("en", "de")}
    assert codes["en"] != codes["de"] and len(codes["en"]) == 150
    # every merge of a language's codes joins symbols of that language's training text
    for lang in ("en", "de"):
        chars = set("".join(read(f"{out}/tok/train.{lang}")))
        assert all(set(m.replace(" ", "").replace("</w>", "")) <= chars for m in codes[lang])
        with open(os.path.join(out, f"bpe.codes.{lang}"), encoding="utf-8") as f:
            bpe = BPE(f)
        assert read(f"{out}/tok/test.bpe.{lang}") == [bpe.process_line(line) for line in read(f"{out}/tok/test.{lang}")]
        raw = read(f"{out}/tok/test.raw.{lang}")[0]
        assert TextPipeline(out, lang)(raw) == read(f"{out}/tok/test.bpe.{lang}")[0]
    with open(os.path.join(out, "prepare.json")) as f:
        assert json.load(f)["separate_bpe"] is True


def test_preprocessed_release_is_binarized_as_it_is(tmp_path):
    """--preprocessed: a release that is already tokenized and BPE'd (laid out as Google's WMT16 En-De) gives the
    same dictionaries and binarized data as our own pipeline on the same BPE text; its codes serve new text;
    --nwords caps the dictionary as fairseq's scaling_nmt does."""
    import filecmp

    from fairseq.data import Dictionary

    from fairseq_fusion.encoders.text_pipeline import TextPipeline

    src = data_paths.data_path("multi30k")
    ours = str(tmp_path / "ours")
    run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", os.path.join(src, "train"),
             "--validpref", os.path.join(src, "val"), "--testpref", os.path.join(src, "test_2016_flickr"), "--destdir", ours,
             "--max-lines", "200", "--bpe-merges", "150", "--workers", "1"])
    release = tmp_path / "wmt16_en_de"  # Google's file names
    for split, name in (("train", "train.tok.clean.bpe.32000"), ("valid", "newstest2013.tok.bpe.32000"),
                        ("test", "newstest2014.tok.bpe.32000")):
        for lang in ("en", "de"):
            write(str(release), f"{name}.{lang}", read(f"{ours}/tok/{split}.bpe.{lang}"))
            write(str(release), f"newstest2014.{lang}", read(f"{ours}/tok/test.raw.{lang}"))
    (release / "bpe.32000").write_text(open(os.path.join(ours, "bpe.codes"), encoding="utf-8").read(), encoding="utf-8")
    out = str(tmp_path / "pre")
    base = ["fusion-prepare-text", "--preprocessed", "-s", "en", "-t", "de", "--trainpref", f"{release}/train.tok.clean.bpe.32000",
            "--validpref", f"{release}/newstest2013.tok.bpe.32000", "--testpref", f"{release}/newstest2014.tok.bpe.32000",
            "--workers", "1"]
    run_cli(base + ["--destdir", out, "--bpe-codes", f"{release}/bpe.32000", "--raw-testpref", f"{release}/newstest2014"])
    for name in ("dict.en.txt", "dict.de.txt", "train.en-de.en.bin", "test.en-de.de.bin", "valid.en-de.de.idx"):
        assert filecmp.cmp(os.path.join(ours, name), os.path.join(out, name), shallow=False), name
    assert read(f"{out}/tok/test.raw.de") == read(f"{ours}/tok/test.raw.de")  # the references evaluate.sh scores against
    assert TextPipeline(out, "en")(read(f"{ours}/tok/test.raw.en")[3]) == read(f"{ours}/tok/test.bpe.en")[3]

    capped = str(tmp_path / "capped")
    run_cli(base + ["--destdir", capped, "--nwords", "64"])
    full, small = Dictionary.load(os.path.join(out, "dict.en.txt")), Dictionary.load(os.path.join(capped, "dict.en.txt"))
    assert len(small) == 64 and len(full) > 64
    assert [small[i] for i in range(4, 60)] == [full[i] for i in range(4, 60)]  # the most frequent entries kept
    with pytest.raises(FileNotFoundError, match="without its BPE codes"):
        TextPipeline(capped, "en")

    proc = run_cli(base[:-2] + ["--testpref", f"{release}/newstest2015.tok.bpe.32000", "--destdir", str(tmp_path / "x")], check=False)
    assert proc.returncode != 0 and "newstest2015.tok.bpe.32000.en (tokenized and BPE'd); not found" in proc.stderr
    proc = run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", "a", "--validpref", "b", "--destdir", "c",
                    "--nwords", "8"], check=False)
    assert proc.returncode != 0 and "--nwords only goes with --preprocessed" in proc.stderr


# ------------------------------------------------------------------ a prepared folder is never half-written
def tree(folder):
    """Every file (path -> sha256 of its bytes) and folder under ``folder``: equal trees are byte-identical."""
    import hashlib

    out = {}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), folder) + "/"] = None
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out[os.path.relpath(os.path.join(root, f), folder)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def prepare_in_process(argv):
    from fairseq_fusion_tools.cli import prepare_text as prepare_text_cli
    from fairseq_fusion_tools.prepare import prepare_text

    return prepare_text.main(prepare_text_cli.get_parser().parse_args(argv))


def small_prepare_args(dest, *extra):
    src = data_paths.data_path("multi30k")
    return ["-s", "en", "-t", "de", "--trainpref", os.path.join(src, "train"), "--validpref", os.path.join(src, "val"),
            "--destdir", dest, "--max-lines", "60", "--bpe-merges", "30", "--workers", "1", *extra]


@pytest.fixture
def prepared_copy(multi30k_slice, tmp_path):
    import shutil

    dest = str(tmp_path / "data")
    shutil.copytree(multi30k_slice, dest)
    return dest


def test_a_prepared_or_other_folder_is_refused_without_overwrite(prepared_copy, tmp_path):
    """Preparing again into a prepared folder with other settings is refused before anything is written,
    naming the folder and --overwrite; so is a folder holding other files, and a file."""
    before = tree(prepared_copy)
    with pytest.raises(SystemExit) as e:
        prepare_in_process(small_prepare_args(prepared_copy))
    assert str(e.value) == (f"fairseq-fusion: error: --destdir {prepared_copy} already holds a prepared folder: pass "
                            "--overwrite to replace it (it stays as it is until the new one is complete), or give another --destdir")
    assert tree(prepared_copy) == before
    other = tmp_path / "notes"
    write(str(other), "mine.txt", ["keep me"])
    with pytest.raises(SystemExit, match="notes is not empty and not a prepared folder.*--overwrite"):
        prepare_in_process(small_prepare_args(str(other)))
    assert os.listdir(other) == ["mine.txt"]
    with pytest.raises(SystemExit, match="mine.txt is a file, not a folder"):
        prepare_in_process(small_prepare_args(str(other / "mine.txt")))
    assert sorted(os.listdir(tmp_path)) == ["data", "notes"]  # nothing staged beside them


def test_failure_midway_leaves_the_old_folder_and_no_staging(prepared_copy, monkeypatch):
    """A failure or Ctrl-C in a late step (after tokenization, BPE and prepare.json: the binarization) leaves
    the old folder byte-identical, also with --overwrite, and no staged folder behind; the new folder
    (without the old one's files) is in place only after a complete run, and its log names it."""
    from fairseq_fusion_tools.prepare import prepare_text

    parent = os.path.dirname(prepared_copy)
    before = tree(prepared_copy)
    real_binarize = prepare_text.binarize
    for exc in (RuntimeError("disk full"), KeyboardInterrupt()):
        def late_failure(args, *a, exc=exc, **k):
            assert os.path.exists(os.path.join(args.destdir, "prepare.json"))  # it is late: the rest is written
            raise exc
        monkeypatch.setattr(prepare_text, "binarize", late_failure)
        with pytest.raises(type(exc)):
            prepare_in_process(small_prepare_args(prepared_copy, "--overwrite"))
        assert tree(prepared_copy) == before
        assert os.listdir(parent) == ["data"]
    monkeypatch.setattr(prepare_text, "binarize", real_binarize)
    prepare_in_process(small_prepare_args(prepared_copy, "--overwrite"))
    with open(os.path.join(prepared_copy, "prepare.json")) as f:
        assert json.load(f)["bpe_merges"] == 30
    assert len(read(os.path.join(prepared_copy, "bpe.codes"))) == 31  # version line + 30 merges
    assert not os.path.exists(os.path.join(prepared_copy, "test.en-de.en.bin"))  # the old folder's test split is gone
    assert len(read(os.path.join(prepared_copy, "tok", "valid.en"))) == 60
    assert os.listdir(parent) == ["data"]
    with open(os.path.join(prepared_copy, "preprocess.log")) as f:
        assert f"destdir='{prepared_copy}'" in f.read()


def test_swap_restores_the_old_folder_when_the_new_one_cannot_take_its_place(tmp_path, monkeypatch):
    """--overwrite moves the old folder aside, then renames the new one into place: if that rename
    fails, the old folder is put back."""
    from fairseq_fusion_tools.prepare import destination

    old = tmp_path / "data"
    write(str(old), "prepare.json", ["{}"])
    before = tree(str(old))
    real_replace = os.replace

    def failing_replace(src, dst):
        if os.path.basename(src).startswith(".data.building-"):
            raise OSError("no room")
        return real_replace(src, dst)

    monkeypatch.setattr(destination.os, "replace", failing_replace)
    with pytest.raises(OSError, match="no room"):
        with destination.staged_folder(str(old)) as staged:
            write(staged, "prepare.json", ["{\"new\": 1}"])
    assert tree(str(old)) == before and os.listdir(tmp_path) == ["data"]


def test_add_test_interrupted_leaves_the_folder_as_it_was(prepared_copy, monkeypatch):
    """--add-test stopped by Ctrl-C during binarization, or while moving its files into place, adds
    nothing: the folder is byte-identical and nothing is staged in it."""
    from fairseq_cli import preprocess

    from fairseq_fusion_tools.prepare import destination

    src = data_paths.data_path("multi30k")
    argv = ["-s", "en", "-t", "de", "--destdir", prepared_copy, "--max-lines", "30", "--workers", "1",
            "--add-test", os.path.join(src, "test_2017_flickr")]
    before = tree(prepared_copy)
    real_main = preprocess.main
    monkeypatch.setattr(preprocess, "main", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        prepare_in_process(argv)
    assert tree(prepared_copy) == before

    monkeypatch.setattr(preprocess, "main", real_main)
    real_rename, moved = os.rename, []

    def rename_then_stop(a, b):  # Ctrl-C after two files of the new split are in place
        if len(moved) == 2:
            raise KeyboardInterrupt()
        real_rename(a, b)
        moved.append(b)

    monkeypatch.setattr(destination.os, "rename", rename_then_stop)
    with pytest.raises(KeyboardInterrupt):
        prepare_in_process(argv)
    assert len(moved) == 2 and tree(prepared_copy) == before
    monkeypatch.setattr(destination.os, "rename", real_rename)
    prepare_in_process(argv)
    added = tree(prepared_copy)
    assert {k: v for k, v in added.items() if k in before} == before  # only new files
    assert {"test1.en-de.en.bin", "test1.en-de.de.idx", "tok/test1.bpe.en", "tok/test1.raw.de"} <= set(added) - set(before)
    with pytest.raises(SystemExit, match="--overwrite replaces a whole --destdir; --add-test only adds"):
        prepare_in_process(argv + ["--overwrite"])


@pytest.mark.parametrize("workers", [1, 2])
def test_tokenized_alike_in_this_process_and_in_the_pool(workers, monkeypatch):
    """A file below text_steps.POOL_MIN_LINES is tokenized in this process, a longer one by a pool of --workers
    processes: both give sacremoses' tokens (called here), in order, with --normalize-punctuation too."""
    import gzip

    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    from fairseq_fusion_tools.prepare import text_steps

    with gzip.open(data_paths.data_path("multi30k", "val.de.gz"), "rt", encoding="utf-8") as f:
        lines = [next(f).rstrip("\n") for _ in range(600)]
    lines[7] = "„Zwei Männer“ – am Strand…  "
    moses = MosesTokenizer(lang="de")
    punct = MosesPunctNormalizer(lang="de", pre_replace_unicode_punct=True, post_remove_control_chars=True)
    for normalize in (False, True):
        expected = [moses.tokenize(punct.normalize(l) if normalize else l, escape=False, return_str=True,
                                   aggressive_dash_splits=True) for l in lines]
        for pool_from in (len(lines) + 1, len(lines)):  # in this process; through the pool (if workers > 1)
            monkeypatch.setattr(text_steps, "POOL_MIN_LINES", pool_from)
            assert text_steps.tokenize(lines, "de", workers, "test", normalize) == expected, (workers, normalize, pool_from)
