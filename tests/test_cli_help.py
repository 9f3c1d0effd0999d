"""Every fusion-* command's --help: the description and each option's help are whole sentences, --help exits 0,
and the analyses that load a checkpoint share their options (analysis/common.py). In-process, parse only."""
import argparse
import contextlib
import importlib
import io
import os
import re

import pytest

from fairseq_fusion_tools import data_paths

CLI_DIR = os.path.join(data_paths.REPO_ROOT, "fairseq_fusion_tools", "cli")


def discover():
    """fusion-NAME -> module name, as pyproject.toml lists them: every cli/NAME.py with a cli_main()."""
    found = {}
    for name in sorted(os.listdir(CLI_DIR)):
        if name.endswith(".py") and not name.startswith("_"):
            with open(os.path.join(CLI_DIR, name)) as f:
                if "def cli_main(" in f.read():
                    found["fusion-" + name[:-3].replace("_", "-")] = "fairseq_fusion_tools.cli." + name[:-3]
    return found


COMMANDS = discover()


def commands():
    return sorted(COMMANDS)


def parser_of(command):
    module = importlib.import_module(COMMANDS[command])
    assert hasattr(module, "get_parser"), f"{command}: {module.__name__} has no get_parser() (its parser cannot be built alone)"
    return module.get_parser()


OPENERS, CLOSERS = "([{", ")]}"
ENDS = re.compile(r"[.?!][)\]}`'\"]*$")  # a sentence's end, maybe inside a closing bracket or quote


def sentence_problem(text):
    """Why ``text`` is not a whole sentence (or sentences), or None."""
    s = " ".join((text or "").split())
    if not s:
        return "no text"
    first = s.split()[0].rstrip(":,;")
    code = re.search(r"[-_./=<>{}$A-Z0-9]", first[1:])  # fusion-aer, --flag, sacreBLEU, d_model, OUT.json ...
    if not (first[0].isupper() or first[0].isdigit() or first[0] in "-`'\"(" or code):
        return f"starts with {first!r}: not a capital letter, a flag or code"
    stack = []
    for ch in s:
        if ch in OPENERS:
            stack.append(ch)
        elif ch in CLOSERS:
            if not stack or OPENERS[CLOSERS.index(ch)] != stack.pop():
                return f"unbalanced {ch!r}"
    if stack:
        return f"unclosed {stack[-1]!r}"
    if s.count("`") % 2:
        return "unbalanced backticks"
    if "%(" in s or "default: None" in s:
        return "unexpanded %(...)s or a default of None shown"
    if ENDS.search(s):
        return None
    if s.endswith(")"):  # "A sentence. (A remark)"
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                if ENDS.search(s[:i].rstrip()):
                    return None
                break
    return f"does not end a sentence: ...{s[-30:]!r}"


def option_helps(parser):
    """(option strings, help as --help shows it) of every documented option but argparse's own -h."""
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        name = "/".join(action.option_strings) or action.dest
        yield name, formatter._expand_help(action) if action.help else ""


@pytest.mark.parametrize("text, ok", [
    ("Checkpoint file (.pt).", True),
    ("Tokens per batch (default: 4000).", True),
    ("--bpe gpt2: the encoder.json file.", True),
    ("fusion-aer: alignment error rate of a file against gold.", True),
    ("Stop early. (Default: 3)", True),
    ("checkpoint file (.pt)", False),  # lower case, no end
    ("Checkpoint file (.pt", False),
    ("Uses ``fairseq`s encoder.", False),
    ("AER and coverage of each decoder layer's encoder", False),  # stops mid-sentence
    ("Seed (default: None).", False),
    ("", False),
])
def test_sentence_check(text, ok):
    assert (sentence_problem(text) is None) == ok, sentence_problem(text)


def test_discovery_matches_installed_scripts():
    """Every fusion-* console script the installed package has is discovered here (same rule)."""
    from importlib.metadata import entry_points

    installed = {e.name for e in entry_points(group="console_scripts") if e.value.startswith("fairseq_fusion_tools.cli.")}
    assert installed and installed <= set(COMMANDS), installed - set(COMMANDS)


@pytest.mark.parametrize("command", commands())
def test_help_is_whole_sentences(command):
    parser = parser_of(command)
    problems = []
    description = parser.description
    if "%(prog)" in (description or ""):
        description = description % {"prog": parser.prog}
    why = sentence_problem(description)
    if why:
        problems.append(f"description: {why}")
    for name, text in option_helps(parser):
        why = sentence_problem(text)
        if why:
            problems.append(f"{name}: {why}")
    assert not problems, f"{command} --help:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("command", commands())
