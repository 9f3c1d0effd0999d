"""Summarization as Liu et al. 2021 (CNN/DM): ROUGE against the official ROUGE-1.5.5's figures, the GPT-2 BPE
pipeline, and the recipe end to end (prepare, train, generate with the paper's settings, ROUGE) on a small real
sample built from newstest2014, plus layer masking with ROUGE."""
import json
import os
import re

import pytest
from cli_runner import expect
from conftest import run_cli, run_recipe

from fairseq_fusion_tools import data_paths
from fairseq_fusion_tools.scoring import rouge_porter
from fairseq_fusion_tools.scoring.rouge import document_scores, rouge_scores

# five summaries scored by ROUGE-1.5.5.pl (-e data -a -m -n 2 -d -z SPL, one sentence a line): per-document R, P,
# F of ROUGE-1, ROUGE-2, ROUGE-L. Documents 2-5 need the exception lists (said/say, found/finding -> find, fed ->
# feed, better/best -> well). Document 4's ROUGE-1 was first pinned with an exception database rebuilt in another
# file order (better/best -> good); it was re-run with the content of the database the release shipped (adj, adv,
# noun, verb, a later list winning; tests/data/rouge155/README.md), as were the corpus averages below.
OFFICIAL = [
    ("police killed the gunman after a standoff .\nthe suspect had taken three hostages in the bank .",
     "Police shot the gunman dead after a six-hour standoff .\nThree hostages were freed unharmed from the bank .",
     [(0.55556, 0.62500, 0.58824), (0.23529, 0.26667, 0.25000), (0.55556, 0.62500, 0.58824)]),
    ("the new stadium will open in 2021 , officials said .",
     "Officials say the stadium opens in 2021 .\nIt will seat 60,000 fans .",
     [(0.61538, 0.88889, 0.72727), (0.25000, 0.37500, 0.30000), (0.46154, 0.66667, 0.54546)]),
    ("scientists found water on the moon .\nthe discovery was announced on monday .",
     "NASA scientists have discovered water on the sunlit surface of the Moon .\nThe finding was announced Monday .",
     [(0.58824, 0.83333, 0.68966), (0.31250, 0.45455, 0.37037), (0.52941, 0.75000, 0.62069)]),
    ("the the the children were better fed and better housed .",
     "The children were fed well ; the best houses went to the children .",
     [(0.75000, 0.90000, 0.81818), (0.27273, 0.33333, 0.30000), (0.50000, 0.60000, 0.54545)]),
    ("U.S. stocks rose 2.5% on Tuesday as oil-prices fell .\nInvestors bought tech shares .",
     "US stocks rose on Tuesday , as oil prices fell by 2.5 % .\nTech shares led the gains as investors returned .",
     [(0.65000, 0.81250, 0.72222), (0.42105, 0.53333, 0.47059), (0.50000, 0.62500, 0.55556)]),
]


def test_rouge_equals_the_official_rouge155():
    for hyp, ref, expected in OFFICIAL:
        got = rouge_scores([hyp], [ref])
        for kind, (r, p, f) in zip(("rouge1", "rouge2", "rougeL"), expected):
            assert (got[kind]["r"] / 100, got[kind]["p"] / 100, got[kind]["f"] / 100) == pytest.approx((r, p, f), abs=2e-5), (hyp, kind)
    # -a -r 1000: the corpus figures are the script's printed averages (bootstrap means, not the documents' mean)
    corpus = rouge_scores([h for h, _, _ in OFFICIAL], [r for _, r, _ in OFFICIAL])
    assert [corpus[k][n] for k in ("rouge1", "rouge2", "rougeL") for n in "rpf"] == [
        63.127, 81.151, 70.859, 29.864, 39.311, 33.86, 50.937, 65.362, 57.123]
    # Porter alone misses the exception words: document 2 then has 7 unigram matches, not 8
    def porter_only(word):
        return rouge_porter.stem(word) if len(word) > 3 else word

    assert document_scores(OFFICIAL[1][0], OFFICIAL[1][1], porter_only)["rouge1"][0] == round(7 / 13, 5)
    assert rouge_scores([OFFICIAL[1][0]], [OFFICIAL[1][1]])["rouge1"]["r"] == round(800 / 13, 3)


