"""One domain per option (issue 58, item 1; fairseq_fusion/guards/option_domains.py, option_domain_table.py and option_checks.py), and
the first layer of its matrix (item 5): the domain checker over every option of every parser.

The parsers are fairseq's own as its commands build them: fairseq-preprocess; fairseq-train for each task of the
translation family with the plugin's arch and fairseq's transformer, and for every registered component (optimizer,
scheduler, criterion, tokenizer, BPE, scoring) in turn; fairseq-generate, -interactive and -validate; and every
``fusion-*`` command's. A new option of any of them without a domain fails the first test."""
import argparse
import functools
import math

import pytest

from conftest import write_dicts
from fairseq_fusion.guards import option_checks
from fairseq_fusion.guards.option_domains import Each, Number, Path, Text
from fairseq_fusion_tools import path_roles
from test_mistakes import files  # noqa: F401  (the mistakes matrix's inputs, a module fixture)
from test_no_loss import all_commands, parser_of

TASKS = ("translation", "translation_with_phrases", "translation_switchout")
ARCHS = ("fusion_transformer", "transformer")
# components fairseq 0.12 cannot parse at all (their own defaults fail): nothing a user can run
FAIRSEQ_UNPARSABLE = {("criterion", "composite_loss"), ("lr_scheduler", "triangular")}


def _parse(parser, argv):
    """fairseq's ``parse_args_and_arch`` itself (not the plugin's wrapper, which would check the values)."""
    from fairseq import options

    parse = getattr(options.parse_args_and_arch, "__wrapped__", options.parse_args_and_arch)
    return parse(parser, argv)


@functools.lru_cache(maxsize=None)
def fairseq_parsers(data):
    """(command, parser, components) of every fairseq entry point, per component choice; and the components fairseq
    could not parse."""
    from fairseq import options
    from fairseq.registry import REGISTRIES

    rows, unparsable = [("fairseq-preprocess", options.get_preprocessing_parser(), {})], set()

    def add(command, make, argv, component=None):
        parser = make()
        try:
            args = _parse(parser, [data, *argv])
        except (SystemExit, Exception):  # noqa: BLE001 - fairseq's own defaults of that component fail
            unparsable.add(component)
            return
        rows.append((command, parser, option_checks.components_of(args)))

    for task in TASKS:
        for arch in ARCHS:
            add("fairseq-train", options.get_training_parser, ["--task", task, "--arch", arch])
    for kind, registry in sorted(REGISTRIES.items()):
        if kind != "task":
            for name in sorted(registry["registry"]):
                add("fairseq-train", options.get_training_parser,
                    ["--arch", ARCHS[0], "--" + kind.replace("_", "-"), name], (kind, name))
    add("fairseq-generate", options.get_generation_parser, ["--path", "x.pt"])
    add("fairseq-interactive", options.get_interactive_generation_parser, ["--path", "x.pt"])
    add("fairseq-validate", options.get_validation_parser, ["--path", "x.pt", "--task", "translation"])
    return rows, unparsable


@pytest.fixture(scope="module")
def parsers(tmp_path_factory):
    data = write_dicts(tmp_path_factory.mktemp("domains"), 8)
    rows, unparsable = fairseq_parsers(data)
    tools = [(command, parser_of(command), {}) for command in all_commands()]
    return rows + tools, unparsable


def takes_a_value(action):
    return action.nargs != 0 and not isinstance(action, (argparse._HelpAction, argparse._VersionAction))


def domain(command, action, components):
    """The option's domain: its choices (argparse's), a flag of the plugin's (fusion_options), a fusion-* path
    (path_roles), else the table's."""
    tool = command.startswith("fusion-")
    if action.choices is not None:
        return "choices"
    flag = option_checks.plugin_flag(action.dest)
    if flag is not None and (flag.choices is not None or flag.bounds is not None or flag.type is not str):
        return "plugin flag"
    if tool and path_roles.takes_a_string(action):
        return path_roles.role_of(command, action)
    return option_checks.domain_of(action.dest, components, command if tool else None)


