"""AER scorer, alignment from encoder attention, cumulative coverage (Yang et al. 2020, §3.2)."""
import json
import os
from types import SimpleNamespace

import pytest
import torch
from fairseq import options, tasks

from conftest import run_cli
from fairseq_fusion_tools import data_paths
from fairseq_fusion_tools.analysis import alignment
from fairseq_fusion_tools.analysis import alignment_stream as stream
from fairseq_fusion_tools.scoring import alignment_links

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
    gold = alignment_links.read_links(os.path.join(ALIGN, pair, f"{pair}.talp"), one_indexed=True)
    hyp_path = os.path.join(ALIGN, pair, "system_outputs", f"{system}.test.{pair}.grow-diagonal-final.talp")
    hyps = [sure for sure, _ in alignment_links.read_links(hyp_path, one_indexed=False)]
    r = alignment_links.alignment_error_rate(hyps, gold)
    assert round(100 * r["aer"], 2) == aer
    assert round(100 * r["precision"], 2) == precision
    assert round(100 * r["recall"], 2) == recall


def test_aer_by_hand():
    gold = [alignment_links.parse_links("1-1 2p2", one_indexed=True)]  # S={(0,0)}, P={(0,0),(1,1)}
    assert gold[0] == ({(0, 0)}, {(0, 0), (1, 1)})
    hyp = [alignment_links.parse_links("0-0 0-0 1-1 2-1", one_indexed=False)[0]]  # duplicates count once
    r = alignment_links.alignment_error_rate(hyp, gold)
    # |A|=3, |S|=1, |A∩S|=1, |A∩P|=2: AER = 1 - 3/4
    assert r == {"aer": 0.25, "precision": 2 / 3, "recall": 1.0, "links": 3}


def test_bad_files_are_named():
    with pytest.raises(ValueError, match=r"f:3: bad alignment link '1:2'"):
        alignment_links.parse_links("1-2 1:2", one_indexed=True, where="f:3")
    with pytest.raises(ValueError, match="below 1"):
        alignment_links.parse_links("0-2", one_indexed=True)
    pairs = [(["a", "b"], ["x"])]
    with pytest.raises(ValueError, match="outside 2 source x 1 target"):
        alignment.check_lengths([alignment_links.parse_links("1-2", one_indexed=True)], pairs, "gold")
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
    return tiny_model(d, "src", "tgt", "transformer_sem_tem_ifm", encoder_layers=2, decoder_layers=3)


def tiny_model(dict_dir, src, tgt, arch, encoder_layers, decoder_layers):
    """A d=16 model of ``arch`` over the dictionaries in ``dict_dir``, in eval mode, and its task."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(dict_dir), "--task", "translation", "-s", src, "-t", tgt, "--arch", arch,
        "--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32",
        "--decoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
        "--encoder-layers", str(encoder_layers), "--decoder-layers", str(decoder_layers), "--cpu",
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
def test_batched_alignment_equals_one_sentence_at_a_time(small_model):
    """Left-padded sources and right-padded targets in a batch give each sentence's own links
    (computed here sentence by sentence from layer_attentions and word_alignment)."""
    model, task = small_model
    pairs = [(["w5", "w6", "w7"], ["w8", "w9"]), (["w10"], ["w11", "w12", "w13", "w14"]), (["w5", "w9"], ["w7"])]
    batched = [links for links, _ in stream.align_batches(model, task, pairs, batch_size=3)]
    d = task.source_dictionary
    for (src, tgt), got in zip(pairs, batched):
        src_ids = torch.tensor([d.index(w) for w in src] + [d.eos()])
        prev = torch.tensor([d.eos()] + [d.index(w) for w in tgt])
        attns = alignment.layer_attentions(model, src_ids[None], torch.tensor([len(src_ids)]), prev[None])
        expected = [alignment.word_alignment(a[0, : len(tgt), : len(src)], list(range(len(src))), list(range(len(tgt))))
                    for a in attns]
        assert got == expected


class StubBPE:
    """subword-nmt's segment_tokens for two compounds."""
    SPLITS = {"Hausboot": ["Haus@@", "boot"], "hausboot": ["haus@@", "boot"], "houseboat": ["house@@", "boat"]}

    def segment_tokens(self, words):
        return [p for w in words for p in self.SPLITS.get(w, [w])]


@pytest.fixture(scope="module")
def en_de_model(tmp_path_factory):
    """A tiny En->De model; the English dictionary is cased, the German one lower-case only."""
    d = tmp_path_factory.mktemp("planted_dicts")
    vocab = {"en": ["The", "house@@", "boat", "is", "sinking"], "de": ["das", "haus@@", "boot", "sinkt"]}
    for lang, words in vocab.items():
        with open(d / f"dict.{lang}.txt", "w") as f:
            f.writelines(f"{w} {100 - i}\n" for i, w in enumerate(words + [f"x{i}" for i in range(10)]))
    return tiny_model(d, "en", "de", "fusion_transformer", encoder_layers=1, decoder_layers=2)


