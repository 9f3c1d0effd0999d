"""Every arch through fairseq-interactive and the hub interface, parse-tree phrase models included
(their spans from a file of trees for the raw input), and the raw-input span source itself."""
import importlib.util
import json
import os

import pytest
import torch
from conftest import REPO, SMALL_MODEL_ARGS
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.trainer import Trainer

from fairseq_fusion import fusion_options
from fairseq_fusion.models import FusionTransformerModel
from fairseq_fusion.tasks.phrase_spans import InferenceSpans, TreeFile, ngram_spans

ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel)
PARSE = "transformer_phrase+parse"  # the +Parse model of Xu et al.: parse-tree phrases
CASES = ARCHS + [PARSE]
USER_DIR = os.path.join(REPO, "fairseq_fusion")
# raw sentences whose Moses tokenization is the tokenized test text of the slice (fusion-prepare-text: no escaping)
RAW = ["A man in an orange hat starring at something.", "A girl in karate uniform breaking a stick with a front kick."]
DECODE = {"beam": 2, "max_len_a": 0, "max_len_b": 5}


def flat_tree(words):
    """A real bracketing: pairs of words under X, all under S (as in test_phrase_parse_tree)."""
    pairs = [words[i:i + 2] for i in range(0, len(words), 2)]
    return "(ROOT (S " + " ".join("(X " + " ".join(f"(W {w})" for w in p) + ")" for p in pairs) + "))"


@pytest.fixture(scope="module")
def trees_file(multi30k_slice, tmp_path_factory):
    """Parse trees of the tokenized RAW sentences (the lines of the slice's tokenized test text)."""
    with open(os.path.join(multi30k_slice, "tok", "test.en"), encoding="utf-8") as f:
        tok = [line.split() for line in f.read().splitlines()]
    path = str(tmp_path_factory.mktemp("trees") / "input.parse")
    with open(path, "w") as f:
        for words in tok[:3]:  # RAW[0] is line 1, RAW[1] line 3
            f.write(flat_tree(words) + "\n")
    return path


class Checkpoints(dict):
    """case -> a tiny untrained checkpoint written by fairseq's Trainer, on first use (an xdist worker writes only
    the cases it runs)."""

    def __init__(self, write):
        super().__init__()
        self.write = write

    def __missing__(self, case):
        self[case] = self.write(case)
        return self[case]


@pytest.fixture(scope="module")
def checkpoints(multi30k_slice, tmp_path_factory):
    out = tmp_path_factory.mktemp("entry_ckpts")

    def write(case):
        arch = case.split("+")[0]
        extra = ["--task", "translation_with_phrases", "--phrase-segmentation", "parse"] if case == PARSE else []
        criterion = fusion_options.default_criterion(arch)
        smoothing = ["--label-smoothing", "0.1"] if "label_smoothed" in criterion else []
        args = options.parse_args_and_arch(options.get_training_parser(), [
            multi30k_slice, "-s", "en", "-t", "de", "--arch", arch, *SMALL_MODEL_ARGS, "--share-all-embeddings",
            "--criterion", criterion, *smoothing, "--optimizer", "adam", "--lr", "1e-3", "--cpu", "--seed", "1",
            "--user-dir", USER_DIR, *extra])
        cfg = convert_namespace_to_omegaconf(args)
        task = tasks.setup_task(cfg.task)
        torch.manual_seed(1)
        model = task.build_model(cfg.model)
        trainer = Trainer(cfg, task, model, task.build_criterion(cfg.criterion))
        path = str(out / f"{case}.pt")
        trainer.consolidate_optimizer()  # what checkpoint_utils.save_checkpoint does first
        trainer.save_checkpoint(path, {})
        return path

    return Checkpoints(write)


