"""The mistakes matrix: every fusion-* command, fed the mistakes users make, ends in one line
``fairseq-fusion: error: ...`` naming the file, flag or value and what was expected (exit status != 0, no traceback).

Rows are data: (command, mistake, argv, expected words). ``{name}`` in argv and words is a file of the ``files``
fixture (a good one, or one of the mistakes: missing, a folder, unreadable, Latin-1, binary, empty) or the output
folder of the row. Mistake classes: a missing / unreadable / wrong-type (folder for file, file for folder) / Latin-1 /
binary / empty input, an output in a read-only folder or under a regular file, a checkpoint of another technique than
the command analyses, a split the data folder lacks, a flag of another command."""
import os
import shutil
import stat

import pytest

from conftest import run_cli, unwritable_folder
from fairseq_fusion.errors import PREFIX
from fairseq_fusion_tools import data_paths

ALIGN = data_paths.data_path("alignment", must_exist=False)
LATIN1 = "Ein Hund.\nEin Mädchen spielt.\nZwei Männer.\n".encode("latin-1")  # line 2: the first non-UTF-8 byte
GOOD_DE = "Ein Hund läuft .\nEin Mädchen spielt .\nZwei Männer .\n"
GOOD_EN = "A dog runs .\nA girl plays .\nTwo men .\n"