def test_every_option_of_every_entry_point_has_a_domain(parsers):
    rows, unparsable = parsers
    assert unparsable == FAIRSEQ_UNPARSABLE  # every other component's parser is looked at
    missing = sorted({f"{command} --{a.dest.replace('_', '-')}" for command, parser, components in rows
                      for a in parser._actions if takes_a_value(a) and domain(command, a, components) is None})
    assert missing == [], "options without a domain (option_domain_table.py): " + ", ".join(missing)
    # and the table names nothing that no parser has
    from fairseq_fusion.guards import option_domain_table as table

    dests = {a.dest for _, parser, _ in rows for a in parser._actions}
    commands = {(command, a.dest) for command, parser, _ in rows for a in parser._actions}
    stale = sorted(set(table.BY_NAME) - dests) + sorted(str(k) for k in set(table.BY_COMMAND) - commands)
    assert stale == [], f"domains of options no parser has: {stale}"
    # a numeric option is a number's domain, never text
    texts = sorted({f"{command} --{a.dest}" for command, parser, components in rows for a in parser._actions
                    if a.type in (int, float) and a.choices is None
                    and isinstance(domain(command, a, components), (Text, Path))})
    assert texts == [], f"numeric options whose domain is text or a path: {texts}"


def test_every_default_lies_in_its_domain(parsers):
    """fairseq's own defaults (and the fusion-* commands') are values with a meaning: each must be in the domain the
    table gives, or the table is wrong (an independent reading of every range)."""
    rows, _ = parsers
    outside = set()
    for command, parser, components in rows:
        tool = command.startswith("fusion-")
        for action in parser._actions:
            value = action.default
            if not takes_a_value(action) or value in (None, argparse.SUPPRESS) or isinstance(value, bool):
                continue
            if tool and path_roles.takes_a_string(action):
                continue  # a name or a path (path_roles)
            if isinstance(option_checks.domain_of(action.dest, components, None if not tool else command), Path):
                continue  # a path's default is a name to create or look for, not a file that must exist
            wrong = option_checks.refusal(action.dest, value, components, command if tool else None)
            if wrong is not None:
                outside.add(f"{command} --{action.dest} {value!r}: {wrong}")
    assert sorted(outside) == []


BAD = ("nan", "inf", "-inf", "")  # never a number of any domain
PROBES = ("0", "-1", "1e30") + BAD


def _converted(action, text):
    """``text`` as the parser converts it (None: the parser itself refuses it, one line of argparse's)."""
    try:
        value = action.type(text) if action.type is not None else text
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return None
    return [value] if action.nargs in ("+", "*") else value


def test_every_numeric_option_refuses_nan_infinity_and_nothing_in_one_line(parsers):
    """The checker over every option of every parser with 0, -1, a huge value, NaN, infinity and an empty value:
    NaN, infinity and nothing are never a number (refused by the parser's type or the domain, whose line names the
    option and the value); a negative value or 0 outside the range is taken only where the domain says what it means
    (the refusal of other values names it)."""
    rows, _ = parsers
    taken, cases = [], 0
    for command, parser, components in rows:
        tool = command.startswith("fusion-")
        for action in parser._actions:
            d = domain(command, action, components)
            if not takes_a_value(action) or not isinstance(d, (Number, Each)):
                continue
            names = [s for a in parser._actions if a.dest == action.dest for s in a.option_strings]  # aliases too
            labels = tuple(f"fairseq-fusion: error: {s} " for s in names or [action.dest.upper()])
            for text in PROBES:
                value = _converted(action, text)
                cases += 1
                if value is None:
                    continue
                try:
                    option_checks.check_namespace(argparse.Namespace(**components, **{action.dest: value}), parser,
                                                   command if tool else None)
                except option_checks.FusionError as e:
                    line = str(e)
                    assert "\n" not in line and line.startswith(labels), line
                    continue
                number = float(text) if text else math.nan
                if not math.isfinite(number):
                    taken.append(f"{command} --{action.dest} {text!r}")
                elif number <= 0 and isinstance(d, Number) and not d._in_range(number):
                    assert any(v == number for v, _ in d.means), f"{command} --{action.dest} {text} taken without a meaning"
    assert taken == [], f"NaN, infinity or nothing taken: {taken}"
    assert cases > 2000  # every numeric option of ~60 parsers, 7 values each