def interactive(data, ckpt, lines, tmp_path, extra=()):
    """fairseq-interactive (its main, in this process) on raw ``lines``: the detokenized hypotheses."""
    from fairseq import distributed_utils
    from fairseq_cli import interactive as fairseq_interactive

    inp = tmp_path / "input.txt"
    inp.write_text("\n".join(lines) + "\n")
    args = options.parse_args_and_arch(options.get_interactive_generation_parser(), [
        data, "--path", ckpt, "--user-dir", USER_DIR, "-s", "en", "-t", "de", "--tokenizer", "moses",
        "--moses-no-escape", "--bpe", "subword_nmt", "--bpe-codes", os.path.join(data, "bpe.codes"),
        "--beam", str(DECODE["beam"]), "--max-len-a", "0", "--max-len-b", str(DECODE["max_len_b"]), "--cpu",
        "--input", str(inp), "--buffer-size", "4", "--batch-size", "4", *extra])
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        distributed_utils.call_main(convert_namespace_to_omegaconf(args), fairseq_interactive.main)
    hyps = {}
    for line in buf.getvalue().splitlines():
        if line.startswith("D-"):
            idx, _, text = line.split("\t")
            hyps[int(idx[2:])] = text
    return [hyps[i] for i in range(len(lines))]


def hub(data, ckpt, **kwargs):
    return FusionTransformerModel.from_pretrained(
        os.path.dirname(ckpt), checkpoint_file=os.path.basename(ckpt), data_name_or_path=data, tokenizer="moses",
        moses_no_escape=True, bpe="subword_nmt", bpe_codes=os.path.join(data, "bpe.codes"), cpu=True, **kwargs)


@pytest.mark.parametrize("case", CASES)
def test_interactive_and_hub_translate_every_arch(case, checkpoints, multi30k_slice, trees_file, tmp_path):
    """fairseq-interactive and ``from_pretrained(...).translate`` on the same raw sentences with the same beam give
    the same translations (two of fairseq's inference paths through the model's incremental decoding)."""
    spans = (["--task", "translation_with_phrases", "--phrase-trees", trees_file, "--phrase-fallback", "error"]
             if case == PARSE else [])
    got = interactive(multi30k_slice, checkpoints[case], RAW, tmp_path, spans)
    model = hub(multi30k_slice, checkpoints[case], **({"phrase_trees": trees_file, "phrase_fallback": "error"}
                                                        if case == PARSE else {}))
    assert model.translate(RAW, **DECODE) == got
    assert all(isinstance(t, str) for t in got)


@pytest.fixture(scope="module")
def data_with_spans(multi30k_slice, tmp_path_factory):
    """A view of the slice with a span file for its test split (flat trees of the tokenized lines)."""
    from fairseq_fusion_tools.cli import parse_spans as parse_spans_cli
    from fairseq_fusion_tools.prepare import parse_spans

    from fairseq.data import data_utils, indexed_dataset

    data = tmp_path_factory.mktemp("data_spans")
    for name in os.listdir(multi30k_slice):
        if not name.startswith("test."):
            os.symlink(os.path.join(multi30k_slice, name), data / name)
    for lang in ("en", "de"):  # a test split of the slice's first 8 sentences
        prefix = os.path.join(multi30k_slice, f"test.en-de.{lang}")
        full = data_utils.load_indexed_dataset(prefix, None)
        builder = indexed_dataset.make_builder(str(data / f"test.en-de.{lang}.bin"), impl="mmap", vocab_size=10 ** 5)
        for i in range(8):
            builder.add_item(full[i])
        builder.finalize(str(data / f"test.en-de.{lang}.idx"))
    with open(os.path.join(multi30k_slice, "tok", "test.en"), encoding="utf-8") as f:
        trees = [flat_tree(line.split()) for line in f.read().splitlines()[:8]]
    with open(os.path.join(multi30k_slice, "tok", "test.bpe.en"), encoding="utf-8") as f:
        (data / "test.bpe.en").write_text("".join(f.readlines()[:8]))
    (data / "test.parse").write_text("\n".join(trees) + "\n")
    parse_spans.main(parse_spans_cli.get_parser().parse_args(
        ["--data", str(data), "--split", "test", "-s", "en", "-t", "de", "--parse", str(data / "test.parse"),
         "--bpe", str(data / "test.bpe.en")]))
    return str(data)