# ---- the minimal valid invocation of each command: argv after the command's name ------------------------------
CKPT = ["--path", "{ckpt}", "--data", "{data}", "--out", "{out}/res", "--cpu"]
SPLIT = ["--split", "test", "--sentences", "4"]
VALID = {
    "fusion-aer": ["--gold", "{talp}", "--hyp", "{talp}"],
    "fusion-alignment-analysis": CKPT + ["--parallel", "{parallel}", "--file-langs", "en-de", "--sentences", "2"],
    "fusion-archs": ["--readme", "{readme}"],
    "fusion-average-checkpoints": ["--inputs", "{ckpt}", "--output", "{out}/avg.pt"],
    "fusion-benchmark": ["--data", "{data}", "--size", "tiny", "--cpu", "--memory-only", "--out", "{out}/bench.json"],
    "fusion-bleu-by-length": ["--src", "{src}", "--ref", "{ref}", "--sys", "a={hyp}", "--out", "{out}/res"],
    "fusion-compare": ["{data}", "--work", "{out}/work", "--size", "tiny", "--max-update", "2", "--system", "transformer",
                       "--protocol", "same"],
    "fusion-contrastive-score": CKPT + ["--suite", "{suite}", "--max-items", "2"],
    "fusion-contrastive-translate": ["--suite", "{mucow}", "--pair", "de-en", "--hyp", "{hyp}", "--out", "{out}/res"],
    "fusion-convert-checkpoint": ["--input", "{ckpt}", "--output", "{out}/conv.pt", "--arch", "transformer_surface_fusion"],
    "fusion-embedding-expressivity": CKPT,
    "fusion-embedding-similarity": CKPT + SPLIT,
    "fusion-embedding-similarity-bilingual": CKPT + ["--dictionary", "{pairs}"],
    "fusion-exploitation-score": CKPT,
    "fusion-fetch-data": ["--dest", "{out}/data", "--quiet"],
    "fusion-gpu-check": ["--device", "cpu", "--work", "{out}/work", "--out", "{out}/check"],
    "fusion-gpu-speed": ["--device", "cpu", "--dtypes", "fp32", "--work", "{out}/work", "--out", "{out}/speed"],
    "fusion-information-probe": CKPT + ["--train-split", "valid", "--train-sentences", "4", "--valid-split", "valid",
                                        "--valid-sentences", "4"] + SPLIT,
    "fusion-layer-attention-map": CKPT,
    "fusion-layer-masking": CKPT + SPLIT,
    "fusion-lexical-probe": CKPT + SPLIT,
    "fusion-parse-spans": ["--data", "{data}", "--split", "test", "-s", "en", "-t", "de", "--parse", "{trees}",
                           "--output", "{out}/spans"],
    "fusion-parse-trees": ["--input", "{src}", "--output", "{out}/trees", "--lang", "en"],
    "fusion-prepare-gpt2": ["-s", "en", "-t", "de", "--trainpref", "{pref}", "--validpref", "{pref}",
                            "--gpt2-dir", "{gpt2}", "--destdir", "{out}/gpt2"],
    "fusion-prepare-text": ["-s", "en", "-t", "de", "--trainpref", "{pref}", "--validpref", "{pref}",
                            "--destdir", "{out}/prep", "--bpe-merges", "20"],
    "fusion-score-bleu": ["--hyp", "{hyp}", "--hyp-format", "detok", "--ref", "{ref}", "-t", "de", "--out", "{out}/res"],
    "fusion-score-m2": ["--hyp", "{hyp}", "--hyp-format", "text", "--gold", "{m2}", "--out", "{out}/res"],
    "fusion-score-rouge": ["--hyp", "{hyp}", "--hyp-format", "text", "--ref", "{ref}", "--out", "{out}/res"],
    "fusion-shortcut-gates": CKPT + SPLIT,
    "fusion-significance": ["--ref", "{ref}", "--baseline", "a={hyp}", "--sys", "b={hyp}", "--n-samples", "10",
                            "--out", "{out}/res"],
    "fusion-training-curve": ["{log}", "--out", "{out}/res"],
}
# the text inputs of each command (flag, or the value's placeholder for positionals and NAME=FILE values)
TEXT_INPUTS = {
    "fusion-aer": ["--gold", "--hyp"], "fusion-alignment-analysis": ["--parallel"], "fusion-archs": ["--readme"],
    "fusion-bleu-by-length": ["--src", "--ref", "a={hyp}"], "fusion-contrastive-translate": ["--hyp"],
    "fusion-embedding-similarity-bilingual": ["--dictionary"], "fusion-parse-spans": ["--parse"],
    "fusion-parse-trees": ["--input"], "fusion-score-bleu": ["--hyp", "--ref"], "fusion-score-m2": ["--hyp", "--gold"],
    "fusion-score-rouge": ["--hyp", "--ref"], "fusion-significance": ["--ref", "b={hyp}"],
    "fusion-training-curve": ["{log}"],
}
# commands that read their text with undecodable bytes replaced: they refuse what they find in it, naming the file
READ_LENIENTLY = {"fusion-training-curve"}
CHECKPOINT_INPUT = {c: "--path" for c in VALID if "--path" in VALID[c]}
CHECKPOINT_INPUT.update({"fusion-average-checkpoints": "--inputs", "fusion-convert-checkpoint": "--input"})
DATA_INPUT = {c: "--data" for c in VALID if "--data" in VALID[c]}
DATA_INPUT["fusion-compare"] = "{data}"
# fusion-parse-trees without stanza refuses before it writes (one line naming the extra)
OUTPUTS = {c: f for c in VALID for f in ("--out", "--output", "--destdir", "--work", "--dest") if f in VALID[c]
           and c != "fusion-parse-trees"}


def replace(argv, flag, value):
    """``argv`` with the value of ``flag`` (or the element ``flag`` itself, for positionals) set to ``value``."""
    argv = list(argv)
    if "=" in flag:  # NAME={file}
        argv[argv.index(flag)] = flag.split("=")[0] + "=" + value
    elif not flag.startswith("-"):
        argv[argv.index(flag)] = value
    else:
        argv[argv.index(flag) + 1] = value
    return argv


def named(flag):
    return flag if flag.startswith("-") else None


