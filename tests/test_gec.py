"""Grammatical error correction (Liu et al. 2021, CoNLL-2014): the M2 scorer, fusion-score-m2 and the recipe.

The M2 numbers pinned here come from the official m2scorer (nusnlp/m2scorer, Python 2.7) or from its
README, or are worked out by hand in the docstrings.
"""
import gzip
import json
import os
import random
import re

import pytest
from cli_runner import expect
from conftest import run_cli, run_recipe

from fairseq_fusion_tools import data_paths
from fairseq_fusion_tools.scoring import m2 as M2
from fairseq_fusion_tools.scoring.metrics import get_metric


# nusnlp/m2scorer example/source_gold, example/system and example/system2 (README: "Precision 0.8000,
# Recall 0.8000, F_0.5 0.8000" for system; the official script gives 0.7500 / 0.6000 / 0.7143 for system2)
OFFICIAL_GOLD = """S The cat sat at mat .
A 3 4|||Prep|||on|||REQUIRED|||-NONE-|||0
A 4 4|||ArtOrDet|||the||a|||REQUIRED|||-NONE-|||0

S The dog .
A 1 2|||NN|||dogs|||REQUIRED|||-NONE-|||0
A -1 -1|||noop|||-NONE-|||-NONE-|||-NONE-|||1

S Giant otters is an apex predator .
A 2 3|||SVA|||are|||REQUIRED|||-NONE-|||0
A 3 4|||ArtOrDet|||-NONE-|||REQUIRED|||-NONE-|||0
A 5 6|||NN|||predators|||REQUIRED|||-NONE-|||0
A 1 2|||NN|||otter|||REQUIRED|||-NONE-|||1
"""
OFFICIAL_SYSTEM = ["A cat sat on the mat .", "The dog .", "Giant otters are apex predator ."]
OFFICIAL_SYSTEM2 = ["A cat sat on mat .", "The dog .", "Giant otters are apex predator ."]


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def counts(result):
    c = result["counts"]
    return c["correct"], c["proposed"], c["gold"]


# ------------------------------------------------------------------------------------ official example
def test_official_example_matches_the_readme(tmp_path):
    gold = write(tmp_path / "source_gold", OFFICIAL_GOLD)
    r = M2.score_m2(OFFICIAL_SYSTEM, gold)
    assert counts(r) == (4, 5, 5)  # README: four valid edits, one unnecessary, one missing
    assert (round(r["precision"], 4), round(r["recall"], 4), round(r["f_beta"], 4)) == (0.8, 0.8, 0.8)
    r2 = M2.score_m2(OFFICIAL_SYSTEM2, gold)
    assert counts(r2) == (3, 4, 5)
    assert (round(r2["precision"], 4), round(r2["recall"], 4), round(r2["f_beta"], 4)) == (0.75, 0.6, 0.7143)


# ------------------------------------------------------------------------------------- by-hand cases
def one(tmp_path, hyp, m2_text, **kw):
    return M2.score_m2([hyp], write(tmp_path / "g.m2", m2_text), **kw)


def test_transitive_edit_joins_adjacent_changes(tmp_path):
    """'He go to school' -> 'He goes to the school'; gold: go->goes, insert 'the' before school.
    Both are found as separate edits (2 correct of 2 proposed, 2 gold). With a gold edit that spans
    'to school' -> 'to the school' instead, the lattice's transitive arc (ins 'the' + the kept 'to'
    ... ) lets the system edit match it as one: correct 2 (go->goes, the joined edit), proposed 2."""
    base = "S He go to school .\nA 1 2|||SVA|||goes|||REQUIRED|||-NONE-|||0\n"
    r = one(tmp_path, "He goes to the school .", base + "A 3 3|||ArtOrDet|||the|||REQUIRED|||-NONE-|||0\n")
    assert counts(r) == (2, 2, 2)
    r = one(tmp_path, "He goes to the school .", base + "A 2 3|||ArtOrDet|||to the|||REQUIRED|||-NONE-|||0\n")
    assert counts(r) == (2, 2, 2)
    # the joined edit keeps 'to' unchanged: with no unchanged word allowed inside an edit it cannot match
    r = one(tmp_path, "He goes to the school .", base + "A 2 3|||ArtOrDet|||to the|||REQUIRED|||-NONE-|||0\n",
            max_unchanged_words=0)
    assert counts(r) == (1, 2, 2)