def test_help_runs(command):
    parser = parser_of(command)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as e:
        parser.parse_args(["--help"])
    assert e.value.code == 0
    text = " ".join(out.getvalue().split())
    assert text.startswith("usage: " + command.split()[0]), text[:80]
    assert " ".join(parser.description.split())[:60] in text


# commands that load no checkpoint to analyse it (they score files, prepare data, train, or only convert checkpoints)
NO_CHECKPOINT_ANALYSIS = {
    "fusion-aer", "fusion-average-checkpoints", "fusion-benchmark", "fusion-bleu-by-length", "fusion-compare",
    "fusion-convert-checkpoint", "fusion-parse-spans", "fusion-parse-trees", "fusion-prepare-gpt2", "fusion-prepare-text",
    "fusion-score-bleu", "fusion-score-m2", "fusion-score-rouge", "fusion-significance", "fusion-training-curve",
    "fusion-archs", "fusion-user-dir", "fusion-gpu-check", "fusion-gpu-speed", "fusion-fetch-data",
}
# analyses that read no binarized split: the weights only, or text files of their own (--parallel, --suite)
NO_SPLIT = {"fusion-exploitation-score", "fusion-layer-attention-map", "fusion-embedding-expressivity",
            "fusion-embedding-similarity-bilingual", "fusion-alignment-analysis", "fusion-contrastive-score",
            "fusion-contrastive-translate"}


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - NO_CHECKPOINT_ANALYSIS))
def test_analyses_share_checkpoint_options(command):
    """Every analysis that loads a checkpoint takes --path, --data, --out, --cpu and --model-overrides (and --split
    when it reads a binarized split), with the same meaning."""
    parser = parser_of(command)
    argv = ["--path", "a.pt", "--data", "bin", "--out", "res/x", "--cpu", "--model-overrides", "{'dropout': 0}"]
    if command not in NO_SPLIT:
        argv += ["--split", "valid", "--max-tokens", "123", "--sentences", "7"]
    given = {a for a in argv if a.startswith("--")}
    for action in parser._actions:  # the command's own required options get a dummy value
        if action.required and action.option_strings and not given & set(action.option_strings):
            argv += [action.option_strings[0], "x"]
    args = parser.parse_args(argv)
    assert args.path in ("a.pt", ["a.pt"]) and args.data == "bin" and args.out == "res/x" and args.cpu is True
    assert args.model_overrides == "{'dropout': 0}"
    if command not in NO_SPLIT:
        assert (args.split, args.max_tokens, args.sentences) == ("valid", 123, 7)
    assert parser.parse_args(argv[:argv.index("--cpu")] + argv[argv.index("--cpu") + 1:]).cpu is False


SAMPLING = sorted(set(COMMANDS) - NO_CHECKPOINT_ANALYSIS - NO_SPLIT | {"fusion-alignment-analysis"})


@pytest.mark.parametrize("command", SAMPLING)
def test_max_sentences_is_the_old_name_of_sentences(command):
    """An analysis' --sentences N is how many sentences it reads (fairseq-generate's --max-sentences is a batch size).
    The old name --max-sentences still sets it, with one warning line naming the new one; both together are refused
    (argparse's one line, exit 2)."""
    parser = parser_of(command)
    argv = []
    for action in parser._actions:
        if action.required and action.option_strings:
            argv += [action.option_strings[0], "x"]
    assert parser.parse_args(argv).sentences is None
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert parser.parse_args(argv + ["--sentences", "7"]).sentences == 7
    assert err.getvalue() == ""
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert parser.parse_args(argv + ["--max-sentences", "7"]).sentences == 7
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and "--max-sentences is deprecated" in lines[0] and "--sentences" in lines[0], lines
    with contextlib.redirect_stderr(io.StringIO()) as err, pytest.raises(SystemExit) as e:
        parser.parse_args(argv + ["--sentences", "7", "--max-sentences", "8"])
    assert e.value.code == 2 and "not allowed with argument" in err.getvalue()


def test_exploitation_score_takes_the_shared_options():
    """It refused --cpu before; it reads no split, so --split stays refused (argparse's one line, exit 2)."""
    parser = parser_of("fusion-exploitation-score")
    assert parser.parse_args(["--path", "a.pt", "--out", "o", "--cpu", "--data", "d"]).cpu is True
    with contextlib.redirect_stderr(io.StringIO()) as err, pytest.raises(SystemExit) as e:
        parser.parse_args(["--path", "a.pt", "--out", "o", "--split", "test"])
    assert e.value.code == 2 and "unrecognized arguments: --split test" in err.getvalue()