ROWS = []  # (command, mistake, argv, expected words)
for command, flags in TEXT_INPUTS.items():
    for flag in flags:
        for mistake, value, words in [
            ("missing", "{missing}", ["{missing}"]),
            ("folder", "{folder}", ["{folder}", "folder"]),
            ("unreadable", "{unreadable}", ["{unreadable}"]),
            ("latin-1", "{latin1}", ["{latin1}", "line 2", "UTF-8"]),
            ("binary", "{binary}", ["{binary}", "UTF-8"]),
            ("empty", "{empty}", []),  # named as the command sees it: the file, or "system 'a' has 0 lines"
        ]:
            if command in READ_LENIENTLY and mistake in ("latin-1", "binary"):
                words = [value]
            flag_word = [named(flag)] if named(flag) and mistake != "empty" else []
            ROWS.append((command, f"{flag} {mistake}", replace(VALID[command], flag, value), flag_word + words))
for command, flag in CHECKPOINT_INPUT.items():
    for mistake, value, words in [
        ("missing", "{missing}", ["{missing}"]),
        ("folder", "{folder}", ["{folder}"]),
        ("unreadable", "{unreadable}", ["{unreadable}"]),
        ("text file", "{latin1}", ["{latin1}"]),
        ("empty", "{empty}", ["{empty}", "empty"]),
    ]:  # the checkpoint loader's lines name the file ("checkpoint PATH: ...")
        ROWS.append((command, f"{flag} {mistake}", replace(VALID[command], flag, value), words))
for command, flag in DATA_INPUT.items():
    for mistake, value, words in [("missing", "{missing}", ["{missing}"]), ("a file", "{ref}", ["{ref}", "folder"])]:
        ROWS.append((command, f"{flag} {mistake}", replace(VALID[command], flag, value), [f for f in [named(flag)] if f] + words))
for command, flag in OUTPUTS.items():
    value = VALID[command][VALID[command].index(flag) + 1]
    for mistake, where in [("read-only folder", "{readonly}"), ("under a file", "{ref}")]:
        bad = value.replace("{out}", where)
        ROWS.append((command, f"{flag} {mistake}", replace(VALID[command], flag, bad), [flag, bad]))
# every command that reads a split of a data folder (its parser's split flags), given one the folder lacks
SPLIT_FLAGS = ("--split", "--gen-subset", "--train-split", "--valid-split")
REFUSED_FIRST = {"fusion-layer-attention-map", "fusion-layer-masking", "fusion-exploitation-score",  # the checkpoint's
                 "fusion-shortcut-gates", "fusion-benchmark"}  # technique; --memory-only reads no --gen-subset
for command in sorted(set(VALID) - REFUSED_FIRST):
    module = __import__("fairseq_fusion_tools.cli." + command[len("fusion-"):].replace("-", "_"), fromlist=["get_parser"])
    for flag in [f for f in SPLIT_FLAGS if f in module.get_parser()._option_string_actions]:
        argv = replace(VALID[command], flag, "nosuch") if flag in VALID[command] else VALID[command] + [flag, "nosuch"]
        named_file = command == "fusion-parse-spans"  # names the split's file it lacks, nosuch.bpe.en
        ROWS.append((command, f"{flag} missing", argv, ["nosuch"] if named_file else [flag, "nosuch"]))
ROWS.append(("fusion-benchmark", "--gen-subset missing, timed (its worker process refuses)",  # said as the worker's line
             [a for a in VALID["fusion-benchmark"] if a != "--memory-only"] + ["--gen-subset", "nosuch", "--updates", "1"],
             ["fusion-benchmark: transformer: split 'nosuch'", "--gen-subset"]))
# the tiny checkpoint is surface fusion: none of the techniques these analyse
for command, technique in [("fusion-layer-attention-map", "layer attention"), ("fusion-layer-masking", "layer attention"),
                           ("fusion-exploitation-score", "aggregation"), ("fusion-shortcut-gates", "shortcut")]:
    ROWS.append((command, "other technique", VALID[command], ["--path", "{ckpt}", technique]))