def test_edit_of_two_words_against_a_gold_edit_of_two_words(tmp_path):
    """'a informations' -> 'information': gold deletes 'a' and rewrites the noun as ONE edit (0 2 ->
    information); the system's delete + substitution join (transitive arc) into that edit: 1/1/1."""
    r = one(tmp_path, "information is useful .",
            "S a informations is useful .\nA 0 2|||Nn|||information|||REQUIRED|||-NONE-|||0\n")
    assert counts(r) == (1, 1, 1) and r["f_beta"] == pytest.approx(1.0)


def test_noop_annotator_and_the_best_of_two_annotators(tmp_path):
    """Sentence 1: annotator 0 wants dog->dogs, annotator 1 nothing (noop). The unchanged hypothesis
    scores 0/0/1 with annotator 0 (F 0) and 0/0/0 with annotator 1 (F 1 by convention): annotator 1.
    Sentence 2: the system writes 'cats'; annotator 0 (cat->cats) gives 1/1/1, annotator 1 (the->a)
    gives 0/1/1: annotator 0. Totals 1/1/1."""
    gold = ("S The dog .\nA 1 2|||NN|||dogs|||REQUIRED|||-NONE-|||0\nA -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||1\n\n"
            "S The cat sleeps .\nA 1 2|||NN|||cats|||REQUIRED|||-NONE-|||0\nA 0 1|||ArtOrDet|||A|||REQUIRED|||-NONE-|||1\n")
    r = M2.score_m2(["The dog .", "The cats sleeps ."], write(tmp_path / "g.m2", gold))
    assert counts(r) == (1, 1, 1)
    # the same system edits against annotator 0 alone: sentence 1 misses its gold edit
    only0 = "\n".join(line for line in gold.split("\n") if not line.endswith("|||1")) + "\n"
    assert counts(M2.score_m2(["The dog .", "The cats sleeps ."], write(tmp_path / "g0.m2", only0))) == (1, 1, 2)


def test_case_is_significant_unless_ignored(tmp_path):
    """'the cat' -> 'The cat' is an edit (the->The) the gold lacks: 0 correct, 1 proposed, 1 gold
    (sat->sits missed). --ignore_whitespace_casing drops case-only edits: 0 proposed (P = 1 by
    convention). A correction differing from the gold's in case does not match: 0/1/1."""
    gold = "S the cat sat .\nA 2 3|||Vform|||sits|||REQUIRED|||-NONE-|||0\n"
    assert counts(one(tmp_path, "The cat sat .", gold)) == (0, 1, 1)
    r = one(tmp_path, "The cat sat .", gold, ignore_whitespace_casing=True)
    assert counts(r) == (0, 0, 1) and r["precision"] == 1.0 and r["f_beta"] == 0.0
    assert counts(one(tmp_path, "the cat Sits .", gold)) == (0, 1, 1)
    assert counts(one(tmp_path, "the cat sits .", gold)) == (1, 1, 1)


def test_alternative_corrections_and_insertion_sequences(tmp_path):
    """Gold 'the||a' accepts either; two inserted words at one offset match two gold insertions there
    in order (the insertion branch of set_weights): 'in the house' from 'in house' + 'big':
    gold inserts 'the' and 'big' at offset 1 -> the system's 'the big' is 2 correct of 2."""
    gold = "S in house .\nA 1 1|||ArtOrDet|||the||a|||REQUIRED|||-NONE-|||0\nA 1 1|||Adj|||big|||REQUIRED|||-NONE-|||0\n"
    assert counts(one(tmp_path, "in a big house .", gold)) == (2, 2, 2)
    assert counts(one(tmp_path, "in the big house .", gold)) == (2, 2, 2)
    assert counts(one(tmp_path, "in big the house .", gold)) == (1, 2, 2)  # wrong order: only one matches


