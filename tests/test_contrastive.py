"""Contrastive evaluation: suite readers, LingEval97's and ContraWSD's protocols, translate-then-check (MuCoW, ContraWSD WMT18)."""
import gzip
import json
import os

import pytest
import torch

from fairseq_fusion_tools import data_paths
from fairseq_fusion_tools.analysis import contrastive, contrastive_check, contrastive_translate
from fairseq_fusion_tools.analysis import contrastive_protocols as protocols

from conftest import run_cli

CONTRASTIVE = data_paths.data_path("contrastive", must_exist=False)
needs_data = pytest.mark.skipif(not os.path.isdir(CONTRASTIVE), reason="shared contrastive data not found")

# the example item of the LingEval97 README (rsennrich/lingeval97), typed by hand
README_ITEM = {
    "source": "Prague Stock Market falls to minus by the end of the trading day",
    "reference": "Die Prager Börse stürzt gegen Geschäftsschluss ins Minus.",
    "origin": "newstest2009.1",
    "errors": [
        {"type": "np_agreement", "contrastive": "Der Prager Börse stürzt gegen Geschäftsschluss ins Minus.",
         "distance": 2, "frequency": 2020},
        {"type": "polarity_particle_nicht_ins",
         "contrastive": "Die Prager Börse stürzt gegen Geschäftsschluss nicht ins Minus."},
        {"type": "subj_verb_agreement", "contrastive": "Die Prager Börse stürzen gegen Geschäftsschluss ins Minus.",
         "distance": 1, "frequency": 286},
    ],
}


def _write_suite(folder, src, good, bad):
    os.makedirs(folder, exist_ok=True)
    for name, lines in (("src.en", src), ("tgt.correct.de", good), ("tgt.incorrect.de", bad)):
        with gzip.open(os.path.join(folder, name + ".gz"), "wt", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)


def _write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return str(path)


def test_malformed_suites_are_rejected_with_line_numbers(tmp_path):
    folder = str(tmp_path / "agreement")
    _write_suite(folder, ["a", "b", "c"], ["x", "y", "z"], ["u", "v"])
    with pytest.raises(contrastive.SuiteFormatError, match=r"src\.en\.gz: line 3: no matching line in .*tgt\.incorrect\.de\.gz, which ends after 2 lines"):
        contrastive.read_line_aligned(folder, "en", "de")
    _write_suite(folder, ["a", "", "c"], ["x", "y", "z"], ["u", "v", "w"])
    with pytest.raises(contrastive.SuiteFormatError, match=r"src\.en\.gz: line 2: empty line"):
        contrastive.read_line_aligned(folder, "en", "de")

    entries = [{"source": "s1", "reference": "r1", "errors": [{"contrastive": "c1", "type": "word_sense"}]},
               {"source": "s2", "reference": "r2", "errors": [{"contrastive": "c2", "type": "word_sense"}]},
               {"source": "s3", "errors": [{"contrastive": "c3", "type": "word_sense"}]}]
    text = json.dumps(entries, indent=2)
    bad_line = text[: text.index('"s3"')].count("\n")  # the line of the third item's opening brace
    path = tmp_path / "suite.json"
    path.write_text(text)
    with pytest.raises(contrastive.SuiteFormatError, match=rf"suite\.json: line {bad_line}: item has no \(non-empty\) 'reference'"):
        contrastive.read_contrawsd_json(str(path))
    broken = text.replace('"r2",', '"r2"')  # JSON syntax error on the line after "r2"
    path.write_text(broken)
    syntax_line = broken[: broken.index('"r2"')].count("\n") + 2
    with pytest.raises(contrastive.SuiteFormatError, match=rf"line {syntax_line}, column \d+: invalid JSON"):
        contrastive.read_contrawsd_json(str(path))
    path.write_text(json.dumps([{"source": "s", "reference": "r", "errors": []}]))
    with pytest.raises(contrastive.SuiteFormatError, match="line 1: item has no list 'errors'"):
        contrastive.read_contrawsd_json(str(path))
    path.write_text(json.dumps([{"source": "s", "reference": "r", "errors": [{"contrastive": "c", "distance": "2"}]}]))
    with pytest.raises(contrastive.SuiteFormatError, match="line 1: an entry of 'errors' has a non-integer 'distance'"):
        contrastive.read_contrawsd_json(str(path))

    # MuCoW translation suite: a short key line, a key without a domain line
    mucow = tmp_path / "mucow"
    mucow.mkdir()
    _write(mucow / "en-de.text.txt", ["s1", "s2"])
    _write(mucow / "en-de.ref.txt", ["r1", "r2"])
    _write(mucow / "en-de.domain.txt", ["bank\tbank\tin\t1\t1"])
    _write(mucow / "en-de.key.txt", ["1\tted\tbank\tbank\tufer", "2\tted\tbank"])
    with pytest.raises(contrastive.SuiteFormatError, match=r"en-de\.key\.txt: line 2: expected 5 tab-separated fields"):
        contrastive_translate.read_mucow(str(mucow), "en-de")
    _write(mucow / "en-de.key.txt", ["1\tted\tbank\tbank\tufer", "2\tted\tbank\tbankhaus\tufer"])
    with pytest.raises(contrastive.SuiteFormatError, match=r"en-de\.key\.txt: line 2: \('bank', 'bankhaus'\) has no line in .*en-de\.domain\.txt"):
        contrastive_translate.read_mucow(str(mucow), "en-de")
    with pytest.raises(FileNotFoundError, match=r"no de-en\.text\.txt\[\.gz\] \(MuCoW suite pairs here: en-de\)"):
        contrastive_translate.read_mucow(str(mucow), "de-en")
    # a translation suite given to the scorer says where it belongs
    with pytest.raises(contrastive.SuiteFormatError, match="MuCoW translation test suite .*fusion-contrastive-translate"):
        contrastive.read_suite(str(mucow), "en", "de")
    # ContraWSD WMT18: doc_ids must carry the German line
    wsd = tmp_path / "wsd"
    wsd.mkdir()
    _write(wsd / "de-en.wsd.task.de", ["Der Absatz.", "Das Tor."])
    _write(wsd / "de-en.wsd.task.en.detok", ["The heel.", "The goal."])
    _write(wsd / "de-en.wsd.task.doc_ids.de", ["doc_a\tDer Absatz.", "doc_b\tDas Tor!"])
    with pytest.raises(contrastive.SuiteFormatError, match=r"doc_ids\.de: line 2: expected '<doc id><TAB><the German sentence"):
        contrastive_translate.read_contrawsd_wmt18(str(wsd))