ROWS += [
    ("fusion-score-bleu", "detok file as a generate log", replace(VALID["fusion-score-bleu"], "--hyp-format", "generate"),
     ["--hyp", "{hyp}", "generate"]),
    ("fusion-score-bleu", "empty hyp and ref", replace(replace(VALID["fusion-score-bleu"], "--hyp", "{empty}"), "--ref", "{empty}"),
     ["{empty}", "empty"]),  # one file given as both: named by either flag (guards/text_files.py)
    ("fusion-prepare-text", "-t without its files", replace(VALID["fusion-prepare-text"], "-t", "fr"), ["{pref}.fr"]),
    ("fusion-prepare-text", "--trainpref .gz", replace(VALID["fusion-prepare-text"], "--trainpref", "{pref}.gz"),
     ["--trainpref", "{pref}.gz"]),
    ("fusion-prepare-text", "Latin-1 training file", replace(VALID["fusion-prepare-text"], "--trainpref", "{latinpref}"),
     ["{latinpref}.de", "line 2", "UTF-8"]),
    ("fusion-score-bleu", "flag of another command", VALID["fusion-score-bleu"] + ["--path", "{ckpt}"], ["--path"]),
    ("fusion-layer-masking", "flag of another command", VALID["fusion-layer-masking"] + ["--parallel", "{ref}"],
     ["--parallel"]),
]