@pytest.mark.parametrize("values, components, line", [
    ({"dropout": 1.5}, {}, "--dropout 1.5: expected a probability in [0, 1)"),
    ({"label_smoothing": 2.0}, {}, "--label-smoothing 2: expected a probability in [0, 1)"),
    ({"warmup_updates": 0}, {"lr_scheduler": "inverse_sqrt"},
     "--warmup-updates 0: expected an integer >= 1 with --lr-scheduler inverse_sqrt"),
    ({"seed": -1}, {}, "--seed -1: expected a seed in [0, 4294967295]"),
    ({"lr": [-1.0]}, {}, "--lr -1: expected each value a number > 0 (-1 is not)"),
    ({"max_update": -5}, {}, "--max-update -5: expected a number of updates >= 0 (0: no limit)"),
    ({"patience": -3}, {}, "--patience -3: expected an integer >= 1, or -1 (off), or 0 (off, as fairseq reads it)"),
    ({"adam_betas": "(0.9, 1.5)"}, {}, "--adam-betas (0.9, 1.5): expected each value a probability in [0, 1) (1.5 is not)"),
    ({"encoder_embed_dim": 512, "encoder_attention_heads": 3}, {},
     "--encoder-embed-dim 512, --encoder-attention-heads 3: expected an embedding size divisible by the number of heads"),
])
def test_the_issues_values_are_refused_naming_flag_value_and_domain(values, components, line):
    with pytest.raises(option_checks.FusionError) as e:
        option_checks.check(values, components)
    assert str(e.value) == "fairseq-fusion: error: " + line


@pytest.mark.parametrize("values, components", [
    ({"max_update": 0, "max_epoch": 0, "stop_time_hours": 0}, {}),  # fairseq's no limit
    ({"warmup_updates": 0}, {"lr_scheduler": "polynomial_decay"}),  # no warmup there
    ({"patience": -1, "keep_last_epochs": -1, "sampling_topk": -1, "diverse_beam_groups": -1}, {}),
])
def test_fairseqs_own_meanings_are_kept(values, components):
    option_checks.check(values, components)


# ---- the matrix's process layer for domains (item 5): each entry point, one case per domain class -----------------
# every fusion-* command's typed options, each with a value outside its domain; fairseq's entry points, one value per
# class of domain (a range, a budget whose 0 is no limit, a component's own, a list, a pair, a value with a meaning,
# a seed, NaN, infinity, a relation, an input file, an output). Each: exit != 0, one line naming the option and the
# value, no traceback, within its time limit, every input byte for byte as it was.
CASE_SECONDS = 60


def outside(d):
    """A value outside domain ``d`` (text, as typed), or None where every number is in it."""
    d = d.number if isinstance(d, Each) else d
    if d.low is None and d.high is None:
        return None if d.integer else "nan"
    if d.low is not None:
        value, step = d.low - (0 if d.low_open else 1), -1
    else:
        value, step = d.high + (0 if d.high_open else 1), 1
    while any(value == v for v, _ in d.means):
        value += step
    return str(int(value)) if d.integer or float(value).is_integer() else str(value)


def tool_cases():
    from test_mistakes import VALID

    cases = []
    for command in sorted(VALID):
        parser = parser_of(command)
        for action in parser._actions:
            d = domain(command, action, {})
            if action.option_strings and takes_a_value(action) and isinstance(d, (Number, Each)) and outside(d):
                cases.append((command, action.option_strings[0], outside(d)))
    return cases


TOOL_CASES = tool_cases()


def snapshot(argv):
    """SHA-256 of every file an argument names (a folder: every file below it; NAME=FILE: FILE)."""
    import hashlib
    import os

    seen = {}
    for token in argv:
        path = token.partition("=")[2] if "=" in token and not token.startswith("-") else token
        paths = [path] if os.path.isfile(path) else [os.path.join(r, n) for r, _, ns in os.walk(path) for n in ns]
        for p in paths:
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    seen[p] = hashlib.sha256(f.read()).hexdigest()
    return seen