@needs_data
def test_every_shared_suite_loads():
    """Every suite under shared/data/contrastive loads; counts are the data README's."""
    distil = {"subj_verb_agreement.mt": 6701, "np_agreement.mt": 10595, "polarity_particle_nicht_del.human": 2561,
              "polarity_particle_nicht_del.mt": 888, "polarity_particle_kein_del.human": 554,
              "polarity_particle_kein_del.mt": 201, "polarity_affix_del.human": 408, "polarity_affix_del.mt": 180,
              "clause_omission.human": 1104, "clause_omission.mt": 1025}
    folder = os.path.join(CONTRASTIVE, "distil_lingeval")
    assert sorted(os.listdir(folder)) == sorted(distil)
    for name, n in distil.items():
        path = os.path.join(folder, name)
        items = contrastive.read_suite(path, "en", "de")
        assert len(items) == n and items[0].category == name and items[0].types == [name]
        assert protocols.choose_protocol(items, "auto", path) == "lingeval97"

    mucow = os.path.join(CONTRASTIVE, "mucow", "scoring", "lv-en.mucow.scoring.json")
    items = contrastive.read_suite(mucow, "lv", "en")
    assert len(items) == 139 and sum(len(i.contrastive) for i in items) == 179
    assert items[0].word == "dāma" and items[0].category == "dāma:lady" and items[0].contrastive[0].startswith("There was a queen")
    assert protocols.choose_protocol(items, "auto", mucow) == "contrawsd"

    translation = os.path.join(CONTRASTIVE, "mucow", "translation")
    for pair, n, senses in (("de-en", 4268, 461), ("en-de", 3337, 362)):
        suite = contrastive_translate.read_translation_suite(translation, pair)
        assert len(suite.sources) == len(suite.references) == len(suite.keys) == n and len(suite.domains) == senses
    first = contrastive_translate.read_mucow(translation, "en-de").keys[0]
    assert first == ("34526532", "ted", "accelerator", ("gaspedal",), ("teilchenbeschleuniger", "beschleuniger"))
    with pytest.raises(contrastive.SuiteFormatError, match="de-en, en-de: choose one with --pair"):
        contrastive_translate.read_translation_suite(translation)

    wsd = os.path.join(CONTRASTIVE, "contrawsd_wmt18")
    suite = contrastive_translate.read_translation_suite(wsd)
    assert len(suite.sources) == len(suite.references) == len(suite.doc_ids) == 3249
    assert suite.doc_ids[0] == "doc_Books.de-en" and "Absatz" in suite.sources[0] and "heel" in suite.references[0]
    assert suite.key_path is None  # the shared copy has no sense key
    for path in (wsd, translation):
        with pytest.raises(contrastive.SuiteFormatError, match="translation test suite .*fusion-contrastive-translate"):
            contrastive.read_suite(path, "de", "en")