@pytest.mark.parametrize("case", CASES)
def test_generate_score_reference_every_arch(case, checkpoints, data_with_spans):
    """fairseq-generate --score-reference (its main, in this process): a finite score for every reference."""
    import contextlib
    import io
    import math

    from fairseq import distributed_utils
    from fairseq_cli import generate

    task = ["--task", "translation_with_phrases"] if case == PARSE else []
    args = options.parse_args_and_arch(options.get_generation_parser(), [
        data_with_spans, "--path", checkpoints[case], "--user-dir", USER_DIR, "-s", "en", "-t", "de", *task,
        "--score-reference", "--gen-subset", "test", "--batch-size", "8", "--cpu",
        # no loader worker: a finished generate's iterator is freed by the garbage collector in the next test, and
        # torch then waits 5 s (its MP_STATUS_CHECK_INTERVAL) for a worker of fairseq's persistent loader to join
        "--num-workers", "0"])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        distributed_utils.call_main(convert_namespace_to_omegaconf(args), generate.main)
    scores = [float(line.split("\t")[1]) for line in buf.getvalue().splitlines() if line.startswith("H-")]
    assert len(scores) == 8 and all(math.isfinite(x) and x < 0 for x in scores)


def test_parse_model_without_spans_says_what_to_give(checkpoints, multi30k_slice, tmp_path):
    with pytest.raises(ValueError, match="--phrase-trees FILE .* or --phrase-parser stanza"):
        interactive(multi30k_slice, checkpoints[PARSE], RAW[:1], tmp_path, ["--task", "translation_with_phrases"])
    with pytest.raises(ValueError, match="phrase spans of raw input are for parse-tree phrase models"):
        hub(multi30k_slice, checkpoints["transformer_phrase"], phrase_trees="x.parse")


def test_parse_model_spans_change_the_translation_scores(checkpoints, multi30k_slice, trees_file, tmp_path):
    """The spans reach the model: other trees of the same words give other scores (the untrained model's phrase
    representations differ), and a sentence without a tree falls back to n-gram spans, counted."""
    model = hub(multi30k_slice, checkpoints[PARSE], phrase_trees=trees_file)
    with open(trees_file) as f:
        first = f.readline().split("(W ")
    words = [w.split(")")[0] for w in first[1:]]
    other = str(tmp_path / "other.parse")
    with open(other, "w") as f:  # every word its own phrase under S: other spans than pairs
        f.write("(ROOT (S " + " ".join(f"(X {w})" for w in words) + "))\n")
    model_other = hub(multi30k_slice, checkpoints[PARSE], phrase_trees=other)
    score = lambda m: m.generate([m.encode(RAW[0])], beam=1, max_len_a=0, max_len_b=3)[0][0]["score"].item()  # noqa: E731
    assert score(model) != score(model_other)
    spans = model.task.inference_spans()
    assert spans.fallbacks == 0
    model.translate("Two dogs play .", beam=1, max_len_b=2)  # no tree: n-gram spans, with a warning
    assert spans.fallbacks == 1


def test_contrastive_scoring_with_parse_tree_phrases(checkpoints, multi30k_slice, trees_file, tmp_path):
    from fairseq_fusion_tools.cli import contrastive_score as contrastive_score_cli
    from fairseq_fusion_tools.analysis import contrastive_score

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "src.en").write_text("\n".join(RAW) + "\n")
    (suite / "tgt.correct.de").write_text("Ein Mann .\nEin Mädchen .\n")
    (suite / "tgt.incorrect.de").write_text("Eine Mann .\nEin Mädchens .\n")
    out = str(tmp_path / "contrastive")
    args = contrastive_score_cli.get_parser().parse_args([
        "--path", checkpoints[PARSE], "--data", multi30k_slice, "--suite", str(suite), "--out", out, "--cpu",
        "--phrase-trees", trees_file, "--phrase-fallback", "error"])
    contrastive_score.main(args)
    with open(out + ".json") as f:
        result = json.load(f)
    assert result["pairs_scored"] == 4  # 2 items: reference and contrastive of each
    args.phrase_trees, args.phrase_fallback = None, None
    with pytest.raises(ValueError, match="--phrase-trees FILE"):
        contrastive_score.main(args)


