"""Input that would translate into a made-up or wrong output is said in one warning line per kind, from
fairseq-interactive, fairseq-generate and the hub: a language direction other than the checkpoint's, empty lines
(whose output is left empty, one output per input line as before), lines that are not UTF-8, raw text whose words
the dictionary mostly lacks. An over-long line is refused with its input line number. fusion-score-bleu warns when
-t disagrees with the text's language. Counts and line numbers are computed here from the input itself."""
import gzip
import os
import warnings

import pytest
import torch

from conftest import REPO, run_cli
from fairseq_fusion.errors import WARNING_PREFIX, FusionWarning
from fairseq_fusion_tools import data_paths
from test_refusals import one_line_refusal

USER_DIR = os.path.join(REPO, "fairseq_fusion")
DECODE = ["--cpu", "--beam", "2", "--max-len-b", "5"]
CLEAN = ["A dog runs through the grass.", "Two men are walking down the street.", "A girl plays in the snow."]
# whole words the 500-merge BPE vocabulary of the slice mostly lacks: raw text without --bpe prepared
RAW = ["Several construction workers repairing scaffolding outside.", "Bicyclists photographing waterfalls."]


def warning_lines(stderr):
    return [line[len(WARNING_PREFIX):] for line in stderr.splitlines() if line.startswith(WARNING_PREFIX)]


def outputs(stdout, kind):
    """{input index: text} of fairseq's ``KIND-i<TAB>...<TAB>text`` lines."""
    return {int(line.split("\t")[0][2:]): line.split("\t")[-1] for line in stdout.splitlines()
            if line.startswith(kind + "-")}


def numbered(noun, numbers):
    return f"{noun}{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}"


def empty_warning(what, noun, numbers, total):
    n = len(numbers)
    return (f"{n} of {total} {what} {'was' if n == 1 else 'were'} empty ({numbered(noun, numbers)}): "
            f"{'its translation is' if n == 1 else 'their translations are'} left empty")


def interactive(data, checkpoint, tmp_path, lines, *extra):
    """fairseq-interactive with ``lines`` (bytes) as its standard input."""
    stdin = tmp_path / "stdin.txt"
    stdin.write_bytes(b"".join(line + b"\n" for line in lines))
    return run_cli(["fairseq-interactive", data, "--user-dir", USER_DIR, "--path", checkpoint, *DECODE, *extra],
                   stdin=str(stdin), check=False)


def test_interactive_clean_input_gives_no_warning(multi30k_slice, tiny_checkpoint, tmp_path):
    proc = interactive(multi30k_slice, tiny_checkpoint, tmp_path, [s.encode() for s in CLEAN], "--bpe", "prepared")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(outputs(proc.stdout, "H")) == list(range(len(CLEAN)))
    assert warning_lines(proc.stderr) == []


@pytest.mark.parametrize("buffer_size", ["1", "4"])
def test_interactive_empty_and_non_utf8_lines_warn_once_each_with_their_numbers(multi30k_slice, tiny_checkpoint,
                                                                                tmp_path, buffer_size):
    lines = [CLEAN[0].encode(), b"", "Zwei Männer".encode("latin-1"), CLEAN[1].encode(), b"   ", b"\xff\xfe",
             CLEAN[2].encode()]
    proc = interactive(multi30k_slice, tiny_checkpoint, tmp_path, lines, "--bpe", "prepared",
                       "--buffer-size", buffer_size, "--batch-size", buffer_size)
    assert proc.returncode == 0, proc.stderr[-3000:]
    empty = [i + 1 for i, line in enumerate(lines) if not line.strip()]
    not_utf8 = []
    for i, line in enumerate(lines):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            not_utf8.append(i + 1)
    assert empty == [2, 5] and not_utf8 == [3, 6]
    assert warning_lines(proc.stderr) == [
        empty_warning("input lines", "line", empty, len(lines)),
        f"{len(not_utf8)} of {len(lines)} input lines are not valid UTF-8 ({numbered('line', not_utf8)}): the bytes "
        "that are not became words the dictionary does not know (<unk>)",
    ]
    hyps, detoks = outputs(proc.stdout, "H"), outputs(proc.stdout, "D")
    assert sorted(hyps) == sorted(detoks) == list(range(len(lines)))  # one output per input line
    for number in empty:
        assert hyps[number - 1] == detoks[number - 1] == ""
    assert all(hyps[i] for i in range(len(lines)) if i + 1 not in empty)