def _scores(table):
    """scores[(source, target)] = (sum, tokens) from {target: sum}, one token each."""
    return {(README_ITEM["source"], t): (v, 1) for t, v in table.items()}


def test_lingeval97_counts_each_error_type_on_the_readme_item(tmp_path):
    """On the README item with the reference preferred over 2 of its 3 variants: LingEval97 counts 2/3
    (1/1 np_agreement, 1/1 polarity_particle_nicht_ins, 0/1 subj_verb_agreement), ContraWSD's rule 0/1."""
    path = tmp_path / "lingeval97.json"
    path.write_text(json.dumps([README_ITEM], ensure_ascii=False, indent=2), encoding="utf-8")
    items = contrastive.read_suite(str(path), "en", "de")
    np_agr, polarity, agreement = (e["contrastive"] for e in README_ITEM["errors"])
    scores = _scores({README_ITEM["reference"]: -10.0, np_agr: -12.0, polarity: -11.0, agreement: -9.5})

    assert protocols.choose_protocol(items, "auto", str(path)) == "lingeval97"  # no "ambig word"
    le = protocols.evaluate(items, scores, "lingeval97")
    assert (le["overall"]["correct"], le["overall"]["total"]) == (2, 3)
    assert {k: (v["correct"], v["total"]) for k, v in le["by_category"].items()} == {
        "np_agreement": (1, 1), "polarity_particle_nicht_ins": (1, 1), "subj_verb_agreement": (0, 1)}
    # distances 2 and 1 (the polarity error has none); frequencies 2020 -> ">2k", 286 -> ">200"
    assert [(k, v["correct"], v["total"]) for k, v in le["by_distance"].items()] == [("1", 0, 1), ("2", 1, 1)]
    assert [(k, v["correct"], v["total"]) for k, v in le["by_frequency"].items()] == [(">2k", 1, 1), (">200", 0, 1)]

    cw = protocols.evaluate(items, scores, "contrawsd")
    assert (cw["overall"]["correct"], cw["overall"]["total"]) == (0, 1)

    only = protocols.evaluate(items, scores, "lingeval97", categories={"subj_verb_agreement"})
    assert (only["overall"]["correct"], only["overall"]["total"]) == (0, 1) and list(only["by_distance"]) == ["1"]
    # a tie is not a win (evaluate.py compares strictly)
    tie = protocols.evaluate(items, _scores({README_ITEM["reference"]: -10.0, np_agr: -10.0, polarity: -11.0,
                                             agreement: -11.0}), "lingeval97")
    assert le["by_category"]["np_agreement"]["correct"] == 1 and tie["by_category"]["np_agreement"]["correct"] == 0
    # mean per token: with 10 reference tokens the reference's -1.0 beats the agreement variant's -9.5
    per_token = dict(scores)
    per_token[(README_ITEM["source"], README_ITEM["reference"])] = (-10.0, 10)
    assert protocols.evaluate(items, per_token, "lingeval97", normalize=True)["overall"]["correct"] == 3


