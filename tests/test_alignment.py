"""AER scorer, alignment from encoder attention, cumulative coverage (Yang et al. 2020, §3.2)."""
import json
import os
from types import SimpleNamespace

import pytest
import torch
from fairseq import options, tasks

from conftest import run_cli, train_args
from fairseq_fusion import data_paths
from fairseq_fusion.analysis import alignment

ALIGN = data_paths.data_path("alignment")

# ../shared/data/README.md §4: AER, precision, recall (%) of the reference aligner outputs
PUBLISHED = [
    ("deen", "giza", 20.55, 91.27, 70.17),
    ("deen", "fastalign", 27.67, 80.64, 65.44),
    ("roen", "giza", 26.40, 90.93, 61.81),
    ("roen", "fastalign", 32.20, 81.41, 58.08),
]


@pytest.mark.parametrize("pair,system,aer,precision,recall", PUBLISHED)
def test_scorer_reproduces_published_aer(pair, system, aer, precision, recall):
    gold = alignment.read_links(os.path.join(ALIGN, pair, f"{pair}.talp"), one_indexed=True)
    hyp_path = os.path.join(ALIGN, pair, "system_outputs", f"{system}.test.{pair}.grow-diagonal-final.talp")
    hyps = [sure for sure, _ in alignment.read_links(hyp_path, one_indexed=False)]
    r = alignment.alignment_error_rate(hyps, gold)
    assert round(100 * r["aer"], 2) == aer
    assert round(100 * r["precision"], 2) == precision
    assert round(100 * r["recall"], 2) == recall


def test_aer_by_hand():
    gold = [alignment.parse_links("1-1 2p2", one_indexed=True)]  # S={(0,0)}, P={(0,0),(1,1)}
    assert gold[0] == ({(0, 0)}, {(0, 0), (1, 1)})
    hyp = [alignment.parse_links("0-0 0-0 1-1 2-1", one_indexed=False)[0]]  # duplicates count once
    r = alignment.alignment_error_rate(hyp, gold)
    # |A|=3, |S|=1, |A∩S|=1, |A∩P|=2: AER = 1 - 3/4
    assert r == {"aer": 0.25, "precision": 2 / 3, "recall": 1.0, "links": 3}


def test_bad_files_are_named():
    with pytest.raises(ValueError, match=r"f:3: bad alignment link '1:2'"):
        alignment.parse_links("1-2 1:2", one_indexed=True, where="f:3")
    with pytest.raises(ValueError, match="below 1"):
        alignment.parse_links("0-2", one_indexed=True)
    pairs = [(["a", "b"], ["x"])]
    with pytest.raises(ValueError, match="outside 2 source x 1 target"):
        alignment.check_lengths([alignment.parse_links("1-2", one_indexed=True)], pairs, "gold")
    with pytest.raises(ValueError, match="2 alignment lines but 1"):
        alignment.check_lengths([(set(), set())] * 2, pairs, "gold")


def test_word_alignment_merges_subwords():
    torch.manual_seed(0)
    attn = torch.rand(5, 6).softmax(-1)  # 5 target sub-words x 6 source sub-words
    src_words, tgt_words = [0, 0, 1, 2, 2, 2], [0, 1, 1, 2, 2]
    links = alignment.word_alignment(attn, src_words, tgt_words)
    expected = set()
    for t in range(3):
        rows = [r for r in range(5) if tgt_words[r] == t]
        scores = []
        for s in range(3):
            cols = [c for c in range(6) if src_words[c] == s]
            scores.append(sum(attn[r, c].item() for r in rows for c in cols) / len(rows))
        expected.add((max(range(3), key=lambda s: scores[s]), t))
    assert links == expected
    assert len(links) == 3  # one source word per target word


def test_cumulative_coverage_eq2():
    per_layer = [
        [{(0, 0), (0, 1)}, {(2, 0)}],  # layer 1: sentence 1 covers {0}, sentence 2 covers {2}
        [{(1, 0)}, {(2, 0)}],  # layer 2 adds word 1 of sentence 1
        [{(0, 0)}, {(0, 1), (1, 0)}],  # layer 3 adds words 0 and 1 of sentence 2
    ]
    assert alignment.cumulative_coverage(per_layer, [3, 4]) == [2 / 7, 3 / 7, 5 / 7]