def unknown_words(data, lines, lang="en"):
    """(unknown, words): whitespace tokens of ``lines`` (fairseq's dictionary splits so without --bpe) that are not
    symbols of the folder's dict.LANG.txt."""
    with open(os.path.join(data, f"dict.{lang}.txt"), encoding="utf-8") as f:
        known = {line.split()[0] for line in f}
    words = [w for line in lines for w in line.split()]
    return sum(w not in known for w in words), len(words)


def unknown_warning(data, lines, flag, lang="en"):
    unknown, words = unknown_words(data, lines, lang)
    assert 2 * unknown > words  # the case: most words unknown
    return (f"{unknown} of {words} source words ({100 * unknown // words}%) are not in "
            f"{os.path.join(data, f'dict.{lang}.txt')}, so the model read them as <unk>: "
            f"{os.path.join(data, 'prepare.json')} holds the pipeline the data folder was prepared with "
            f"(fusion-prepare-text): {flag} applies it to raw text")


def test_interactive_raw_text_without_bpe_prepared_names_the_folders_pipeline(multi30k_slice, tiny_checkpoint,
                                                                              tmp_path):
    proc = interactive(multi30k_slice, tiny_checkpoint, tmp_path, [s.encode() for s in RAW])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert warning_lines(proc.stderr) == [unknown_warning(multi30k_slice, RAW, "--bpe prepared")]
    assert sorted(outputs(proc.stdout, "H")) == list(range(len(RAW)))
    proc = interactive(multi30k_slice, tiny_checkpoint, tmp_path, [s.encode() for s in RAW], "--bpe", "prepared")
    assert warning_lines(proc.stderr) == []  # the same text through the folder's pipeline: known subwords


@pytest.fixture(scope="module")
def unrecorded_checkpoint(tiny_checkpoint, tmp_path_factory):
    """The tiny checkpoint as checkpoints saved before the plugin recorded the languages: -s/-t not in its config,
    its direction only in its data folder's file names."""
    state = torch.load(tiny_checkpoint, weights_only=False)
    state["cfg"]["task"]["source_lang"] = state["cfg"]["task"]["target_lang"] = None
    path = str(tmp_path_factory.mktemp("unrecorded") / "checkpoint.pt")
    torch.save(state, path)
    return path


def direction_warning(path, trained=("en", "de"), given=("de", "en")):
    return (f"checkpoint {path} was trained to translate {trained[0]} into {trained[1]}, but the languages given "
            f"(-s/-t, source_lang/target_lang, or the data folder's) are {given[0]} into {given[1]}: the model reads "
            f"its input as {trained[0]} and writes {trained[1]}")


@pytest.mark.parametrize("recorded", [True, False])
def test_interactive_other_direction_than_the_checkpoint_warns(multi30k_slice, tiny_checkpoint, unrecorded_checkpoint,
                                                               tmp_path, recorded):
    checkpoint = tiny_checkpoint if recorded else unrecorded_checkpoint
    state = torch.load(checkpoint, weights_only=False)
    assert (state["cfg"]["task"]["source_lang"], state["cfg"]["task"]["target_lang"]) == \
        (("en", "de") if recorded else (None, None))
    lines = ["Zwei Männer gehen die Straße entlang.".encode()]
    proc = interactive(multi30k_slice, checkpoint, tmp_path, lines, "-s", "de", "-t", "en", "--bpe", "prepared")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert warning_lines(proc.stderr) == [direction_warning(checkpoint)]
    assert sorted(outputs(proc.stdout, "H")) == [0]
    proc = interactive(multi30k_slice, checkpoint, tmp_path, lines, "-s", "en", "-t", "de", "--bpe", "prepared")
    assert warning_lines(proc.stderr) == []


