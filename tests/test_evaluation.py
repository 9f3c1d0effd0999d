"""Evaluation tools: BLEU as the papers report it, BLEU by length, significance (contrastive scoring: test_contrastive.py)."""
import argparse
import json
import math
import os
import subprocess
import sys
from collections import Counter

import pytest

from fairseq_fusion_tools import data_paths
from fairseq_fusion_tools.scoring import evaluation

from conftest import BIN

WMT14 = data_paths.data_path("wmt14", must_exist=False)
SYSTEM = os.path.join(WMT14, "system_outputs", "sennrich2016.newstest2014.de.tok.gz")
REF = os.path.join(WMT14, "newstest2014.de")
SRC = os.path.join(WMT14, "newstest2014.en")
needs_wmt14 = pytest.mark.skipif(not os.path.exists(SYSTEM), reason="shared wmt14 data not found")


def sacrebleu_cli(ref, hyp, *extra):
    proc = subprocess.run([os.path.join(BIN, "sacrebleu"), ref, "-i", *hyp, "-w", "4", *extra],
                          capture_output=True, text=True, check=True)
    return proc.stdout


def multi_bleu(hyps, refs):
    """multi-bleu.perl on token lists, written out here independently of sacreBLEU."""
    match, total, hyp_len, ref_len = [0] * 4, [0] * 4, 0, 0
    for h, r in zip(hyps, refs):
        h, r = h.split(), r.split()
        hyp_len, ref_len = hyp_len + len(h), ref_len + len(r)
        for n in range(1, 5):
            hc = Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
            rc = Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
            match[n - 1] += sum(min(c, rc[g]) for g, c in hc.items())
            total[n - 1] += max(len(h) - n + 1, 0)
    log_p = sum(math.log(m / t) for m, t in zip(match, total)) / 4
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return 100 * bp * math.exp(log_p)


@needs_wmt14
def test_newstest2014_detok_bleu_equals_sacrebleu_cli(tmp_path):
    from fairseq_fusion_tools.cli import score_bleu as score_bleu_cli
    from fairseq_fusion_tools.scoring import score_bleu

    out = str(tmp_path / "nt14")
    args = score_bleu_cli.get_parser().parse_args(["--hyp", SYSTEM, "--hyp-format", "tok", "--ref", REF, "-t", "de", "--out", out])
    result = score_bleu.main(args)
    direct = float(sacrebleu_cli(REF, [out + ".detok"], "-b").strip())
    assert result["sacrebleu"]["score"] == pytest.approx(direct, abs=1e-4)
    assert "tok:13a" in result["sacrebleu"]["signature"] and result["sentences"] == 3003
    # pinned: the shared system output (Sennrich et al. 2016's WMT16 system) scores 25.36 detokenized (13a) and
    # 25.92 tokenized with compound splitting, the figures the recipes' documentation reports
    assert result["sacrebleu"]["score"] == pytest.approx(25.36, abs=0.005)
    assert result["tokenized_bleu"]["score"] == pytest.approx(25.92, abs=0.005)
    # tokenized BLEU: Moses tokens of both sides, compounds split, multi-bleu's formula
    with open(out + ".detok", encoding="utf-8") as f:
        detok = [line.rstrip("\n") for line in f]
    ref = evaluation.read_lines(REF)
    hyp_tok = [evaluation.compound_split(h) for h in evaluation.tokenize_for_bleu(detok, "de", "none")]
    ref_tok = [evaluation.compound_split(r) for r in evaluation.tokenize_for_bleu(ref, "de", "none")]
    assert result["tokenized_bleu"]["score"] == pytest.approx(multi_bleu(hyp_tok, ref_tok), abs=1e-6)