def test_distance_and_frequency_bins_are_lingeval97s():
    """Bins of lingeval97 evaluate.py: distances 0..15 each, the rest '>15'; its frequency table maps 5 to
    '>2' (overlapping ranges, the later wins) and values above 10000 to '>10k'. ContraWSD: 0-20, >20, ..."""
    assert [protocols.distance_bin(d) for d in (0, 1, 15, 16, 40, None)] == ["0", "1", "15", ">15", ">15", None]
    assert [protocols.frequency_bin(f) for f in (0, 1, 2, 3, 5, 6, 10, 11, 2020, 10000, 10001)] == \
        ["0", "1", "2", ">2", ">2", ">5", ">5", ">10", ">2k", ">5k", ">10k"]
    assert [protocols.frequency_bin(f, protocols.CONTRAWSD_FREQUENCY_BINS) for f in (0, 20, 21, 500, 501, 99999)] == \
        ["0-20", "0-20", ">20", ">200", ">500", ">10k"]
    # hand-made items: pairs at distances 1, 1, 3, 17, 40; the reference loses only the second pair at distance 1
    # and the pair at 40
    dist = [1, 1, 3, 17, 40]
    item = contrastive.Item("s", "r", [f"c{i}" for i in range(5)], "subj_verb_agreement", "x:1", distances=dist)
    table = {"r": -5.0, "c0": -6.0, "c1": -4.0, "c2": -7.0, "c3": -8.0, "c4": -1.0}
    res = protocols.lingeval97([item], lambda s, t: table[t])
    assert [(k, v["correct"], v["total"]) for k, v in res["by_distance"].items()] == [
        ("1", 1, 2), ("3", 1, 1), (">15", 1, 2)]
    assert res["overall"]["total"] == 5 and res["overall"]["correct"] == 3


def _mucow_suite(tmp_path):
    folder = tmp_path / "mucow"
    folder.mkdir()
    keys = ["1\tted\taccelerator\tgaspedal\tteilchenbeschleuniger beschleuniger",
            "2\tted\taccelerator\tgaspedal\tteilchenbeschleuniger beschleuniger",
            "3\tted\taccelerator\tgaspedal\tteilchenbeschleuniger beschleuniger",
            "4\tted\taccelerator\tgaspedal\tteilchenbeschleuniger beschleuniger",
            "5\teubooks\taccelerator\tteilchenbeschleuniger beschleuniger\tgaspedal",
            "6\teubooks\taccelerator\tteilchenbeschleuniger beschleuniger\tgaspedal"]
    _write(folder / "en-de.key.txt", keys)
    _write(folder / "en-de.domain.txt", ["accelerator\tgaspedal\tout\t3\t7",
                                         "accelerator\tteilchenbeschleuniger beschleuniger\tin\t5\t5"])
    _write(folder / "en-de.text.txt", [f"source {i}" for i in range(6)])
    _write(folder / "en-de.ref.txt", [f"reference {i}" for i in range(6)])
    hyps = ["Er trat aufs Gaspedal.",  # pos (tokens are lowercased)
            "Gaspedal oder Beschleuniger?",  # both found: neg (the authors' rule)
            "Er trat auf die Gaspedale.",  # no token matches; the lemma line has "gaspedal": pos
            "Er bremste.",  # unk
            "Der Teilchenbeschleuniger (Beschleuniger) läuft.",  # pos (Moses splits the brackets)
            "Das Gaspedal klemmt."]  # neg
    lemmas = ["er treten auf der gaspedal .", "x", "er treten auf der gaspedal .", "er bremsen .", "x", "x"]
    return str(folder), _write(tmp_path / "hyp.txt", hyps), _write(tmp_path / "lemmas.txt", lemmas)