@pytest.mark.parametrize("buffer_size", ["1", "4"])
def test_interactive_over_long_line_is_refused_by_its_input_line_number(multi30k_slice, tiny_checkpoint, tmp_path,
                                                                        buffer_size):
    lines = [CLEAN[0].encode(), " ".join(["word"] * 40).encode(), CLEAN[1].encode()]
    proc = interactive(multi30k_slice, tiny_checkpoint, tmp_path, lines, "--bpe", "prepared",
                       "--max-source-positions", "32", "--buffer-size", buffer_size, "--batch-size", buffer_size)
    last = one_line_refusal(proc, "input line 2 has", "max_positions=(32", "--skip-invalid-size-inputs-valid-test")
    assert "sentence #" not in last


def binarized(multi30k_slice, dest, emptied=()):
    """(folder, source lines): the slice's first 6 BPE'd test sentences binarized with its dictionaries, the source
    lines numbered ``emptied`` (from 1) emptied."""
    for lang in ("en", "de"):
        with open(os.path.join(multi30k_slice, "tok", f"test.bpe.{lang}"), encoding="utf-8") as f:
            lines = [next(f).strip() for _ in range(6)]
        if lang == "en":
            lines = ["" if i + 1 in emptied else line for i, line in enumerate(lines)]
            source = lines
        (dest / f"raw.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    run_cli(["fairseq-preprocess", "-s", "en", "-t", "de", "--testpref", str(dest / "raw"), "--destdir",
             str(dest / "bin"), "--srcdict", os.path.join(multi30k_slice, "dict.en.txt"), "--tgtdict",
             os.path.join(multi30k_slice, "dict.de.txt"), "--workers", "1"])
    return str(dest / "bin"), source


def generate(data, checkpoint, *extra):
    return run_cli(["fairseq-generate", data, "--user-dir", USER_DIR, "--path", checkpoint, "--gen-subset", "test",
                    *DECODE, *extra], check=False)


def test_generate_leaves_empty_sources_empty_and_says_which(multi30k_slice, tiny_checkpoint, tmp_path):
    data, source = binarized(multi30k_slice, tmp_path, emptied=(3, 5))
    proc = generate(data, tiny_checkpoint)
    assert proc.returncode == 0, proc.stderr[-3000:]
    empty = [i + 1 for i, line in enumerate(source) if not line]
    assert empty == [3, 5]
    assert warning_lines(proc.stderr) == [empty_warning("source lines of test", "line", empty, len(source))]
    hyps = outputs(proc.stdout, "H")
    assert sorted(hyps) == list(range(len(source)))  # one output per source line
    assert [i for i in sorted(hyps) if hyps[i] == ""] == [n - 1 for n in empty]


def test_generate_clean_data_gives_no_warning_and_another_direction_does(multi30k_slice, tiny_checkpoint, tmp_path):
    data, source = binarized(multi30k_slice, tmp_path)
    proc = generate(data, tiny_checkpoint)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert warning_lines(proc.stderr) == []
    assert sorted(outputs(proc.stdout, "H")) == list(range(len(source)))
    proc = generate(data, tiny_checkpoint, "--source-lang", "de", "--target-lang", "en")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert warning_lines(proc.stderr) == [direction_warning(tiny_checkpoint)]


def hub(data, checkpoint, **kwargs):
    from fairseq_fusion.models import FusionTransformerModel

    folder, name = os.path.split(checkpoint)
    return FusionTransformerModel.from_pretrained(folder, checkpoint_file=name, data_name_or_path=data, **kwargs)