def test_chinese_detok_bleu_uses_sacrebleus_zh_tokenizer(tmp_path):
    """-t zh: detokenized BLEU with sacreBLEU's zh tokenizer, as `sacrebleu -tok zh` (here on the 450
    Chinese sentences of the zhen gold set, against a copy with one character dropped from the middle of
    every third line); 13a scores the unsegmented Chinese as a few long tokens: 87.5 where zh gives 98.0."""
    from fairseq_fusion_tools.cli import score_bleu as score_bleu_cli
    from fairseq_fusion_tools.scoring import score_bleu

    path = os.path.join(data_paths.data_path("alignment"), "zhen", "test.zh-en")
    with open(path, encoding="utf-8") as f:
        refs = [line.split("|||")[0].replace(" ", "") for line in f]
    hyps = [r[: len(r) // 2] + r[len(r) // 2 + 1:] if i % 3 == 0 else r for i, r in enumerate(refs)]
    ref_path, hyp_path = tmp_path / "ref.zh", tmp_path / "hyp.zh"
    ref_path.write_text("\n".join(refs) + "\n", encoding="utf-8")
    hyp_path.write_text("\n".join(hyps) + "\n", encoding="utf-8")
    args = score_bleu_cli.get_parser().parse_args(["--hyp", str(hyp_path), "--hyp-format", "detok", "--ref", str(ref_path),
                                               "-t", "zh", "--detok-only"])
    result = score_bleu.main(args)
    zh = float(sacrebleu_cli(str(ref_path), [str(hyp_path)], "-tok", "zh", "-b").strip())
    t13a = float(sacrebleu_cli(str(ref_path), [str(hyp_path)], "-tok", "13a", "-b").strip())
    assert len(refs) == 450 and "tok:zh" in result["sacrebleu"]["signature"]
    assert result["sacrebleu"]["score"] == pytest.approx(zh, abs=1e-4) == pytest.approx(98.04, abs=0.01)
    assert t13a == pytest.approx(87.55, abs=0.01)
    with pytest.raises(ValueError, match="ja-mecab"):
        try:
            import MeCab  # noqa: F401
            pytest.skip("MeCab is installed: ja-mecab works")
        except ImportError:
            evaluation.sacrebleu_tokenizer("ja")


def test_compound_and_character_splitting():
    assert evaluation.compound_split("die Rathaus-Ampel und B-33-Straße") == "die Rathaus ##AT##-##AT## Ampel und B ##AT##-##AT## 33 ##AT##-##AT## Straße"
    assert evaluation.compound_split("a - b") == "a - b"
    assert evaluation.char_split("我们 是 学生 , OK 2020") == "我 们 是 学 生 , OK 2020"
    assert evaluation.bleu_split("fr") == "compound" and evaluation.bleu_split("zh") == "chars" and evaluation.bleu_split("en") == "none"


def test_generate_output_reader(tmp_path):
    log = tmp_path / "gen.txt"
    log.write_text("S-1\tb\nH-1\t-0.5\tzwei Hun@@ de\nS-0\ta\nH-0\t-0.1\tein Hund\nT-0\tein Hund\nGenerate test ...\n")
    out = evaluation.read_generate_output(str(log))
    assert out["H"] == ["ein Hund", "zwei Hunde"] and out["S"] == ["a", "b"]
    log.write_text("H-0\t-0.1\tein\nH-2\t-0.1\tzwei\n")
    with pytest.raises(ValueError, match=r"sentences \[1\] are missing"):
        evaluation.read_generate_output(str(log))


@needs_wmt14
def test_bleu_by_length_and_significance_equal_direct_computation(tmp_path):
    from fairseq_fusion_tools.cli import significance as significance_cli
    from fairseq_fusion_tools.scoring import significance
    from fairseq_fusion_tools.cli import bleu_by_length as bleu_by_length_cli
    from fairseq_fusion_tools.scoring import bleu_by_length

    n = 600
    src = evaluation.read_lines(SRC)[:n]
    ref = evaluation.read_lines(REF)[:n]
    hyp = evaluation.detokenize(evaluation.read_lines(SYSTEM)[:n], "de")
    worse = [" ".join(h.split()[: len(h.split()) // 2]) if i % 2 else h for i, h in enumerate(hyp)]  # half sentences cut
    files = {}
    for name, lines in (("src", src), ("ref", ref), ("sys", hyp), ("worse", worse)):
        files[name] = str(tmp_path / name)
        with open(files[name], "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)

    out = str(tmp_path / "bylen")
    res = bleu_by_length.main(bleu_by_length_cli.get_parser().parse_args(
        ["--src", files["src"], "--ref", files["ref"], "--sys", f"edinburgh={files['sys']}", f"worse={files['worse']}", "--out", out]))
    assert os.path.exists(out + ".png") and json.load(open(out + ".json"))["buckets"] == ["(0,15]", "(15,30]", "(30,45]", ">45"]
    import sacrebleu

    for k, (lo, hi) in enumerate([(0, 15), (15, 30), (30, 45), (45, 10 ** 9)]):
        idx = [i for i, s in enumerate(src) if lo < len(s.split()) <= hi]
        assert res["sentences"][k] == len(idx)
        direct = sacrebleu.corpus_bleu([hyp[i] for i in idx], [[ref[i] for i in idx]]).score
        assert res["bleu"]["edinburgh"][k] == pytest.approx(direct, abs=1e-9)
    assert res["overall"]["edinburgh"] > res["overall"]["worse"]

    os.environ.pop("SACREBLEU_SEED", None)
    sig = significance.main(significance_cli.get_parser().parse_args(
        ["--ref", files["ref"], "--baseline", f"worse={files['worse']}", "--sys", f"edinburgh={files['sys']}", "--n-samples", "200"]))
    cli = json.loads(sacrebleu_cli(files["ref"], [files["worse"], files["sys"]], "--paired-bs", "--paired-bs-n", "200", "-f", "json"))
    cli_sys = [s for s in cli if s["system"].endswith(files["sys"]) and not s["system"].startswith("Baseline")][0]
    ours = sig["systems"][1]
    assert ours["bleu"] == pytest.approx(cli_sys["BLEU"]["score"], abs=1e-3)
    assert ours["p_value"] == pytest.approx(cli_sys["BLEU"]["p_value"], abs=1e-4)
    assert ours["p_value"] < 0.05


def test_paired_bootstrap_reports_a_copy_of_the_baseline_as_the_same_output(tmp_path):
    """sacreBLEU counts resampled differences strictly above the observed one: a copy of the baseline gets its
    smallest p, 1/(n+1), "significant" (its command line, run here). Such a system is the same output, not tested."""
    from fairseq_fusion_tools.cli import significance as significance_cli
    from fairseq_fusion_tools.scoring import significance

    refs = ["the cat sat on the mat .", "a dog ran in the park today .", "we like green tea a lot .", "it rained ."]
    base = ["the cat sat on a mat .", "a dog ran in park today .", "we like tea a lot .", "it rained all day ."]
    other = ["the cat sat on the mat .", "a dog ran in park today .", "we like tea .", "it rained ."]
    files = {}
    for name, lines in (("ref", refs), ("base", base), ("copy", list(base)), ("other", other)):
        files[name] = str(tmp_path / name)
        with open(files[name], "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
    cli = json.loads(sacrebleu_cli(files["ref"], [files["base"], files["copy"]], "--paired-bs", "--paired-bs-n", "99", "-f", "json"))
    assert cli[1]["BLEU"]["p_value"] == pytest.approx(1 / 100)
    os.environ.pop("SACREBLEU_SEED", None)
    sig = significance.main(significance_cli.get_parser().parse_args(
        ["--ref", files["ref"], "--baseline", f"base={files['base']}", "--sys", f"copy={files['copy']}",
         f"other={files['other']}", "--n-samples", "99"]))
    copy, oth = sig["systems"][1], sig["systems"][2]
    assert (copy["same_output"], copy["p_value"]) == (True, None)
    assert oth["same_output"] is False and oth["p_value"] is not None


def test_sign_test_counts_sentence_swaps_and_binomial_p(tmp_path):
    """Collins et al. 2005: + / - / tie per sentence from corpus BLEU with one sentence swapped in,
    recomputed here with sacrebleu.corpus_bleu on each swapped corpus; p by the binomial formula."""
    import sacrebleu

    refs = ["the cat sat on the mat .", "a dog ran in the park today .", "we like green tea a lot .",
            "it rained all day long here .", "she reads a long book now .", "they play music every night ."]
    base = ["the cat sat on a mat .", "a dog ran in park today .", "we like tea a lot .",
            "it rained all day long here .", "she reads long book now .", "they play music every day ."]
    system = ["the cat sat on the mat .", "a dog ran in the park today .", "we like green tea a lot .",
              "it rained all day long here .", "she reads book now .", "they play every night ."]
    result = evaluation.sign_test(refs, base, {"sys": system})
    base_bleu = sacrebleu.corpus_bleu(base, [refs]).score
    signs = []
    for i in range(len(refs)):
        swapped = sacrebleu.corpus_bleu(base[:i] + [system[i]] + base[i + 1:], [refs]).score
        signs.append((swapped > base_bleu) - (swapped < base_bleu))
    plus, minus = signs.count(1), signs.count(-1)
    assert (plus, minus) == (3, 2)  # sentences 1-3 better, 5-6 worse, 4 the same
    r = result["systems"][0]
    assert (r["better"], r["worse"], r["ties"]) == (plus, minus, 1)
    assert r["p_value"] == pytest.approx(2 * (math.comb(5, 3) + math.comb(5, 4) + math.comb(5, 5)) / 2 ** 5)  # = 1.0
    lopsided = evaluation.sign_test(refs * 2, base * 2, {"sys": refs * 2})["systems"][0]
    assert (lopsided["better"], lopsided["ties"]) == (10, 2)
    assert lopsided["p_value"] == pytest.approx(2 / 2 ** 10)