def test_mucow_check_on_hand_written_translations(tmp_path):
    from fairseq_fusion_tools.analysis import contrastive_translate_command as command
    from fairseq_fusion_tools.cli import contrastive_translate as cli

    folder, hyp, lemmas = _mucow_suite(tmp_path)
    out = str(tmp_path / "mucow_out")
    args = cli.get_parser().parse_args(["--suite", folder, "--pair", "en-de", "--hyp", hyp, "--lemmas", lemmas, "--out", out])
    result = command.main(args)
    assert [r["decision"] for r in result["lines"]] == ["pos", "neg", "pos", "unk", "pos", "neg"]
    # out of domain (gaspedal): pos 2, neg 1, unk 1; in domain: pos 1, neg 1
    out_d, in_d, all_d = result["by_domain"]["out"], result["by_domain"]["in"], result["overall"]
    assert (out_d["pos"], out_d["neg"], out_d["unk"]) == (2, 1, 1) and (in_d["pos"], in_d["neg"], in_d["unk"]) == (1, 1, 0)
    assert out_d["coverage"] == pytest.approx(3 / 4) and out_d["precision"] == pytest.approx(2 / 3)
    assert out_d["recallA"] == pytest.approx(2 / 3) and out_d["recallB"] == pytest.approx(2 / 4)
    assert out_d["f1A"] == pytest.approx(2 / 3) and out_d["f1B"] == pytest.approx(4 / 7)
    assert all_d["precision"] == pytest.approx(3 / 5) and all_d["recallA"] == pytest.approx(3 / 4)
    assert all_d["recallB"] == pytest.approx(3 / 6) and all_d["f1A"] == pytest.approx(2 * 0.6 * 0.75 / 1.35)
    assert os.path.exists(out + ".png") and json.load(open(out + ".json"))["by_word"]["accelerator"]["total"] == 6
    # without lemmas, line 3 is unknown
    result = command.main(cli.get_parser().parse_args(["--suite", folder, "--pair", "en-de", "--hyp", hyp, "--out", out]))
    assert result["lines"][2]["decision"] == "unk" and result["by_domain"]["out"]["unk"] == 2
    with pytest.raises(SystemExit, match="--hyp .*: 2 lines, the suite has 6"):
        command.main(cli.get_parser().parse_args(["--suite", folder, "--pair", "en-de", "--hyp", _write(tmp_path / "short", ["a", "b"]), "--out", out]))


@needs_data
def test_mucow_references_match_their_own_keys():
    """The references were word-aligned to the key's senses, so every reference holds a key word (no unk); line 115
    of de-en holds both "arrangement" (correct) and "order" (other sense): neg under the authors' rule."""
    folder = os.path.join(CONTRASTIVE, "mucow", "translation")
    for pair in ("de-en", "en-de"):
        suite = contrastive_translate.read_mucow(folder, pair)
        result = contrastive_check.check_mucow(suite, suite.references)
        assert result["overall"]["unk"] == 0 and result["overall"]["coverage"] == 1.0
        if pair == "de-en":
            assert result["lines"][0]["decision"] == "pos" and result["lines"][114]["decision"] == "neg"
            assert "arrangement" in suite.references[114] and " order " in suite.references[114]


def test_contrawsd_check_on_hand_written_translations(tmp_path):
    from fairseq_fusion_tools.analysis import contrastive_translate_command as command
    from fairseq_fusion_tools.cli import contrastive_translate as cli

    folder = tmp_path / "wsd"
    folder.mkdir()
    de = ["Der Absatz bricht.", "Zwei Absätze: Absatz und Absatz.", "Das Tor fällt.", "Das Tor ist offen.", "Der Absatz."]
    _write(folder / "de-en.wsd.task.de", de)
    _write(folder / "de-en.wsd.task.en.detok", ["r"] * 5)
    _write(folder / "de-en.wsd.task.doc_ids.de", [f"doc_x\t{s}" for s in de])
    entry = lambda word, sense, occ, origin, f: {"ambig word": word, "sense": sense, "occurrence in source": occ,  # noqa: E731
                                                 "origin": origin, "frequency of sense/ambig word in wmt18": f}
    key = [entry("Absatz", "heel", 1, "Books", "30/500"),
           entry("Absatz", "heel", 2, "Books", "30/500"),
           entry("Tor|Tore", "goal|goals", 1, "newstest2012", "600/900"),
           entry("Tor|Tore", "door|gate", 1, "UN", "300/900"),
           entry("Absatz", "paragraph", 1, "EUbookshop", "470/500")]
    _write(folder / "key.json", [json.dumps(key)])
    hyps = ["The HEEL breaks.",  # only the correct sense: 1 of 1
            "Two heels: heels and a heel.",  # "heel" once as a whole word ("heels" is not "heel"); 2 in the source
            "The gate falls.",  # only the other sense of Tor: wrong
            "The door is a goal.",  # both senses: manual
            "The section."]  # nothing: unfound
    hyp = _write(tmp_path / "hyp.txt", hyps)
    out = str(tmp_path / "wsd_out")
    result = command.main(cli.get_parser().parse_args(["--suite", str(folder), "--hyp", hyp, "--key", str(folder / "key.json"), "--out", out]))
    heel, para = result["by_category"]["Absatz:heel"], result["by_category"]["Absatz:paragraph"]
    assert (heel["total"], heel["only_correct"], heel["unfound_in_correct"]) == (3, 2, 1)
    assert (para["total"], para["unfound"]) == (1, 1)
    goal, door = result["by_category"]["Tor|Tore:goal|goals"], result["by_category"]["Tor|Tore:door|gate"]
    assert (goal["total"], goal["only_other"]) == (1, 1) and (door["total"], door["found_both"]) == (1, 1)
    assert (result["overall"]["only_correct"], result["overall"]["total"]) == (2, 6)
    assert result["overall"]["accuracy"] == pytest.approx(2 / 6) and result["by_word"]["Absatz"]["accuracy"] == pytest.approx(2 / 4)
    assert [(k, v["total"]) for k, v in result["by_frequency"].items()] == [(">500", 1), (">200", 2), (">20", 3)]
    manual = json.load(open(out + ".manual.json"))
    assert [m["line"] for m in manual] == [4, 5] and manual[0]["found both"] is True
    # the authors' enhanced patterns (--sense-patterns) let "heels" count, and --ignore-wmt drops the newstest line
    patterns = _write(tmp_path / "patterns.json", [json.dumps({"heel": "heels?"})])
    result = command.main(cli.get_parser().parse_args(["--suite", str(folder), "--hyp", hyp, "--key", str(folder / "key.json"),
                                                   "--sense-patterns", patterns, "--ignore-wmt", "--out", out]))
    # line 2 now has 3 matches for 2 occurrences: credit 1, not 2 (evaluate.py)
    assert result["by_category"]["Absatz:heel"]["only_correct"] == 1 + 1
    assert "Tor|Tore:goal|goals" not in result["by_category"] and result["overall"]["total"] == 5