def _write(path, content):
    with open(path, "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode("utf-8"))
    return str(path)


def flat_trees(tokenized):
    """One bracketing per line of ``tokenized``: each word under X, all under S (a tree fusion-parse-spans accepts)."""
    with open(tokenized, encoding="utf-8") as f:
        return "".join("(ROOT (S " + " ".join(f"(X {w})" for w in line.split()) + "))\n" for line in f)


def root_reads_anything():
    return os.geteuid() == 0


@pytest.fixture(scope="module")
def files(multi30k_slice, tiny_checkpoint, tmp_path_factory):
    d = tmp_path_factory.mktemp("mistakes")
    f = {"data": multi30k_slice, "ckpt": tiny_checkpoint, "missing": str(d / "no-such-file"),
         "folder": str(d / "a-folder"), "empty": _write(d / "empty.txt", b""), "latin1": _write(d / "latin1.txt", LATIN1),
         "binary": str(shutil.copy(tiny_checkpoint, d / "binary.pt")), "ref": _write(d / "ref.de", GOOD_DE), "hyp": _write(d / "hyp.de", GOOD_DE),
         "src": _write(d / "src.en", GOOD_EN), "talp": _write(d / "gold.talp", "1-1 2-2\n1-1\n1-1 2p2\n"),
         "parallel": _write(d / "test.en-de", "".join(f"{e} ||| {g}\n" for e, g in zip(GOOD_EN.splitlines(), GOOD_DE.splitlines()))),
         "pairs": _write(d / "pairs.txt", "dog Hund\ngirl Mädchen\n"),
         "trees": _write(d / "trees.txt", flat_trees(os.path.join(multi30k_slice, "tok", "test.en"))),
         "m2": _write(d / "gold.m2", "S Ein Hund läuft .\nA -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||0\n\n" * 3),
         "log": _write(d / "train.log", "valid | epoch 001 | valid on 'valid' subset | loss 5 | bleu 1.0 | num_updates 2\n"),
         "readme": _write(d / "README.md", "# x\n"), "pref": str(d / "corpus"), "latinpref": str(d / "latin"),
         "suite": data_paths.data_path("contrastive", "distil_lingeval", "np_agreement.mt", must_exist=False),
         "mucow": data_paths.data_path("contrastive", "mucow", "translation", must_exist=False)}
    os.mkdir(f["folder"])
    f["gpt2"] = str(d / "gpt2")
    os.mkdir(f["gpt2"])
    for name in ("encoder.json", "vocab.bpe", "dict.txt"):
        _write(d / "gpt2" / name, b"")
    _write(d / "corpus.en", GOOD_EN)
    _write(d / "corpus.de", GOOD_DE)
    _write(d / "latin.en", GOOD_EN)
    _write(d / "latin.de", LATIN1)
    f["unreadable"] = _write(d / "unreadable.txt", GOOD_DE)
    os.chmod(f["unreadable"], 0)
    readonly = d / "read-only"
    readonly.mkdir()
    os.chmod(readonly, stat.S_IRUSR | stat.S_IXUSR)
    f["readonly"] = unwritable_folder(str(readonly))
    yield f
    os.chmod(readonly, 0o755)


def fill(text, f):
    return text.format(**f)


def one_line_refusal(proc, expected):
    """Exit status != 0, no traceback, and the last stderr line is the plugin's refusal naming each of ``expected``."""
    last = (proc.stderr.strip().splitlines() or [""])[-1]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and last.startswith(PREFIX), \
        f"exit {proc.returncode}; last line: {last!r}\n{proc.stderr[-2500:]}"
    missing = [w for w in expected if w not in last]
    assert not missing, f"{last!r} does not name {missing}"


@pytest.mark.parametrize("command, mistake, argv, expected", ROWS, ids=[f"{r[0]}: {r[1]}" for r in ROWS])
def test_mistake_is_one_line(files, tmp_path, command, mistake, argv, expected):
    if "unreadable" in mistake and root_reads_anything():
        pytest.skip("running as root: chmod 000 does not stop root from reading")
    if "read-only" in mistake and files["readonly"] is None:
        pytest.skip("no folder here stops this user from writing (root, and /sys writable)")
    f = dict(files, out=str(tmp_path))
    proc = run_cli([command] + [fill(a, f) for a in argv], check=False)
    one_line_refusal(proc, [fill(w, f) for w in expected])


def test_a_new_interpreter_says_the_same_line(files, tmp_path):
    """The in-process runner above shares the test process's hooks; a real command start installs them itself."""
    argv = ["fusion-score-bleu", "--hyp", files["latin1"], "--hyp-format", "detok", "--ref", files["ref"], "-t", "de"]
    one_line_refusal(run_cli(argv, check=False, process=True), ["--hyp", files["latin1"], "line 2", "UTF-8"])


def test_errors_on_paths_the_user_did_not_give_keep_their_traceback(tmp_path, monkeypatch):
    import argparse

    from fairseq_fusion_tools import user_files as _user_files

    parser = argparse.ArgumentParser(prog="fusion-x")
    parser.add_argument("--hyp")
    mine = str(tmp_path / "hyp.txt")
    monkeypatch.setattr("sys.argv", ["fusion-x", "--hyp", mine])
    monkeypatch.setattr(_user_files, "_PARSED", [None])
    _user_files.remember(parser, parser.parse_args(["--hyp", mine]))
    elsewhere = FileNotFoundError(2, "No such file or directory", str(tmp_path / "cache" / "model.bin"))
    assert _user_files.line_for(elsewhere, None) is None
    given = FileNotFoundError(2, "No such file or directory", mine)
    assert _user_files.line_for(given, None) == f"fusion-x: --hyp {mine}: {mine}: no such file or folder"


# ---- issue 49: a --max-tokens below the longest sentence an analysis reads; a byte-order mark in a text input -------
MAX_TOKENS_ROWS = [(command, "--max-tokens below the longest sentence", VALID[command] + ["--max-tokens", "5"],
                    ["--max-tokens 5", "is less than the longest sentence, line", "give --max-tokens"])
                   for command in ("fusion-embedding-similarity", "fusion-lexical-probe")]


@pytest.mark.parametrize("command, mistake, argv, expected", MAX_TOKENS_ROWS, ids=[f"{r[0]}: {r[1]}" for r in MAX_TOKENS_ROWS])
def test_max_tokens_mistake_is_one_line(files, tmp_path, command, mistake, argv, expected):
    test_mistake_is_one_line(files, tmp_path, command, mistake, argv, expected)


# text inputs a byte-order mark is removed from (fairseq_fusion/guards/text_files.py), with one warning naming the file
BOM_INPUTS = {"fusion-score-bleu": ["--hyp", "--ref"], "fusion-score-rouge": ["--hyp", "--ref"],
              "fusion-score-m2": ["--hyp", "--gold"], "fusion-bleu-by-length": ["--src", "--ref", "a={hyp}"],
              "fusion-significance": ["--ref", "b={hyp}"], "fusion-aer": ["--gold"], "fusion-alignment-analysis": ["--parallel"], "fusion-training-curve": ["{log}"]}
BOM_ROWS = [(command, flag) for command, flags in BOM_INPUTS.items() for flag in flags]


def placeholder(argv, flag):
    """The ``{name}`` a flag's value (or a positional, or NAME={name}) is in ``argv``."""
    if "=" in flag:
        return flag.split("=", 1)[1]
    return argv[argv.index(flag) + 1] if flag.startswith("-") else flag


@pytest.mark.parametrize("command, flag", BOM_ROWS, ids=[f"{c}: {f} with a byte-order mark" for c, f in BOM_ROWS])
def test_byte_order_mark_is_removed_with_a_warning(files, tmp_path, command, flag):
    from fairseq_fusion.errors import WARNING_PREFIX
    from fairseq_fusion.guards.text_files import bom_removed

    f = dict(files, out=str(tmp_path))
    good = fill(placeholder(VALID[command], flag), f)
    marked = str(tmp_path / ("marked-" + os.path.basename(good)))
    with open(good, "rb") as src, open(marked, "wb") as dst:
        dst.write(b"\xef\xbb\xbf" + src.read())
    argv = replace(VALID[command], flag, marked) if "=" not in flag else \
        [a.replace(flag, flag.split("=")[0] + "=" + marked) if a == flag else a for a in VALID[command]]
    proc = run_cli([command] + [fill(a, f) for a in argv], check=False)
    assert proc.returncode == 0, proc.stderr[-2500:]
    warnings = [line for line in proc.stderr.splitlines() if line.startswith(WARNING_PREFIX)]
    assert WARNING_PREFIX + bom_removed(marked) in warnings, proc.stderr[-2500:]


# ---- issue 49: a checkpoint meets only its own dictionaries; one training per save folder ---------------------
# (rows of their own, so that the matrix above stays as it was; the same conventions: argv of VALID, one line naming)
OTHER_DICTIONARY_ROWS = [(c, replace(VALID[c], "--data", "{reversed}")) for c in CHECKPOINT_INPUT if "--data" in VALID[c]]


@pytest.fixture(scope="module")
def reversed_data(files, tmp_path_factory):
    """The data folder with dict.en.txt and dict.de.txt in reverse order: the same sizes, other vocabularies."""
    from test_dictionary_check import reverse_dictionaries

    folder = str(tmp_path_factory.mktemp("reversed") / "data-bin")
    shutil.copytree(files["data"], folder)
    reverse_dictionaries(folder)
    return folder


@pytest.mark.parametrize("command, argv", OTHER_DICTIONARY_ROWS, ids=[r[0] for r in OTHER_DICTIONARY_ROWS])
def test_data_of_other_dictionaries_of_the_same_size_is_one_line(files, reversed_data, tmp_path, command, argv):
    f = dict(files, out=str(tmp_path), reversed=reversed_data)
    proc = run_cli([command] + [fill(a, f) for a in argv], check=False)
    one_line_refusal(proc, [f"{reversed_data}/dict.en.txt is not the source dictionary checkpoint {files['ckpt']}"])


def test_compare_into_a_run_folder_a_training_holds_is_one_line(files, tmp_path):
    """fusion-compare's runs are fairseq-train's (which locks its --save-dir); a run folder that another training
    holds is refused before any training, and left as it was."""
    from test_save_dir_lock import hold

    run = tmp_path / "work" / "runs" / "transformer" / "seed1"
    lock = hold(str(run))
    try:
        proc = run_cli(["fusion-compare"] + [fill(a, dict(files, out=str(tmp_path))) for a in VALID["fusion-compare"]],
                       check=False)
    finally:
        lock.release()
    one_line_refusal(proc, ["fusion-compare", f"--save-dir {run} is in use by another training (pid 12345"])
    assert sorted(os.listdir(run)) == ["training.lock", "training.lock.json"]