def recorded(call):
    """(result, messages of the FusionWarnings ``call()`` gave)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught if issubclass(w.category, FusionWarning)]


def test_hub_warns_of_empty_and_undecodable_sentences_and_leaves_empty_ones_empty(multi30k_slice, tiny_checkpoint):
    mt, messages = recorded(lambda: hub(multi30k_slice, tiny_checkpoint, bpe="prepared"))
    assert messages == []
    translations, messages = recorded(lambda: mt.translate(CLEAN, beam=2, max_len_b=5))
    assert len(translations) == len(CLEAN) and all(translations) and messages == []
    undecodable = "Zwei Männer".encode("latin-1").decode("utf-8", "surrogateescape")  # how Python keeps bad bytes
    sentences = [CLEAN[0], "", undecodable, ""]
    translations, messages = recorded(lambda: mt.translate(sentences, beam=2, max_len_b=5))
    assert len(translations) == len(sentences)
    assert translations[1] == translations[3] == "" and translations[0] and translations[2]
    assert messages == [
        empty_warning("input sentences", "sentence", [2, 4], len(sentences)),
        f"1 of {len(sentences)} input sentences is not valid UTF-8 (sentence 3): the bytes that are not became words "
        "the dictionary does not know (<unk>)",
    ]
    assert recorded(lambda: mt.translate("", beam=2))[0] == ""


def test_hub_refuses_a_search_fairseq_cannot_run(multi30k_slice, tiny_checkpoint):
    """The hub's beam= / nbest= / length keywords, as fairseq-generate's flags (test_refusals): one FusionError line
    naming the keyword, not fairseq's reshape error, ZeroDivisionError or assertion."""
    from fairseq_fusion.errors import FusionError

    mt = hub(multi30k_slice, tiny_checkpoint, bpe="prepared")
    for kwargs, expected in (({"beam": 0}, "beam=0: expected a number of hypotheses the search keeps >= 1"), ({"beam": 2, "nbest": 0}, "nbest=0: "),
                             ({"beam": 2, "nbest": 3}, "nbest=3 with beam=2: the search keeps 2 hypotheses"),
                             ({"beam": 2, "min_len": 50, "max_len_a": 0, "max_len_b": 10}, "min_len=50 is more than")):
        with pytest.raises(FusionError) as e:
            mt.translate(CLEAN[0], **kwargs)
        assert expected in str(e.value) and "\n" not in str(e.value)
    assert mt.translate(CLEAN[0], beam=2, max_len_b=5)  # the same hub still translates


def test_hub_warns_of_another_direction_and_of_raw_text_without_its_pipeline(multi30k_slice, tiny_checkpoint):
    mt, messages = recorded(lambda: hub(multi30k_slice, tiny_checkpoint, source_lang="de", target_lang="en"))
    assert messages == [direction_warning(os.path.join(*os.path.split(tiny_checkpoint)))]
    mt, messages = recorded(lambda: hub(multi30k_slice, tiny_checkpoint))
    assert messages == []
    translations, messages = recorded(lambda: mt.translate(RAW, beam=2, max_len_b=5))
    assert len(translations) == len(RAW)
    assert messages == [unknown_warning(multi30k_slice, RAW, 'bpe="prepared"')]


@pytest.fixture(scope="module")
def german_and_english(tmp_path_factory):
    folder = tmp_path_factory.mktemp("languages")
    paths = {}
    for lang in ("de", "en"):
        with gzip.open(data_paths.data_path("multi30k", f"test_2016_flickr.{lang}.gz"), "rt", encoding="utf-8") as f:
            lines = [next(f) for _ in range(20)]
        paths[lang] = str(folder / f"test.{lang}")
        with open(paths[lang], "w", encoding="utf-8") as f:
            f.writelines(lines)
    return paths