@needs_data
def test_contrawsd_wmt18_without_its_key_names_the_missing_file(tmp_path):
    from fairseq_fusion_tools.analysis import contrastive_translate_command as command
    from fairseq_fusion_tools.cli import contrastive_translate as cli

    hyp = _write(tmp_path / "hyp.txt", ["x"])
    args = cli.get_parser().parse_args(["--suite", os.path.join(CONTRASTIVE, "contrawsd_wmt18"), "--hyp", hyp, "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match=r"sense key de-en\.wsd\.task\.json .*give it with --key"):
        command.main(args)


def _encoder(multi30k_slice):
    """Moses tokens + BPE by hand (the training data's preprocessing)."""
    from sacremoses import MosesTokenizer
    from subword_nmt.apply_bpe import BPE

    with open(os.path.join(multi30k_slice, "bpe.codes"), encoding="utf-8") as f:
        bpe = BPE(f)
    tok = {lang: MosesTokenizer(lang=lang) for lang in ("en", "de")}
    return lambda text, lang: bpe.process_line(tok[lang].tokenize(text, escape=False, return_str=True, aggressive_dash_splits=True))


@needs_data
def test_contrastive_scores_are_the_models_log_probs(multi30k_slice, small_checkpoint, tmp_path):
    """Scores of fusion-contrastive-score equal sum_j log P(y_j | y_<j, x) computed here by hand; each suite
    is counted under its protocol (DistilLingEval: lingeval97 pairs; MuCoW scoring JSON: contrawsd items)."""
    from fairseq import checkpoint_utils

    from fairseq_fusion_tools.cli import contrastive_score as contrastive_score_cli

    from fairseq_fusion_tools.analysis import contrastive_score

    suite = os.path.join(CONTRASTIVE, "distil_lingeval", "polarity_affix_del.mt")
    mucow = os.path.join(CONTRASTIVE, "mucow", "scoring", "lv-en.mucow.scoring.json")
    out = str(tmp_path / "contrastive")
    args = contrastive_score_cli.get_parser().parse_args(
        ["--path", small_checkpoint, "--suite", suite, mucow, "--max-items", "12", "--out", out, "--cpu"])
    result = contrastive_score.main(args)
    le, cw = result["protocols"]["lingeval97"], result["protocols"]["contrawsd"]
    assert os.path.exists(out + ".png") and le["overall"]["total"] == 12 and cw["overall"]["total"] == 12
    assert set(le["by_category"]) == {"polarity_affix_del.mt"} and "dāma:lady" in cw["by_category"]

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([small_checkpoint])
    model = models[0].eval()
    encode_text = _encoder(multi30k_slice)

    def encode(text, lang, d):
        return torch.tensor([d.index(w) for w in encode_text(text, lang).split()] + [d.eos()])

    def log_prob(src, tgt):
        s, t = encode(src, "en", task.source_dictionary), encode(tgt, "de", task.target_dictionary)
        prev = torch.cat([t.new_tensor([task.target_dictionary.eos()]), t[:-1]])
        with torch.no_grad():
            logits = model(s[None], torch.tensor([len(s)]), prev[None])[0]
        return torch.log_softmax(logits.double(), -1)[0].gather(-1, t[:, None]).sum().item()

    for item, row in zip(contrastive.read_line_aligned(suite, "en", "de")[:12], le["pairs"]):
        ref, con = log_prob(item.source, item.reference), log_prob(item.source, item.contrastive[0])
        assert row["reference_score"] == pytest.approx(ref, abs=1e-3) and row["contrastive_score"] == pytest.approx(con, abs=1e-3)
        assert row["correct"] == (ref > con)
    for item, row in zip(contrastive.read_contrawsd_json(mucow)[:12], cw["items"]):
        ref = log_prob(item.source, item.reference)
        con = [log_prob(item.source, c) for c in item.contrastive]
        assert row["reference_score"] == pytest.approx(ref, abs=1e-3)
        assert row["contrastive_scores"] == pytest.approx(con, abs=1e-3)
        assert row["correct"] == all(ref > c for c in con)
    assert cw["overall"]["correct"] == sum(r["correct"] for r in cw["items"])
    # --category keeps only the named error types; an unknown one is refused with the known ones
    args = contrastive_score_cli.get_parser().parse_args(
        ["--path", small_checkpoint, "--suite", mucow, "--max-items", "12", "--category", "dāma", "--out", out, "--cpu"])
    only = contrastive_score.main(args)["protocols"]["contrawsd"]
    assert set(only["by_word"]) == {"dāma"} and only["overall"]["total"] == cw["by_word"]["dāma"]["total"]
    args.category = ["no_such_type"]
    with pytest.raises(SystemExit, match="--category no_such_type: not in the suites"):
        contrastive_score.main(args)


@needs_data
def test_translate_mode_equals_fairseq_interactive(multi30k_slice, small_checkpoint, tmp_path):
    """fusion-contrastive-translate's translations of MuCoW en-de sources are fairseq-interactive's (same beam),
    BPE removed and Moses-detokenized; the check then runs on them."""
    from sacremoses import MosesDetokenizer

    from fairseq_fusion_tools.analysis import contrastive_translate_command as command
    from fairseq_fusion_tools.cli import contrastive_translate as cli

    folder = os.path.join(CONTRASTIVE, "mucow", "translation")
    out = str(tmp_path / "mucow_tr")
    result = command.main(cli.get_parser().parse_args(
        ["--suite", folder, "--path", small_checkpoint, "--max-items", "5", "--beam", "2", "--max-len-b", "20",
         "--out", out, "--cpu"]))
    with open(out + ".hyp", encoding="utf-8") as f:
        hyps = [line.rstrip("\n") for line in f]
    assert result["pair"] == "en-de" and len(hyps) == 5 and result["overall"]["total"] == 5

    encode_text = _encoder(multi30k_slice)
    sources = contrastive_translate.read_mucow(folder, "en-de").sources[:5]
    inp = _write(tmp_path / "input.bpe", [encode_text(s, "en") for s in sources])
    proc = run_cli(["fairseq-interactive", multi30k_slice, "--path", small_checkpoint, "--input", inp, "--beam", "2",
                    "--max-len-b", "20", "--remove-bpe", "--cpu", "--buffer-size", "5", "--batch-size", "5", "-s", "en", "-t", "de",
                    "--user-dir", os.path.join(data_paths.REPO_ROOT, "fairseq_fusion")])
    found = {}
    for line in proc.stdout.splitlines():
        if line.startswith("H-"):
            sid, _, text = line[2:].split("\t")
            found[int(sid)] = text
    detok = MosesDetokenizer(lang="de")
    assert hyps == [detok.detokenize(found[i].split()) for i in range(5)]
    again = command.main(cli.get_parser().parse_args(["--suite", folder, "--pair", "en-de", "--hyp", out + ".hyp", "--max-items", "5", "--out", out + "2"]))
    assert [r["decision"] for r in again["lines"]] == [r["decision"] for r in result["lines"]]