# Planted encoder attention of the En->De model, rows = decoder positions (inputs </s> das haus@@
# boot sinkt; row t predicts target sub-word t: das, haus@@, boot, sinkt, </s>), columns =
# source sub-words The house@@ boat is sinking </s>.
PLANTED = [
    [[0.40, 0.05, 0.05, 0.00, 0.00, 0.50],   # das -> The (</s> is never a candidate)
     [0.05, 0.25, 0.25, 0.40, 0.05, 0.00],   # Hausboot = mean of these two rows: houseboat .30, is .60 -> is
     [0.05, 0.05, 0.05, 0.80, 0.05, 0.00],
     [0.10, 0.00, 0.00, 0.10, 0.80, 0.00],   # sinkt -> sinking
     [0.90, 0.00, 0.00, 0.00, 0.10, 0.00]],  # predicts </s>: unused (a shifted reading would use it)
    [[0.40, 0.05, 0.05, 0.00, 0.00, 0.50],
     [0.04, 0.28, 0.28, 0.36, 0.04, 0.00],   # houseboat .56 (columns summed) beats is .36 -> houseboat
     [0.04, 0.28, 0.28, 0.36, 0.04, 0.00],
     [0.10, 0.00, 0.00, 0.10, 0.80, 0.00],
     [0.90, 0.00, 0.00, 0.00, 0.10, 0.00]],
]


def test_planted_attention_end_to_end(en_de_model, tmp_path):
    """De-En file, En->De model: direction swapped, German lower-cased for its dictionary,
    sub-words merged, row t read for target token t; AER and C<=i by hand."""
    model, task = en_de_model
    parallel = tmp_path / "test.de-en"
    parallel.write_text("Das Hausboot sinkt ||| The houseboat is sinking\n")
    gold = tmp_path / "gold.talp"
    gold.write_text("1-1 2-2 3-4 3p3\n")  # S = {(0,0), (1,1), (2,3)}, P adds (2,2)
    swap = alignment.model_direction(task, alignment.file_languages(str(parallel)))
    lower = stream.lowercase_sides(task, None)
    assert swap is True and lower == (False, True)
    handles = [model.decoder.layers[i].encoder_attn.register_forward_hook(
        lambda m, inp, out, i=i: (out[0], torch.tensor(PLANTED[i])[None])) for i in range(2)]
    try:
        layers, n, unk = stream.analyze_stream(
            model, task, stream.iter_parallel(str(parallel)), alignment_links.iter_links(str(gold), one_indexed=True),
            StubBPE(), swap, lower, progress=False)
        _, _, unk_cased = stream.analyze_stream(model, task, stream.iter_parallel(str(parallel)), None, StubBPE(),
                                                swap, (False, False), progress=False)
    finally:
        for h in handles:
            h.remove()
    assert n == 1 and unk == 0 and unk_cased == 2  # "Das", "Haus@@" are unknown unless lower-cased
    # layer 1: A = {(0,0), (1,2), (2,3)}: |A∩S| = 2, |A∩P| = 2, AER = 1 - 4/6
    assert layers[0] == pytest.approx({"layer": 1, "aer": 1 / 3, "precision": 2 / 3, "recall": 2 / 3, "links": 3,
                                       "cumulative_coverage": 3 / 4})  # English words The, is, sinking
    # layer 2: A = S; houseboat joins the covered English words
    assert layers[1] == pytest.approx({"layer": 2, "aer": 0.0, "precision": 1.0, "recall": 1.0, "links": 3,
                                       "cumulative_coverage": 1.0})


def test_lowercase_follows_the_dictionaries(en_de_model):
    _, task = en_de_model
    assert stream.dictionary_is_cased(task.source_dictionary) and not stream.dictionary_is_cased(task.target_dictionary)
    assert stream.lowercase_sides(task, True) == (True, True)
    assert stream.lowercase_sides(task, False) == (False, False)


def test_zhen_gold_set():
    """../shared/data/alignment/zhen: 450 pairs, Chinese segmented into words, English
    tokenized and lower-cased, sure links only, all inside the sentences."""
    path, gold_path = os.path.join(ALIGN, "zhen", "test.zh-en"), os.path.join(ALIGN, "zhen", "zhen.talp")
    pairs = alignment.read_parallel(path)
    gold = alignment_links.read_links(gold_path, one_indexed=True)
    alignment.check_lengths(gold, pairs, gold_path)
    assert len(pairs) == 450 and alignment.file_languages(path) == ("zh", "en")
    assert all(" ".join(en) == " ".join(en).lower() for _, en in pairs)
    assert pairs[0][0][:3] == ["科学家", "一直", "猜想"]
    raw = open(gold_path).read().split()
    assert "p" not in "".join(raw) and sum(len(s) for s, _ in gold) == len(set(
        (n, tok) for n, line in enumerate(open(gold_path)) for tok in line.split()))