# ------------------------------------------------------------------ the raw-input span source

def test_tree_file_lookup_by_words_with_unknown_words_and_ptb_escapes(tmp_path):
    path = tmp_path / "t.parse"
    path.write_text("(ROOT (S (NP (DT the) (NN dog)) (VP (VBZ barks))))\n\n(S (X -LRB-) (Y a) (Z -RRB-))\n")
    trees = TreeFile(str(path))
    assert trees.lookup(["the", "dog", "barks"]).startswith("(ROOT")
    assert trees.lookup(["the", "<unk>", "barks"]).startswith("(ROOT")  # an out-of-vocabulary word matches any
    assert trees.lookup(["(", "a", ")"]).startswith("(S (X -LRB-)")
    assert trees.lookup(["the", "cat", "barks"]) is None
    path.write_text("(S (X a)\n")
    with pytest.raises(ValueError, match="--phrase-trees .* line 1"):
        TreeFile(str(path))


def test_inference_spans_from_a_tree_and_the_ngram_fallback(tmp_path):
    path = tmp_path / "t.parse"
    path.write_text("(ROOT (S (NP (DT the) (NN dog)) (VP (VBZ barks))))\n")
    spans = InferenceSpans(trees=str(path))
    # 5 sub-words, seql 6: n = max(min(8, ceil(6 / 6)), 3) = 3; Algorithm 1 from the right: VP (2 sub-words), then
    # NP (3) -- the two do not fit together in 3 -- so [3, 2] left to right
    assert spans(["the do@@ g bar@@ ks"]) == [[3, 2]]
    # no tree: 6 sub-words, seql 7, n = 3: [3, 3]
    assert spans(["x y z w v u"]) == [[3, 3]] and spans.fallbacks == 1 and spans.sentences == 2
    assert ngram_spans(7) == [3, 3, 1] and ngram_spans(20) == [4] * 5  # seql 21: ceil(21 / 6) = 4
    with pytest.raises(ValueError, match="no usable parse tree .*--phrase-fallback ngram"):
        InferenceSpans(trees=str(path), fallback="error")(["x y"])


def test_parse_trees_command_with_a_parser_and_failed_lines(tmp_path, capsys):
    """fusion-parse-trees with a stand-in for stanza's pipeline (its model cannot be downloaded here): trees in
    line order, an empty line where the parser fails, counted; fusion-parse-spans then falls back on those lines."""
    from fairseq_fusion_tools.cli import parse_trees as parse_trees_cli
    from fairseq_fusion_tools.prepare import parse_trees

    class StandIn:
        def parse(self, sentences):
            return [None if "FAIL" in words else flat_tree(words) for words in sentences]

    inp = tmp_path / "tok.en"
    inp.write_text("a b c\nFAIL here\n\nd e\n")
    out = tmp_path / "trees"
    args = parse_trees_cli.get_parser().parse_args(["--input", str(inp), "--output", str(out), "--lang", "en",
                                                "--batch-size", "3"])
    parse_trees.main(args, parser=StandIn())
    assert out.read_text().splitlines() == [flat_tree(["a", "b", "c"]), "", "", flat_tree(["d", "e"])]
    assert "2 parsed, 2 not parsed (lines 2, 3" in capsys.readouterr().out


def test_stanza_parser_missing_is_a_clear_error():
    if importlib.util.find_spec("stanza") is not None:
        pytest.skip("stanza is installed")
    from fairseq_fusion.tasks.phrase_spans import StanzaParser
    with pytest.raises(ImportError, match="pip install"):
        StanzaParser("en")