def test_malformed_gold_and_count_mismatch_are_clear_errors(tmp_path):
    bad = write(tmp_path / "bad.m2", "S a b .\nA 0 x|||T|||c|||REQUIRED|||-NONE-|||0\n")
    with pytest.raises(M2.M2FormatError, match=r"bad\.m2:2: .*integers"):
        M2.score_m2(["a b ."], bad)
    bad = write(tmp_path / "bad2.m2", "S a b .\nX what\n")
    with pytest.raises(M2.M2FormatError, match=r"bad2\.m2:2"):
        M2.score_m2(["a b ."], bad)
    good = write(tmp_path / "g.m2", OFFICIAL_GOLD)
    with pytest.raises(ValueError, match=r"hyp\.txt has 2 sentences but the gold file .*g\.m2 has 3"):
        M2.score_m2(OFFICIAL_SYSTEM[:2], good, hyp_name="hyp.txt")


# ------------------------------------------------------------------- a larger sample against the official
ARTICLES = ["a", "an", "the"]
SWAPS = {"is": "are", "are": "is", "has": "have", "have": "has", "was": "were", "were": "was"}
FILLERS = ["very", "of", "it", "big", "to", "and", "that"]


def tokenize(line):
    return re.findall(r"[\w']+|[^\w\s]", line)


def multi30k_english(n, start=0):
    with gzip.open(data_paths.data_path("multi30k", "train.en.gz"), "rt", encoding="utf-8") as f:
        for _ in range(start):
            next(f)
        return [tokenize(next(f)) for _ in range(n)]


def corrupt(tokens, rng):
    """Deterministic learner-like errors in a correct sentence: article drops, agreement swaps, a
    lower-cased first word, a duplicated word. Returns (source tokens, gold edits on the source:
    (start, end, correction))."""
    src, edits = [], []
    for i, tok in enumerate(tokens):
        low = tok.lower()
        roll = rng.random()
        if low in ARTICLES and roll < 0.5:  # dropped article: insertion edit
            edits.append((len(src), len(src), tok))
            continue
        if low in SWAPS and roll < 0.6:
            edits.append((len(src), len(src) + 1, tok))
            src.append(SWAPS[low])
            continue
        if i == 0 and tok[:1].isupper() and roll < 0.3:
            edits.append((0, 1, tok))
            src.append(tok.lower())
            continue
        src.append(tok)
        if tok.isalpha() and roll > 0.95:  # duplicated word: deletion edit
            edits.append((len(src), len(src) + 1, ""))
            src.append(tok)
    return src, edits


def system_output(src, edits, rng):
    """A hypothesis: each gold edit applied with probability 0.6, plus random wrong edits
    (insertions, deletions, substitutions, case changes)."""
    out = list(src)
    for start, end, corr in sorted(edits, reverse=True):
        if rng.random() < 0.6:
            out[start:end] = corr.split()
    i = 0
    while i < len(out):
        roll = rng.random()
        if roll < 0.04:
            out.insert(i, rng.choice(FILLERS + ARTICLES))
            i += 1
        elif roll < 0.07:
            del out[i]
            continue
        elif roll < 0.09:
            out[i] = rng.choice(FILLERS)
        elif roll < 0.11:
            out[i] = out[i].swapcase()
        i += 1
    return out


def m2_block(src, annotations):
    lines = ["S " + " ".join(src)]
    for annotator, edits in annotations:
        if edits is None:
            lines.append(f"A -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||{annotator}")
        for start, end, corr in edits or []:
            lines.append(f"A {start} {end}|||X|||{corr or '-NONE-'}|||REQUIRED|||-NONE-|||{annotator}")
    return "\n".join(lines) + "\n"


