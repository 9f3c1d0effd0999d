"""Parse-tree phrases (Xu et al. 2020, Algorithm 1), fusion-parse-spans and translation_with_phrases."""
import os

import pytest
from cli_runner import expect
from conftest import run_cli, train_args, with_flag

from fairseq_fusion_tools.cli import parse_spans as parse_spans_cli
from fairseq_fusion_tools.prepare import parse_spans
from fairseq_fusion_tools.data_paths import PLUGIN_DIR
from fairseq_fusion.modules.phrase_parse_tree import ParseError, parse_tree, phrase_lengths, tree_words
from fairseq_fusion.tasks.translation_with_phrases import read_phrase_spans, span_path

# hand-written trees, BPE lines and the phrases worked out by hand (sub-word counts, left to right)
CASES = [
    # 4 sub-words + </s> -> n = 3: S too large; VP (1) cannot take NP (3) -> [NP][VP]
    ("(ROOT (S (NP (DT The) (JJ big) (NN dog)) (VP (VBD ran))))", "The big dog ran", [3, 1]),
    # BPE-split words, 6 sub-words -> n = 3: VP (4) too large -> ADVP (2), VBZ (2) stay apart
    ("(S (NP (DT The) (NN dog)) (VP (VBZ barks) (ADVP (RB loudly))))", "The dog bar@@ ks loud@@ ly", [2, 2, 2]),
    # adjacent sub-trees of the same depth merged up to n = 3: [NP][VP PP ADVP]
    ("(S (NP (DT a) (NN b)) (VP (VB c)) (PP (IN d)) (ADVP (RB e)))", "a b c d e", [2, 3]),
    # a word of 6 sub-words (longer than n = 3) is cut like any sub-tree, unlabeled outer brackets
    ("( (S (NP (NNP Supercalifragilistic)) (VP (VBZ is) (ADJP (JJ long)))))",
     "Super@@ cal@@ if@@ rag@@ il@@ istic is long", [3, 3, 2]),
    # PTB escapes match the raw brackets
    ("(S (NP (-LRB- -LRB-) (NN x) (-RRB- -RRB-)))", "( x )", [3]),
]


@pytest.mark.parametrize("tree,bpe,expected", CASES)
def test_hand_written_trees(tree, bpe, expected):
    assert phrase_lengths(tree, bpe) == expected


def test_long_sentence_uses_eight_token_phrases_from_the_right():
    words = [f"w{i}" for i in range(50)]  # 50 sub-words + </s> -> n = 8
    tree = "(S " + " ".join(f"(X {w})" for w in words) + ")"
    assert phrase_lengths(tree, " ".join(words)) == [2] + [8] * 6


@pytest.mark.parametrize("rounding,expected", [("ceil", [4] + [5] * 4), ("floor", [4] * 6)])
def test_size_limit_follows_the_rounding(rounding, expected):
    words = [f"w{i}" for i in range(24)]  # 24 sub-words + </s>: seql / 6 = 4.17 -> n = 5 (ceil) or 4 (floor)
    tree = "(S " + " ".join(f"(X {w})" for w in words) + ")"
    assert phrase_lengths(tree, " ".join(words), rounding) == expected


def test_every_sub_word_in_exactly_one_phrase_within_the_limit():
    words = "A man in a blue shirt is standing on a ladder cleaning windows .".split()
    tree = ("(ROOT (S (NP (NP (DT A) (NN man)) (PP (IN in) (NP (DT a) (JJ blue) (NN shirt)))) "
            "(VP (VBZ is) (VP (VBG standing) (PP (IN on) (NP (DT a) (NN ladder))) "
            "(S (VP (VBG cleaning) (NP (NNS windows)))))) (. .)))")
    assert tree_words(parse_tree(tree)) == words
    bpe = " ".join(words).replace("standing", "stand@@ ing").replace("windows", "win@@ dows")
    lengths = phrase_lengths(tree, bpe)
    assert sum(lengths) == len(bpe.split()) == 16
    assert max(lengths) <= 3  # 16 sub-words + </s> -> n = 3


@pytest.mark.parametrize("tree,bpe,message", [
    ("(S (NP x)", "x", "1 '(' not closed"),
    ("(S (NP x)))", "x", "')' after the tree was closed"),
    ("(S (NP x)) y", "x", "text after the end of the tree: 'y'"),
    ("S x", "x", "expected '(' at the start"),
    ("(S ())", "x", "node () has no children"),
    ("", "x", "empty line"),
    ("(S (NP y))", "x", "word 1 of the parse tree is 'y' but the BPE line has 'x'"),
    ("(S (NP x) (NP y))", "x", "the parse tree has 2 words but the BPE line has 1"),
    ("(S (NP x))", "x y@@ z", "has 1 words but the BPE line has 2; first extra BPE word 'y@@ z'"),
])
def test_bad_trees_are_rejected_with_what_did_not_match(tree, bpe, message):
    with pytest.raises(ParseError) as err:
        phrase_lengths(tree, bpe)
    assert message in str(err.value)