def test_score_bleu_warns_when_t_is_not_the_outputs_language(german_and_english):
    from fairseq_fusion_tools.scoring import text_language

    de = german_and_english["de"]
    proc = run_cli(["fusion-score-bleu", "--hyp", de, "--hyp-format", "detok", "--ref", de, "-t", "de"])
    assert warning_lines(proc.stderr) == []
    proc = run_cli(["fusion-score-bleu", "--hyp", de, "--hyp-format", "detok", "--ref", german_and_english["en"],
                    "-t", "en"])
    with open(de, encoding="utf-8") as f:
        words = text_language.WORD.findall(f.read().lower())
    share = {lang: sum(w in text_language.FUNCTION_WORDS[lang] for w in words) / len(words) for lang in ("de", "en")}
    assert share["de"] > 0.25 and share["en"] < 0.1  # German by its own function words
    assert warning_lines(proc.stderr) == [
        f"fusion-score-bleu: -t en, but --hyp {de} reads as de ({100 * share['de']:.0f}% of its words or letters speak "
        f"for de, {100 * share['en']:.0f}% for en): it is scored as en (tokenized BLEU split: none; de's: compound); "
        "give -t de if that is its language"]


def test_a_warning_the_filters_hide_goes_to_the_log(multi30k_slice, tiny_checkpoint, tmp_path):
    """PYTHONWARNINGS=ignore (read at interpreter start: a real process) cannot silence a reversed language pair: the
    warning goes through fairseq's logger (the module's, at WARNING), in fairseq-interactive's log; without the
    filter it is the one warning line, not printed twice."""
    stdin = tmp_path / "stdin.txt"
    stdin.write_bytes("Zwei Männer gehen die Straße entlang.\n".encode())
    argv = ["fairseq-interactive", multi30k_slice, "--user-dir", USER_DIR, "--path", tiny_checkpoint, *DECODE,
            "-s", "de", "-t", "en", "--bpe", "prepared"]
    proc = run_cli(argv, stdin=str(stdin), env={"PYTHONWARNINGS": "ignore"}, process=True)
    assert warning_lines(proc.stderr) == []
    logged = [line for line in (proc.stdout + proc.stderr).splitlines() if "WARNING" in line
              and "fairseq_fusion.guards.entry_checks" in line and line.endswith(direction_warning(tiny_checkpoint))]
    assert len(logged) == 1, proc.stderr[-3000:]  # as fairseq's logging prints a record in this process
    proc = run_cli(argv, stdin=str(stdin))
    assert warning_lines(proc.stderr) == [direction_warning(tiny_checkpoint)]
    assert direction_warning(tiny_checkpoint) not in proc.stdout


def test_hub_warnings_filtered_out_are_logged(multi30k_slice, tiny_checkpoint, caplog):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mt = hub(multi30k_slice, tiny_checkpoint)
        mt.translate(RAW, beam=2, max_len_b=5)
    logged = [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("fairseq_fusion")]
    assert logged == [("fairseq_fusion.guards.input_checks", "WARNING", unknown_warning(multi30k_slice, RAW, 'bpe="prepared"'))]
    caplog.clear()
    _, messages = recorded(lambda: mt.translate(RAW, beam=2, max_len_b=5))  # recorded: not logged as well
    assert messages == [unknown_warning(multi30k_slice, RAW, 'bpe="prepared"')]
    assert not [r for r in caplog.records if r.name.startswith("fairseq_fusion")]


def test_interactive_line_longer_than_max_tokens_is_refused_by_its_input_line_number(multi30k_slice, tiny_checkpoint,
                                                                                    tmp_path):
    """fairseq's batch_by_size asserted (a traceback); --skip-invalid-size-inputs-valid-test does not skip it."""
    lines = [CLEAN[0].encode(), " ".join(["dog"] * 20).encode(), CLEAN[1].encode()]
    for extra in ([], ["--skip-invalid-size-inputs-valid-test"]):
        proc = interactive(multi30k_slice, tiny_checkpoint, tmp_path, lines, "--bpe", "prepared", "--max-tokens", "12",
                           "--buffer-size", "4", "--batch-size", "4", *extra)
        one_line_refusal(proc, "--max-tokens 12", "input line 2: 21 tokens", "give --max-tokens 21 or more")