def synthetic_gec(n, seed=0, start=0):
    """n Multi30k sentences made ungrammatical (source), the originals (target), their M2 gold edits
    (annotator 0; every 4th sentence also an annotator 1 with the first edit only, every 7th a noop
    annotator 1; alternatives 'a||the' on article insertions) and a noisy system output."""
    rng = random.Random(seed)
    sources, targets, blocks, hyps = [], [], [], []
    for k, tokens in enumerate(multi30k_english(n, start)):
        src, edits = corrupt(tokens, rng)
        alt = [(s, e, c + "||" + ("the" if c.lower() == "a" else "a")) if s == e and c.lower() in ARTICLES else (s, e, c)
               for s, e, c in edits]
        annotations = [(0, alt)]
        if k % 4 == 0 and edits:
            annotations.append((1, edits[:1]))
        elif k % 7 == 0:
            annotations.append((1, None))
        sources.append(" ".join(src))
        targets.append(" ".join(tokens))
        blocks.append(m2_block(src, annotations))
        hyps.append(" ".join(system_output(src, edits, rng)))
    return {"sources": sources, "targets": targets, "m2": "\n".join(blocks), "hyps": hyps}


# Precision, recall and F of the official m2scorer (nusnlp/m2scorer at cb874a7, scripts/m2scorer.py run with
# Python 2.7.18) on synthetic_gec(400, seed=1) under its default options, --ignore_whitespace_casing,
# --max_unchanged_words 0 and --beta 1.0 (the same run matched on seeds 2 and 3 as well)
OFFICIAL_ON_SAMPLE = {
    (): (0.5356, 0.6239, 0.5512),
    (("ignore_whitespace_casing", True),): (0.5643, 0.5995, 0.5710),
    (("max_unchanged_words", 0),): (0.5021, 0.6224, 0.5223),
    (("beta", 1.0),): (0.5351, 0.6250, 0.5766),
}


@pytest.mark.parametrize("options", sorted(OFFICIAL_ON_SAMPLE))
def test_sample_matches_the_official_scorer(tmp_path, options):
    sample = synthetic_gec(400, seed=1)
    gold = write(tmp_path / "gold.m2", sample["m2"])
    r = M2.score_m2(sample["hyps"], gold, **dict(options))
    assert (round(r["precision"], 4), round(r["recall"], 4), round(r["f_beta"], 4)) == OFFICIAL_ON_SAMPLE[options]


# ------------------------------------------------------------------------------------- data preparation
def test_m2_to_parallel_follows_convert_m2_to_parallel(tmp_path):
    """The target side as mlconvgec2018's convert_m2_to_parallel.py writes it, worked out by hand: edits left to
    right with their first correction, two insertions at one offset in file order, a deletion, 'Um' edits
    left out; the chosen annotator only; a noop annotator keeps the source; -NONE- is the empty correction."""
    gold = write(tmp_path / "g.m2", (
        "S in house is big the the garden .\n"
        "A 1 1|||ArtOrDet|||the||a|||REQUIRED|||-NONE-|||0\n"
        "A 1 1|||Adj|||old|||REQUIRED|||-NONE-|||0\n"
        "A 2 3|||SVA|||was|||REQUIRED|||-NONE-|||0\n"
        "A 4 5|||Um|||and|||REQUIRED|||-NONE-|||0\n"
        "A 5 6|||Wci|||-NONE-|||REQUIRED|||-NONE-|||0\n"
        "A 0 1|||Prep|||In|||REQUIRED|||-NONE-|||1\n"
        "\n"
        "S Fine .\n"
        "A -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||0\n"))
    src, tgt = str(tmp_path / "s"), str(tmp_path / "t")
    assert M2.m2_to_parallel(gold, src, tgt) == 2
    assert open(src).read().split("\n")[:2] == ["in house is big the the garden .", "Fine ."]
    assert open(tgt).read().split("\n")[:2] == ["in the old house was big the garden .", "Fine ."]
    M2.m2_to_parallel(gold, src, tgt, annotator=1)
    assert open(tgt).readline().strip() == "In house is big the the garden ."


