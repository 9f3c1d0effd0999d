"""One BPE tool per folder (fairseq_fusion/encoders/bpe_tools.py): fastBPE and subword-nmt segment alike with the same
codes, fusion-prepare-text --bpe-tool fastbpe applies fastBPE, and TextPipeline (--bpe prepared, the hub) applies the
tool the folder's prepare.json records."""
import gzip
import json
import os
import sys
import types

import pytest
from conftest import run_cli

from fairseq_fusion.encoders import bpe_tools
from fairseq_fusion.encoders.text_pipeline import TextPipeline
from fairseq_fusion.errors import FusionError
from fairseq_fusion_tools import data_paths


def has_fastbpe():
    try:
        import fastBPE  # noqa: F401
    except ImportError:
        return False
    return True


needs_fastbpe = pytest.mark.skipif(not has_fastbpe(), reason="fastBPE is not installed (the fastbpe extra, or "
                                   "make install FASTBPE=1)")


def read(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


@pytest.fixture(scope="module")
def multi30k_codes(tmp_path_factory):
    """(codes, {lang: Moses-tokenized test lines}, {lang: vocabulary file}): 500 joint merges learned by subword-nmt on
    2,000 Multi30k training pairs, as fusion-prepare-text learns them."""
    from sacremoses import MosesTokenizer

    from fairseq_fusion_tools.prepare.text_steps import count_vocab, learn_bpe, write_lines, write_vocab

    src, tmp = data_paths.data_path("multi30k"), tmp_path_factory.mktemp("codes")
    test, trains = {}, []
    for lang in ("en", "de"):
        tok = MosesTokenizer(lang=lang)
        for split, n in (("train", 2000), ("test_2016_flickr", None)):
            with gzip.open(os.path.join(src, f"{split}.{lang}.gz"), "rt", encoding="utf-8") as f:
                lines = [tok.tokenize(line, escape=False, return_str=True, aggressive_dash_splits=True)
                         for line in f.read().splitlines()[:n]]
            write_lines(str(tmp / f"{split}.{lang}"), lines)
        trains.append(str(tmp / f"train.{lang}"))
        test[lang] = read(tmp / f"test_2016_flickr.{lang}")
    codes = str(tmp / "bpe.codes")
    learn_bpe(trains, codes, 500)
    vocabs = {}
    for lang in ("en", "de"):
        bpe_train = tmp / f"train.bpe.{lang}"
        write_lines(str(bpe_train), bpe_tools.bpe_applier("subword-nmt", codes)(read(tmp / f"train.{lang}")))
        vocabs[lang] = str(tmp / f"bpe.vocab.{lang}")
        write_vocab(vocabs[lang], count_vocab(str(bpe_train)))
    return codes, test, vocabs


@needs_fastbpe
@pytest.mark.parametrize("threshold", [None, 2, 50])
def test_fastbpe_and_subword_nmt_segment_alike(multi30k_codes, threshold):
    codes, test, vocabs = multi30k_codes
    for lang, lines in test.items():
        vocab = vocabs[lang] if threshold else None
        snmt = bpe_tools.bpe_applier("subword-nmt", codes, vocab, threshold)(lines)
        fast = bpe_tools.bpe_applier("fastbpe", codes, vocab, threshold)(lines)
        assert fast == snmt and len(lines) == 1000
        if threshold == 50:  # the filter changed something here
            assert snmt != bpe_tools.bpe_applier("subword-nmt", codes)(lines)


@needs_fastbpe
def test_where_they_differ_is_whitespace_only(multi30k_codes):
    """subword-nmt keeps the whitespace around a line; fastBPE drops it and joins tokens with one space. Lines of
    fusion-prepare-text and TextPipeline are tokenized (single spaces, none around), so this never shows there."""
    codes = multi30k_codes[0]
    line = "  two  dogs run "
    snmt, fast = (bpe_tools.bpe_applier(tool, codes)([line])[0] for tool in ("subword-nmt", "fastbpe"))
    assert snmt != fast and snmt.split() == fast.split() and fast == " ".join(fast.split())


def prepared_folder(tmp_path, codes, tool):
    """A folder as fusion-prepare-text leaves it, for TextPipeline: prepare.json (naming ``tool``) and bpe.codes."""
    folder = tmp_path / tool
    folder.mkdir()
    (folder / "bpe.codes").write_text(open(codes, encoding="utf-8").read(), encoding="utf-8")
    manifest = {"source_lang": "en", "target_lang": "de", "bpe_tool": tool, "truecase": False,
                "tokenizer": {"name": "sacremoses", "escape": False, "aggressive_dash_splits": True}}
    (folder / "prepare.json").write_text(json.dumps(manifest), encoding="utf-8")
    return str(folder)


def test_pipeline_applies_the_recorded_tool(multi30k_codes, tmp_path, monkeypatch):
    """A folder prepared with --bpe-tool fastbpe is applied with fastBPE (a stand-in module records the calls), one
    prepared with subword-nmt never calls it."""
    calls = []

    class FakeFastBPE:
        def __init__(self, *paths):
            calls.append(paths)

        def apply(self, lines):
            return [f"fast:{line}" for line in lines]

    monkeypatch.setitem(sys.modules, "fastBPE", types.SimpleNamespace(fastBPE=FakeFastBPE))
    codes = multi30k_codes[0]
    fast = TextPipeline(prepared_folder(tmp_path, codes, "fastbpe"), "en")
    assert fast.bpe_tool == "fastbpe" and fast("Two dogs run.") == "fast:Two dogs run ."
    assert calls == [(os.path.join(tmp_path, "fastbpe", "bpe.codes"),)]
    snmt = TextPipeline(prepared_folder(tmp_path, codes, "subword-nmt"), "en")
    assert snmt.bpe_tool == "subword-nmt" and "fast:" not in snmt("Two dogs run.") and len(calls) == 1


def test_missing_fastbpe_is_one_line(multi30k_codes, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "fastBPE", None)  # import fastBPE raises ImportError
    folder = prepared_folder(tmp_path, multi30k_codes[0], "fastbpe")
    with pytest.raises(FusionError, match=r"^fairseq-fusion: error: \S+ \(prepared with --bpe-tool fastbpe\) needs "
                       r"fastBPE, which is not installed: pip install 'fairseq_fusion\[fastbpe\]' \(in the repository: "
                       r"make install FASTBPE=1\)$"):
        TextPipeline(folder, "en")


@needs_fastbpe
def test_prepare_text_with_fastbpe_and_its_pipeline(multi30k_codes, tmp_path):
    """fusion-prepare-text --bpe-tool fastbpe: its BPE'd splits are what subword-nmt gives with the folder's codes, and
    TextPipeline on the folder applies fastBPE and reproduces them from the raw text."""
    src = data_paths.data_path("multi30k")
    out = str(tmp_path / "data")
    run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", os.path.join(src, "train"),
             "--validpref", os.path.join(src, "val"), "--testpref", os.path.join(src, "test_2016_flickr"),
             "--destdir", out, "--max-lines", "200", "--bpe-merges", "150", "--workers", "1", "--bpe-tool", "fastbpe"])
    with open(os.path.join(out, "prepare.json")) as f:
        assert json.load(f)["bpe_tool"] == "fastbpe"
    snmt = bpe_tools.bpe_applier("subword-nmt", os.path.join(out, "bpe.codes"))
    for lang in ("en", "de"):
        bpe = read(f"{out}/tok/test.bpe.{lang}")
        assert bpe == snmt(read(f"{out}/tok/test.{lang}"))
        pipeline = TextPipeline(out, lang)
        assert pipeline.bpe_tool == "fastbpe"
        assert [pipeline(raw) for raw in read(f"{out}/tok/test.raw.{lang}")[:50]] == bpe[:50]