def tiny_gpt2(folder):
    """Files in fairseq's GPT-2 BPE format: the 256 byte symbols, a few merges, dict.txt of the ids."""
    from fairseq.data.encoders.gpt2_bpe_utils import bytes_to_unicode

    symbols = list(bytes_to_unicode().values())
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("e", "r"), ("Ġ", "a"), ("o", "n"), ("r", "e"), ("Ġ", "s"),
              ("a", "t"), ("e", "n"), ("Ġ", "w"), ("o", "r"), ("i", "s"), ("Ġ", "c"), ("e", "s"), ("Ġ", "o"), ("in", "g")]
    vocab = symbols + ["".join(m) for m in merges]
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "encoder.json"), "w") as f:
        json.dump({s: i for i, s in enumerate(vocab)}, f)
    with open(os.path.join(folder, "vocab.bpe"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    with open(os.path.join(folder, "dict.txt"), "w") as f:
        f.writelines(f"{i} {1000 - i % 1000}\n" for i in range(len(vocab)))
    return folder


def news_sample(folder, n_train=160, n_valid=12, n_test=12):
    """Articles of four consecutive newstest2014 sentences, summaries their first two (lead-2, <q>-separated)."""
    with open(data_paths.data_path("wmt14", "newstest2014.en"), encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    docs = [lines[i:i + 4] for i in range(0, 4 * (n_train + n_valid + n_test), 4)]
    os.makedirs(folder, exist_ok=True)
    for name, part in (("train", docs[:n_train]), ("val", docs[n_train:n_train + n_valid]), ("test", docs[-n_test:])):
        with open(os.path.join(folder, f"{name}.source"), "w", encoding="utf-8") as s, \
                open(os.path.join(folder, f"{name}.target"), "w", encoding="utf-8") as t:
            for d in part:
                s.write(" ".join(d) + "\n")
                t.write(" <q> ".join(d[:2]) + "\n")
    return folder


def test_gpt2_preparation_encodes_and_truncates(tmp_path):
    """fusion-prepare-gpt2: the ids of fairseq's GPT-2 encoder (decoded back here to the text), sources cut to N words,
    dictionary = dict.txt plus fairseq's 4 special symbols."""
    from fairseq.data import Dictionary
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

    gpt2 = tiny_gpt2(str(tmp_path / "gpt2"))
    raw = news_sample(str(tmp_path / "raw"), 20, 4, 4)
    out = str(tmp_path / "data")
    run_cli(["fusion-prepare-gpt2", "-s", "source", "-t", "target", "--trainpref", f"{raw}/train", "--validpref", f"{raw}/val",
             "--testpref", f"{raw}/test", "--gpt2-dir", gpt2, "--truncate-source", "30", "--destdir", out])
    enc = get_encoder(os.path.join(gpt2, "encoder.json"), os.path.join(gpt2, "vocab.bpe"))
    src = open(f"{raw}/test.source", encoding="utf-8").readline().split()
    ids = open(f"{out}/tok/test.bpe.source").readline().split()
    assert enc.decode([int(i) for i in ids]) == " ".join(src[:30])
    assert " the" in enc.decode([int(i) for i in ids]) and str(enc.encoder["Ġthe"]) in ids  # merges applied
    d = Dictionary.load(f"{out}/dict.source.txt")
    assert len(d) == 4 + 256 + 18 and d.index("0") == 4


def test_gpt2_preparation_never_leaves_a_half_written_folder(tmp_path):
    """A failure half-way (the test split's sides differ in length, found after train and valid were encoded)
    leaves no --destdir; a prepared --destdir is refused in one line unless --overwrite, and kept as it was."""
    gpt2 = tiny_gpt2(str(tmp_path / "gpt2"))
    raw = news_sample(str(tmp_path / "raw"), 20, 4, 4)
    with open(f"{raw}/test.target", "a", encoding="utf-8") as f:
        f.write("one line more\n")
    out = tmp_path / "data"
    args = ["fusion-prepare-gpt2", "-s", "source", "-t", "target", "--trainpref", f"{raw}/train", "--validpref",
            f"{raw}/val", "--gpt2-dir", gpt2, "--destdir", str(out)]
    proc = run_cli(args + ["--testpref", f"{raw}/test"], check=False)
    expect(proc, proc.returncode != 0 and "test.source has 4 lines but" in proc.stderr and "Traceback" not in proc.stderr,
           "a one-line refusal of test.source's 4 lines")
    assert sorted(os.listdir(tmp_path)) == ["gpt2", "raw"]  # no data, no .data.building-*
    run_cli(args)
    before = {f: os.path.getmtime(out / f) for f in os.listdir(out)}
    proc = run_cli(args, check=False)
    assert proc.returncode != 0 and proc.stderr.strip().splitlines()[-1] == (
        f"fairseq-fusion: error: --destdir {out} already holds a prepared folder: pass --overwrite to replace it "
        "(it stays as it is until the new one is complete), or give another --destdir")
    assert {f: os.path.getmtime(out / f) for f in os.listdir(out)} == before
    run_cli(args + ["--overwrite", "--max-lines", "3"])
    assert len(open(out / "tok" / "train.raw.source").readlines()) == 3


@pytest.mark.long_run
def test_summarization_recipe_end_to_end(tmp_path):
    """prepare (GPT-2 BPE) -> SurfaceFusion's command (lambda 0.8); train FGLA -> evaluate with beam 4, LP 2.0, min
    length 55, no repeated trigram -> ROUGE; then layer masking of the FGLA model scored with ROUGE-L. (SurfaceFusion
    decodes through fairseq-generate in test_surface_fusion.py.)"""
    gpt2 = tiny_gpt2(str(tmp_path / "gpt2"))
    raw = news_sample(str(tmp_path / "raw"))
    env = {"WORK": str(tmp_path / "w"), "MAX_UPDATE": "2", "AVERAGE": "0",
           "EXTRA_ARGS": "--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 32 --decoder-embed-dim 32 "
                         "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
                         "--decoder-attention-heads 2 --num-workers 0 --max-tokens 6000"}

    def recipe(step, *args):
        return run_recipe("cnndm_summarization", step, *args, env=env)

    prepare = recipe("prepare", "--local", raw, "--gpt2-dir", gpt2, "--workers", "1")
    data = tmp_path / "w" / "data-liu.source-target"
    expect(prepare, (data / "gpt2" / "encoder.json").exists() and (data / "test.source-target.target.bin").exists(),
           f"prepare.sh to write gpt2/encoder.json and test.source-target.target.bin in {data}")
    # SurfaceFusion: the command train.sh builds (--print-command runs nothing); FGLA is trained and evaluated
    printed = recipe("train", "transformer_surface_fusion", "--print-command")
    expect(printed, all(f in printed.stdout for f in ("--max-update 70000", "--dropout 0.1", "--surface-fusion-lambda 0.8")),
           "SurfaceFusion's command to have Table 4's --max-update 70000 --dropout 0.1 and 4.1's --surface-fusion-lambda 0.8")
    arch = "transformer_fine_grained_layer_attention"
    train = recipe("train", arch)
    save = fgla = tmp_path / "w" / "checkpoints" / f"{arch}.liu.source-target"
    command = (save / "command.txt").read_text()
    expect(train, "--max-update 70000" in command and "--dropout 0.1" in command,  # Table 4, before MAX_UPDATE
           f"{arch}'s command.txt to have Table 4's --max-update 70000 --dropout 0.1")
    expect(train, "--surface-fusion" not in command, "no --surface-fusion flag in FGLA's command")
    evaluate = recipe("evaluate", arch)
    expect(evaluate, "beam 4, length penalty 2.0" in evaluate.stdout, "evaluate.sh to say 'beam 4, length penalty 2.0'")
    gen = (save / "eval" / "generate.test.txt").read_text(encoding="utf-8")
    hyps = [line.split("\t")[2].split() for line in gen.splitlines() if line.startswith("H-")]
    texts = [line.split("\t")[2] for line in gen.splitlines() if line.startswith("D-")]
    expect(evaluate, len(hyps) == len(texts) == 12, f"12 H- and D- lines, not {len(hyps)} and {len(texts)}")
    lengths = [len(h) for h in hyps]
    expect(evaluate, all(55 <= n <= 140 for n in lengths),  # --min-len 55 --max-len-b 140 (BPE tokens + EOS)
           f"summaries of 55 to 140 tokens, not {lengths}")
    trigrams = [tuple(h[i:i + 3]) for h in hyps for i in range(len(h) - 2)]
    per_hyp = [[tuple(h[i:i + 3]) for i in range(len(h) - 2)] for h in hyps]
    expect(evaluate, all(len(t) == len(set(t)) for t in per_hyp) and trigrams,  # --no-repeat-ngram-size 3
           "no trigram twice in a summary")
    expect(evaluate, not any(re.fullmatch(r"[\d ]+", t) for t in texts), "D- lines of decoded text, not GPT-2 ids")
    result = json.loads((save / "eval" / "test.json").read_text())
    expect(evaluate, result["summaries"] == 12 and set(result) >= {"rouge1", "rouge2", "rougeL"},
           f"test.json with 12 summaries and rouge1/2/L: {result}")

    out = str(tmp_path / "masking")
    run_cli(["fusion-layer-masking", "--path", str(fgla / "checkpoint_last.pt"), "--cpu", "--sentences", "6",
             "--bpe", "gpt2", "--gpt2-encoder-json", str(data / "gpt2" / "encoder.json"),
             "--gpt2-vocab-bpe", str(data / "gpt2" / "vocab.bpe"), "--metric", "rougeL", "--beam", "2",
             "--min-len", "55", "--max-len-b", "60", "--no-repeat-ngram-size", "3", "--layers", "0,2", "--out", out])
    masking = json.load(open(out + ".json"))
    assert masking["metric"] == "rougeL" and [r["masked_layer"] for r in masking["masked"]] == [0, 2]
    assert masking["generation"]["min_len"] == 55 and masking["generation"]["no_repeat_ngram_size"] == 3
    heat = str(tmp_path / "heat")
    run_cli(["fusion-layer-attention-map", "--path", str(fgla / "checkpoint_last.pt"), "--out", heat])
    weights = json.load(open(heat + ".json"))["weights"]
    assert os.path.exists(heat + ".png") and len(weights) == 2 and all(len(row) == 3 for row in weights)  # 2 decoder x (emb + 2)