def refused_in_one_line(argv, *words):
    from conftest import run_cli, time_limit
    from fairseq_fusion.errors import PREFIX

    before = snapshot(argv)
    with time_limit(CASE_SECONDS):
        proc = run_cli(argv, check=False)
    last = (proc.stderr.strip().splitlines() or [""])[-1]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and last.startswith(PREFIX), \
        f"exit {proc.returncode}; last line {last!r}\n{proc.stderr[-2500:]}"
    assert [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)] == [last], proc.stderr[-2500:]
    assert all(w in last for w in words), f"{last!r} does not name {words}"
    after = snapshot(argv)
    assert {p: after.get(p) for p in before} == before, "an input changed"
    return last


@pytest.mark.parametrize("command, flag, value", TOOL_CASES, ids=[" ".join(c) for c in TOOL_CASES])
def test_each_fusion_command_refuses_a_value_outside_its_domain_in_one_line(files, tmp_path, command, flag, value):  # noqa: F811
    from test_mistakes import VALID, fill

    f = dict(files, out=str(tmp_path))
    argv = without_rivals(parser_of(command), [fill(a, f) for a in VALID[command]], flag)
    refused_in_one_line([command] + argv + [flag, value], f"{flag} {value}: expected")


def without_rivals(parser, argv, flag):
    """``argv`` without the options that argparse allows no beside ``flag`` (its mutually exclusive group's)."""
    rivals = {s for group in parser._mutually_exclusive_groups if flag in
              [s for a in group._group_actions for s in a.option_strings]
              for a in group._group_actions if flag not in a.option_strings for s in a.option_strings}
    kept, skip = [], False
    for i, token in enumerate(argv):
        if skip:
            skip = token.startswith("-") and False
            continue
        if token in rivals:
            skip = parser._option_string_actions[token].nargs != 0
            continue
        kept.append(token)
    return kept


# (entry point, the options added to its valid command line, the words its one line must hold); {missing}: a path
# that does not exist, {folder}: a folder, {a_file}: a file
FAIRSEQ_CASES = [
    ("train", ["--dropout", "1.5"], "--dropout 1.5: expected a probability"),
    ("train", ["--max-update", "-5"], "--max-update -5: expected a number of updates >= 0 (0: no limit)"),
    ("train", ["--warmup-updates", "0"], "--warmup-updates 0: expected an integer >= 1 with --lr-scheduler inverse_sqrt"),
    ("train", ["--lr", "-1"], "--lr -1: expected each value a number > 0"),
    ("train", ["--adam-betas", "(0.9,1.5)"], "--adam-betas (0.9,1.5): expected each value a probability"),
    ("train", ["--patience", "-3"], "--patience -3: expected an integer >= 1, or -1 (off)"),
    ("train", ["--seed", "-1"], "--seed -1: expected a seed"),
    ("train", ["--label-smoothing", "nan"], "--label-smoothing nan: expected a probability"),
    ("train", ["--clip-norm", "inf"], "--clip-norm inf: expected a number >= 0"),
    ("train", ["--update-freq", "0"], "--update-freq 0: expected each value an integer >= 1"),
    ("train", ["--encoder-attention-heads", "3"], "--encoder-embed-dim 32, --encoder-attention-heads 3: expected"),
    ("train", ["--encoder-embed-path", "{missing}"], "--encoder-embed-path {missing}: no such file"),
    ("train", ["--log-file", "{folder}"], "--log-file {folder}: a folder, expected a file"),
    ("train", ["--max-tokens-valid", "abc"], "--max-tokens-valid abc: expected a number of tokens per batch"),
    ("train", ["--lr-scheduler", "triangular"], "--max-lr is required here: it has no default"),
    ("train without --optimizer", [], "--optimizer is required"),
    ("generate", ["--beam", "0"], "--beam 0: expected a number of hypotheses"),
    ("generate", ["--sampling-topp", "2"], "--sampling-topp 2: expected a probability in (0, 1], or -1 (off)"),
    ("generate", ["--lenpen", "nan"], "--lenpen nan: expected a finite number"),
    ("generate", ["--replace-unk", "{missing}"], "--replace-unk {missing}: no such file"),
    ("interactive", ["--nbest", "0"], "--nbest 0: expected a number of hypotheses printed"),
    ("interactive", ["--temperature", "0"], "--temperature 0: expected a number > 0"),
    ("interactive", ["--buffer-size", "-1"], "--buffer-size -1: expected a count"),
    ("validate", ["--max-tokens", "0"], "--max-tokens 0: expected a number of tokens per batch"),
    ("validate without --task", [], "fairseq-validate: expected --task TASK"),
    ("preprocess", ["--workers", "-1"], "--workers -1: expected an integer >= 1"),
    ("preprocess", ["--thresholdsrc", "-1"], "--thresholdsrc -1: expected a count"),
    ("preprocess", ["--nwordssrc", "-5"], "--nwordssrc -5: expected an integer >= 1, or -1 (every word)"),
    ("preprocess", ["--srcdict", "{missing}"], "--srcdict {missing}: no such file"),
    ("preprocess", ["--trainpref", "{missing}"], "--trainpref {missing}: no file {missing}.*"),
    ("preprocess", ["--destdir", "{a_file}"], "--destdir {a_file}: a file, expected a folder"),
]