def test_score_m2_cli_reads_generate_logs_and_text(tmp_path):
    """fusion-score-m2 on the official example: as plain text and as a fairseq-generate log (ids out of order,
    BPE in the H- lines), both give the README's 0.8 / 0.8 / 0.8; a wrong line count names both files."""
    gold = write(tmp_path / "gold.m2", OFFICIAL_GOLD)
    text = write(tmp_path / "sys.txt", "\n".join(OFFICIAL_SYSTEM) + "\n")
    run_cli(["fusion-score-m2", "--hyp", text, "--hyp-format", "text", "--gold", gold, "--out", str(tmp_path / "a")])
    gen_lines = []
    for i in (2, 0, 1):
        bpe = OFFICIAL_SYSTEM[i].replace("predator", "pred@@ ator").replace("cat", "c@@ at")
        gen_lines += [f"S-{i}\tx", f"H-{i}\t-0.5\t{bpe}", f"P-{i}\t-0.1"]
    gen = write(tmp_path / "gen.txt", "\n".join(gen_lines) + "\n")
    run_cli(["fusion-score-m2", "--hyp", gen, "--gold", gold, "--out", str(tmp_path / "b")])
    for out in ("a", "b"):
        r = json.load(open(tmp_path / f"{out}.json"))
        assert (round(r["precision"], 4), round(r["recall"], 4), round(r["f_beta"], 4)) == (0.8, 0.8, 0.8)
        assert r["counts"] == {"correct": 4, "proposed": 5, "gold": 5, "sentences": 3}
    short = write(tmp_path / "short.txt", OFFICIAL_SYSTEM[0] + "\n")
    proc = run_cli(["fusion-score-m2", "--hyp", short, "--hyp-format", "text", "--gold", gold, "--out", str(tmp_path / "c")],
                   check=False)
    expect(proc, proc.returncode != 0 and "short.txt has 1 sentences but the gold file" in proc.stderr,
           "a refusal of the output shorter than the gold file")


def test_m2_metric_scores_the_first_sentences(tmp_path):
    """--metric m2:GOLD (layer masking): the hypotheses of the first N sentences against the first N gold
    sentences; sentence 1 alone is 'A cat sat on the mat .' -> 2 correct of 3 proposed, 2 gold: F0.5 = 100 *
    1.25 * (2/3) * 1 / (0.25 * 2/3 + 1) = 71.43; a missing gold file is named at once."""
    gold = write(tmp_path / "gold.m2", OFFICIAL_GOLD)
    metric = get_metric(f"m2:{gold}")
    assert metric(OFFICIAL_SYSTEM, ["unused"] * 3) == pytest.approx(80.0)
    assert metric(OFFICIAL_SYSTEM[:1], ["unused"]) == pytest.approx(100 * 1.25 * (2 / 3) / (0.25 * 2 / 3 + 1))
    with pytest.raises(ValueError, match="m2:nowhere.m2: no such gold M2 file"):
        get_metric("m2:nowhere.m2")