def test_span_file_checked_against_source_sizes(tmp_path):
    path = str(tmp_path / "spans")
    with open(path, "w") as f:
        f.write("2 3\n1\n")
    assert read_phrase_spans(path, [6, 2]) == [[2, 3], [1]]
    with pytest.raises(ValueError, match="line 2: the phrases cover 1 sub-words but source sentence 2 has 3"):
        read_phrase_spans(path, [6, 4])
    with pytest.raises(ValueError, match="2 lines but the binarized source has 3"):
        read_phrase_spans(path, [6, 2, 5])
    with open(path, "w") as f:
        f.write("2 x\n")
    with pytest.raises(ValueError, match="line 1: expected phrase lengths"):
        read_phrase_spans(path)


def flat_tree(tok_line):
    """A simple but real bracketing of a tokenized line: pairs of words under X, all under S."""
    esc = {"(": "-LRB-", ")": "-RRB-"}
    words = [esc.get(w, w) for w in tok_line.split()]
    pairs = [words[i:i + 2] for i in range(0, len(words), 2)]
    return "(ROOT (S " + " ".join("(X " + " ".join(f"(W {w})" for w in p) + ")" for p in pairs) + "))"


def write_trees(data, split, lang, path, corrupt_line=None):
    with open(os.path.join(data, "tok", f"{split}.{lang}"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    with open(path, "w", encoding="utf-8") as f:
        for i, line in enumerate(lines, start=1):
            f.write(("(S (X oops" if i == corrupt_line else flat_tree(line)) + "\n")


def test_parse_spans_command_and_training_with_parse_phrases(multi30k_slice, tmp_path, capsys):
    data = str(tmp_path / "data")
    os.makedirs(data)
    for name in os.listdir(multi30k_slice):  # a private view: the span files go here
        os.symlink(os.path.join(multi30k_slice, name), os.path.join(data, name))

    bad = str(tmp_path / "bad.parse")
    write_trees(data, "valid", "en", bad, corrupt_line=3)
    spans_cmd = ["fusion-parse-spans", "--data", data, "--split", "valid", "-s", "en", "-t", "de", "--parse", bad]
    proc = run_cli(spans_cmd + ["--fallback", "error"], check=False)
    expect(proc, proc.returncode != 0 and f"{bad} line 3: unbalanced brackets" in proc.stderr
           and not os.path.exists(span_path(data, "valid", "en", "de")),
           "--fallback error to refuse the bad tree, naming its line, and write no spans")
    # default: that line alone gets n-gram spans, reported with its number and counted
    proc = run_cli(spans_cmd)
    expect(proc, "1 of " in proc.stderr and f"{bad} line 3: unbalanced brackets" in proc.stderr
           and "1 sentences with n-gram spans" in proc.stdout, "the bad tree's line reported and counted as n-gram spans")
    with open(os.path.join(data, "tok", "valid.bpe.en")) as f:
        n_sub = len([next(f) for _ in range(3)][2].split())
    with open(span_path(data, "valid", "en", "de")) as f:
        third = [int(n) for n in f.read().splitlines()[2].split()]
    n = max(3, min(8, -(-(n_sub + 1) // 6)))  # footnote 2: ntok = max(min(8, ceil(seql / 6)), 3), seql with </s>
    assert third == [n] * (n_sub // n) + ([n_sub % n] if n_sub % n else [])
    os.remove(span_path(data, "valid", "en", "de"))
    # a file of trees for other text: most lines fall back, which is refused
    other = str(tmp_path / "other.parse")
    with open(os.path.join(data, "tok", "valid.bpe.en")) as f:
        n_lines = sum(1 for _ in f)
    with open(other, "w") as f:
        f.write("(S (X foo))\n" * n_lines)
    proc = run_cli(with_flag(spans_cmd, "--parse", other), check=False)
    expect(proc, proc.returncode != 0 and "more than --max-fallback 0.05" in proc.stderr
           and not os.path.exists(span_path(data, "valid", "en", "de")), "a refusal past --max-fallback 0.05, no spans")

    for split in ("train", "valid", "test"):
        trees = str(tmp_path / f"{split}.parse")
        write_trees(data, split, "en", trees)
        parse_spans.main(parse_spans_cli.get_parser().parse_args(
            ["--data", data, "--split", split, "-s", "en", "-t", "de", "--parse", trees]))
        assert "sub-words per phrase" in capsys.readouterr().out
    with open(span_path(data, "valid", "en", "de")) as f:
        first = [int(n) for n in f.readline().split()]
    with open(os.path.join(data, "tok", "valid.bpe.en")) as f:
        assert sum(first) == len(f.readline().split())

    save = str(tmp_path / "ckpt")
    args = train_args(data, save, arch="transformer_phrase", max_update=3,
                      extra=["--phrase-segmentation", "parse", "--task", "translation_with_phrases"])
    run_cli(args)
    gen = run_cli(["fairseq-generate", data, "--user-dir", PLUGIN_DIR,
                   "--task", "translation_with_phrases", "--path", os.path.join(save, "checkpoint_last.pt"),
                   "--gen-subset", "test", "--num-shards", "20", "--shard-id", "0", "--beam", "2", "--max-len-b", "5", "--batch-size", "16",
                   "--cpu", "--quiet"])
    expect(gen, "BLEU" in gen.stdout + gen.stderr, "fairseq-generate of the phrase model to print its BLEU")