def entry_points(data, checkpoint, tmp):
    """The valid command line of each entry point of FAIRSEQ_CASES."""
    import os

    from conftest import REPO, train_args

    user_dir = os.path.join(REPO, "fairseq_fusion")
    train = train_args(data, os.path.join(tmp, "ck"), max_update=2)
    at = train.index("--optimizer")
    validate = ["fairseq-validate", data, "--user-dir", user_dir, "--path", checkpoint, "--cpu"]
    return {
        "train": train, "train without --optimizer": train[:at] + train[at + 2:],
        "generate": ["fairseq-generate", data, "--user-dir", user_dir, "--path", checkpoint, "--cpu", "--gen-subset", "test"],
        "interactive": ["fairseq-interactive", data, "--user-dir", user_dir, "--path", checkpoint, "--cpu"],
        "validate": validate + ["--task", "translation"], "validate without --task": validate,
        "preprocess": ["fairseq-preprocess", "--user-dir", user_dir, "-s", "en", "-t", "de", "--trainpref",
                       os.path.join(data, "tok", "train"), "--destdir", os.path.join(tmp, "bin")],
    }


@pytest.mark.parametrize("entry, extra, words", FAIRSEQ_CASES, ids=[f"{e}: {' '.join(x)}" for e, x, _ in FAIRSEQ_CASES])
def test_each_entry_point_refuses_a_value_outside_its_domain_in_one_line(multi30k_slice, tiny_checkpoint, tmp_path,
                                                                          entry, extra, words):
    import os

    paths = {"missing": str(tmp_path / "no-such"), "folder": str(tmp_path),
             "a_file": os.path.join(multi30k_slice, "dict.en.txt")}
    base = entry_points(multi30k_slice, tiny_checkpoint, str(tmp_path))[entry]
    refused_in_one_line(base + [x.format(**paths) for x in extra], words.format(**paths))
    assert not any(n in ("ck", "bin") for n in os.listdir(tmp_path))  # refused before any work


def test_the_hub_refuses_a_keyword_outside_its_domain(multi30k_slice, tiny_checkpoint):
    import os

    from fairseq_fusion.errors import FusionError
    from fairseq_fusion.models.fusion_transformer import FusionTransformerModel

    folder, name = os.path.split(tiny_checkpoint)
    with pytest.raises(FusionError, match=r"^fairseq-fusion: error: max_len_b=-3: expected a count >= 0$"):
        FusionTransformerModel.from_pretrained(folder, name, multi30k_slice, bpe="prepared", max_len_b=-3)
    mt = FusionTransformerModel.from_pretrained(folder, name, multi30k_slice, bpe="prepared")
    with pytest.raises(FusionError, match=r"^fairseq-fusion: error: sampling_topp=2: expected a probability"):
        mt.translate("a dog .", sampling=True, sampling_topp=2.0)
    assert mt.translate("a dog .", beam=2)  # the same hub still translates