# -------------------------------------------------------------------------------------- the recipe
@pytest.mark.long_run
def test_gec_recipe_end_to_end(tmp_path):
    """prepare (mlconvgec2018's folder layout, tokens kept, unchanged pairs dropped) -> SurfaceFusion's command; train
    FGLA with SwitchOut -> evaluate with beam 6, LP 0.6 -> M2; then layer masking of the FGLA model scored with F0.5
    and its layer-attention map, on learner-like errors put into Multi30k sentences."""
    local = tmp_path / "mlconvgec"
    local.mkdir()
    train = synthetic_gec(300, seed=4, start=1000)
    write(local / "train.tok.src", "\n".join(train["sources"]) + "\n")
    write(local / "train.tok.trg", "\n".join(train["targets"]) + "\n")
    write(local / "dev.all.m2", synthetic_gec(30, seed=5, start=2000)["m2"])
    test = synthetic_gec(8, seed=6, start=3000)  # the M2 lattice of an untrained output is costly: few sentences
    test_m2 = write(tmp_path / "conll14.m2", test["m2"])
    # an untrained model repeats words up to fairseq's default 200 tokens; the M2 lattice of such an output costs
    # minutes a sentence (as in the official scorer), so the outputs are kept to the source's length + 2
    env = {"WORK": str(tmp_path / "w"), "MAX_UPDATE": "2", "AVERAGE": "0", "BPE_MERGES": "300",
           "GEN_ARGS": "--max-len-a 1 --max-len-b 2",
           "EXTRA_ARGS": "--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 32 --decoder-embed-dim 32 "
                         "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
                         "--decoder-attention-heads 2 --num-workers 0 --max-tokens 3000"}

    def recipe(step, *args, check=True):
        return run_recipe("conll14_gec", step, *args, env=env, check=check)

    missing = recipe("prepare", check=False)  # no --local: the registration-only corpora are named
    expect(missing, missing.returncode != 0 and "NUCLE" in missing.stderr and "Lang-8" in missing.stderr,
           "prepare.sh without --local to refuse, naming NUCLE and Lang-8")
    prepare = recipe("prepare", "--local", str(local), "--test-m2", test_m2, "--workers", "1")
    data = tmp_path / "w" / "data-liu.src-trg"
    changed = sum(s != t for s, t in zip(train["sources"], train["targets"]))
    assert 0 < changed < 300, f"expected some but not all of the 300 synthetic pairs corrected: {changed}"
    kept = len((data / "tok" / "train.src").read_text().splitlines())
    expect(prepare, kept == changed, f"the {changed} corrected pairs only in tok/train.src (get_diff.py), not {kept}")
    m2_sources = [line[2:] for line in test["m2"].splitlines() if line.startswith("S ")]
    expect(prepare, (data / "tok" / "test.src").read_text(encoding="utf-8").splitlines() == m2_sources,
           "tok/test.src to be the M2 file's S lines, tokens kept")
    expect(prepare, (data / "test.m2").read_text() == test["m2"] and (data / "valid.m2").exists(),
           "test.m2 copied from --test-m2 and a valid.m2")

    table4 = ("--max-update 80000", "--dropout 0.2", "--task translation_switchout", "--switchout-tau-src 0.8",
              "--switchout-tau-tgt 0.9", "--update-freq 16")  # Table 4 and A.1, before the test's overrides
    # SurfaceFusion: the command train.sh builds (--print-command runs nothing); FGLA is trained and evaluated
    printed = recipe("train", "transformer_surface_fusion", "--print-command")
    for flag in table4 + ("--arch transformer_surface_fusion",):
        expect(printed, flag in printed.stdout, f"SurfaceFusion's command to have {flag}")
    arch = "transformer_fine_grained_layer_attention"
    trained = recipe("train", arch)
    save = fgla = tmp_path / "w" / "checkpoints" / f"{arch}.liu.src-trg"
    command = (save / "command.txt").read_text()
    for flag in table4:
        expect(trained, flag in command, f"{arch}'s command.txt to have {flag}")
    evaluate = recipe("evaluate", arch)
    expect(evaluate, "beam 6, length penalty 0.6" in evaluate.stdout and "| M2: P" in evaluate.stdout,
           "evaluate.sh to say 'beam 6, length penalty 0.6' and print the M2 line")
    result = json.loads((save / "eval" / "test.json").read_text())
    expect(evaluate, result["counts"]["sentences"] == 8 and result["beta"] == 0.5,
           f"test.json of 8 sentences at beta 0.5: {result}")

    out = str(tmp_path / "masking")
    run_cli(["fusion-layer-masking", "--path", str(fgla / "checkpoint_last.pt"), "--cpu", "--sentences", "5",
             "--metric", f"m2:{data / 'test.m2'}", "--beam", "6", "--lenpen", "0.6", "--max-len-a", "1", "--max-len-b", "2",
             "--layers", "0,2", "--out", out])
    masking = json.load(open(out + ".json"))
    assert masking["metric"].startswith("m2:") and [r["masked_layer"] for r in masking["masked"]] == [0, 2]
    assert all(r["sentences"] == 5 for r in masking["masked"])
    heat = str(tmp_path / "heat")
    run_cli(["fusion-layer-attention-map", "--path", str(fgla / "checkpoint_last.pt"), "--out", heat])
    weights = json.load(open(heat + ".json"))["weights"]
    assert os.path.exists(heat + ".png") and len(weights) == 2 and all(len(row) == 3 for row in weights)  # 2 decoder x (emb + 2)