def test_direction_from_file_and_model():
    task = SimpleNamespace(cfg=SimpleNamespace(source_lang="en", target_lang="de"))
    assert alignment.file_languages("x/test.de-en") == ("de", "en")
    assert alignment.model_direction(task, ("de", "en")) is True
    assert alignment.model_direction(task, ("en", "de")) is False
    assert alignment.model_direction(task, ("de", "en"), swap=False) is False
    with pytest.raises(ValueError, match="--swap"):
        alignment.model_direction(task, ("ro", "en"))


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("align_dicts")
    for lang in ("src", "tgt"):
        with open(d / f"dict.{lang}.txt", "w") as f:
            for i in range(30):
                f.write(f"w{i} {1000 - i}\n")
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(d), "--task", "translation", "-s", "src", "-t", "tgt", "--arch", "transformer_sem_tem_ifm",
        "--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32",
        "--decoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
        "--encoder-layers", "2", "--decoder-layers", "3", "--cpu",
    ])
    task = tasks.setup_task(args)
    torch.manual_seed(0)
    return task.build_model(args).eval(), task


@torch.no_grad()
def test_layer_attentions_are_fairseqs_head_averaged_attention(small_model):
    model, task = small_model
    src = torch.tensor([[5, 6, 7, 8, 2]])
    prev = torch.tensor([[2, 9, 10, 11]])
    attns = alignment.layer_attentions(model, src, torch.tensor([5]), prev)
    assert len(attns) == 3
    for i, attn in enumerate(attns):
        _, extra = model(src, torch.tensor([5]), prev, alignment_layer=i)
        assert torch.allclose(attn, extra["attn"][0], atol=1e-6)


@torch.no_grad()
def test_align_corpus_swaps_back_to_file_order(small_model):
    model, task = small_model
    pairs = [(["w5", "w6", "w7"], ["w8", "w9"])]  # file: 3 source words, 2 target words
    forward, _ = alignment.align_corpus(model, task, pairs, swap=False, progress=False)
    swapped, _ = alignment.align_corpus(model, task, pairs, swap=True, progress=False)
    for links in forward:  # one file-source word per file-target word
        assert sorted(t for _, t in links[0]) == [0, 1]
    for links in swapped:  # one file-target word per file-source word, in (source, target) order
        assert sorted(s for s, _ in links[0]) == [0, 1, 2] and all(t < 2 for _, t in links[0])


@pytest.fixture(scope="module")
def trained_checkpoint(multi30k_slice, tmp_path_factory):
    save = str(tmp_path_factory.mktemp("align_ckpt"))
    run_cli(train_args(multi30k_slice, save, arch="fusion_transformer", max_update=4))
    return os.path.join(save, "checkpoint_last.pt")


def test_alignment_command_end_to_end(trained_checkpoint, multi30k_slice, tmp_path):
    out = str(tmp_path / "align")
    proc = run_cli([
        "fusion-alignment-analysis", "--path", trained_checkpoint, "--data", multi30k_slice,
        "--parallel", os.path.join(ALIGN, "deen", "test.de-en"), "--gold", os.path.join(ALIGN, "deen", "deen.talp"),
        "--max-sentences", "25", "--out", out, "--cpu",
    ])
    data = json.load(open(out + ".json"))
    assert os.path.getsize(out + ".png") > 0
    assert data["swap"] is True and data["sentences"] == 25 and len(data["layers"]) == 2
    coverage = [r["cumulative_coverage"] for r in data["layers"]]
    assert coverage == sorted(coverage) and 0 < coverage[-1] <= 1
    # every target (here German, the file's source side) word gets exactly one link
    german_words = sum(len(line.split(" ||| ")[0].split()) for line in open(os.path.join(ALIGN, "deen", "test.de-en")).readlines()[:25])
    assert all(r["links"] == german_words for r in data["layers"])
    assert "layer 2: AER" in proc.stdout


def test_aer_command(tmp_path):
    proc = run_cli([
        "fusion-aer", "--gold", os.path.join(ALIGN, "roen", "roen.talp"),
        "--hyp", os.path.join(ALIGN, "roen", "system_outputs", "giza.test.roen.grow-diagonal-final.talp"), "--json",
    ])
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert round(100 * r["aer"], 2) == 26.40
    short = tmp_path / "short.talp"
    short.write_text("0-0\n")
    bad = run_cli(["fusion-aer", "--gold", os.path.join(ALIGN, "roen", "roen.talp"), "--hyp", str(short)], check=False)
    assert bad.returncode != 0 and "has 1 lines but --gold" in bad.stderr