def test_aer_command_on_zhen(tmp_path):
    """Hypothesis = gold without the first link of each line: |A| = |A∩S| = |S| - 450, so
    AER = 1 - 2(|S| - 450) / (2|S| - 450), recall (|S| - 450) / |S|, precision 1."""
    gold_path = os.path.join(ALIGN, "zhen", "zhen.talp")
    lines = open(gold_path).read().splitlines()
    hyp = tmp_path / "hyp.talp"
    hyp.write_text("".join(" ".join(f"{int(t.split('-')[0]) - 1}-{int(t.split('-')[1]) - 1}" for t in line.split()[1:]) + "\n"
                           for line in lines))
    s = sum(len(set(line.split())) for line in lines)
    proc = run_cli(["fusion-aer", "--gold", gold_path, "--hyp", str(hyp), "--json"])
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["aer"] == pytest.approx(1 - 2 * (s - 450) / (2 * s - 450))
    assert r["recall"] == pytest.approx((s - 450) / s) and r["precision"] == 1.0


def test_alignment_command_matches_a_sentence_by_sentence_count(small_checkpoint, multi30k_slice, tmp_path):
    """The command (two checkpoints, batches of 7) against AER and C<=i counted here one
    sentence at a time from layer_attentions, with the command's BPE and direction."""
    from fairseq_fusion_tools.analysis.common import load_model

    out = str(tmp_path / "align")
    parallel, gold_path = os.path.join(ALIGN, "deen", "test.de-en"), os.path.join(ALIGN, "deen", "deen.talp")
    proc = run_cli([
        "fusion-alignment-analysis", "--path", small_checkpoint, small_checkpoint, "--labels", "a,b",
        "--data", multi30k_slice, "--parallel", parallel, "--gold", gold_path,
        "--sentences", "12", "--batch-size", "7", "--out", out, "--cpu",
    ])
    data = json.load(open(out + ".json"))
    assert os.path.getsize(out + ".png") > 0
    a, b = data["checkpoints"]
    assert a["layers"] == b["layers"] and a["swap"] is True and a["sentences"] == 12
    model, task, _ = load_model(small_checkpoint, multi30k_slice, cpu=True)
    bpe = alignment.load_bpe(os.path.join(multi30k_slice, "bpe.codes"))
    pairs, gold = alignment.read_parallel(parallel)[:12], alignment_links.read_links(gold_path, True)[:12]
    counts = [[0, 0, 0, 0, set()] for _ in range(2)]  # |A|, |A∩S|, |A∩P|, |S|; covered (sentence, English word)
    for n, ((de, en), (sure, possible)) in enumerate(zip(pairs, gold)):
        src_ids, src_index = alignment.encode_words(en, task.source_dictionary, bpe)
        tgt_ids, tgt_index = alignment.encode_words(de, task.target_dictionary, bpe)
        prev = torch.cat([tgt_ids[-1:], tgt_ids[:-1]])
        attns = alignment.layer_attentions(model, src_ids[None], torch.tensor([len(src_ids)]), prev[None])
        for layer, attn in enumerate(attns):
            links = {(g, e) for e, g in alignment.word_alignment(attn[0, : len(tgt_index), : len(src_index)], src_index, tgt_index)}
            c = counts[layer]
            c[0] += len(links); c[1] += len(links & sure); c[2] += len(links & possible); c[3] += len(sure)
            for later in counts[layer:]:
                later[4].update((n, e) for _, e in links)
    english_words = sum(len(en) for _, en in pairs)
    for row, (a_, a_s, a_p, s, covered) in zip(a["layers"], counts):
        assert row["links"] == a_ == sum(len(de) for de, _ in pairs)  # one link per German word
        assert row["aer"] == pytest.approx(1 - (a_s + a_p) / (a_ + s))
        assert row["cumulative_coverage"] == pytest.approx(len(covered) / english_words)
    assert "layer 2: AER" in proc.stdout


def test_coverage_without_gold(small_checkpoint, multi30k_slice, tmp_path):
    out = str(tmp_path / "cov")
    run_cli(["fusion-alignment-analysis", "--path", small_checkpoint, "--data", multi30k_slice, "--parallel",
             os.path.join(ALIGN, "deen", "test.de-en"), "--sentences", "5", "--out", out, "--cpu"])
    rows = json.load(open(out + ".json"))["checkpoints"][0]["layers"]
    assert "aer" not in rows[0] and len(rows) == 2
    bad = run_cli(["fusion-alignment-analysis", "--path", small_checkpoint, "--parallel", "nope.de-en",
                   "--out", out, "--cpu"], check=False)
    assert bad.returncode != 0 and "--parallel nope.de-en: no such file" in bad.stderr


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
