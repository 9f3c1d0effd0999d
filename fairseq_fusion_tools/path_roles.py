"""Nothing the user gave is lost (issue 58): what each path option of a ``fusion-*`` command is to the user's files
(its role: an input it reads, an output it writes, or no path), and the one check, made on every ``fusion-*`` command
line when its parser has read it (``cli/__init__.py``), before any work, that no output

- is one of the command's inputs, directly, through a link (real paths, ``os.path.samefile``) or as a file it writes
  beside a prefix (``--out X`` writes ``X.json``: an input ``X.json`` is refused);
- names a folder where the command writes a file (a value ending in ``/`` means a folder);
- deletes or replaces a folder, or a file in a folder, that a running training holds (its ``training.lock``, taken by
  ``fairseq_fusion/guards/save_dir_lock.py``);
- replaces, with ``--overwrite``, a folder that holds inputs of the command, or anything but what this command wrote
  in it (the records ``.fusion-made.json`` and ``.fusion-made.N.json`` of ``record_made`` and ``record_added``, which
  ``prepare/destination.py`` writes).

The roles are one table, by option (``BY_NAME``) with the commands whose option means something else (``BY_COMMAND``);
``tests/test_no_loss.py`` fails when a parser has a string-valued option the table does not know, so a new command or
flag gets a role before it is released, and its matrix runs every command with an output against its inputs, a held
training lock and (with ``--overwrite``) a folder of other files. A command that finds more inputs than its command
line names (the checkpoints of a folder) declares them with ``read_from``; ``atomic_files.replacing``, the one writer
of result files, refuses to replace any input as a last guard (``check_replacing``). Refusals are one line
``fairseq-fusion: error: ...`` naming the flag, the path and why (``user_files.fail``). Standard library only at import:
the scorers run without torch and fairseq; the plugin's lock module is imported only where a lock file exists.
"""
import argparse
import json
import os
from typing import NamedTuple

from . import user_files
from .user_files import fail

LOCK_NAME = "training.lock"  # fairseq_fusion.guards.save_dir_lock.LOCK_NAME (not imported: it loads the plugin)
RECORD_NAME = ".fusion-made.json"  # what a command wrote into the folder it built (record_made)
WALK_LIMIT = 20000  # entries looked at below a folder an output would replace, for a training's lock


class Role(NamedTuple):
    """``kind``: input, output or none (not a path). ``shape``: for an input, file (or folder), folder, prefix (the
    files PREFIX.*), prefixes (comma-separated), named (NAME=FILE), labelled (FILE[=LABEL]); for an output, file
    (written whole, replacing one that is there: a result, a checkpoint, a README the command updates), prefix (the
    files OUT + each of ``writes``), folder (built and renamed into place; an old one replaced only with
    ``--overwrite``), work (created or added to; its own files reused). Every output's ``OUT.lock`` counts too."""
    kind: str
    shape: str = ""
    writes: tuple = ()


NOT_A_PATH = Role("none")
FILE = Role("input", "file")
FOLDER = Role("input", "folder")
PREFIX = Role("input", "prefix")
PREFIXES = Role("input", "prefixes")
NAMED = Role("input", "named")
LABELLED = Role("input", "labelled")
OUT_FILE = Role("output", "file")
RESULTS = Role("output", "prefix", (".json", ".png"))  # outputs.write_outputs
BUILT_FOLDER = Role("output", "folder")
WORK = Role("output", "work")

# every string-valued option of the fusion-* parsers (argparse's dest), by what it is wherever it appears
BY_NAME = {
    # inputs
    "path": FILE, "compare": FILE, "inputs": FILE, "input": FILE, "hyp": FILE, "ref": FILE, "src": FILE,
    "gold": FILE, "parallel": FILE, "bpe_codes": FILE, "suite": FILE, "phrase_trees": FILE, "lemmas": FILE,
    "key": FILE, "sense_patterns": FILE, "replace_unk": FILE, "lm_path": FILE, "dictionary": FILE,
    "alignment_text": FILE, "alignment_links": FILE, "parse": FILE, "bpe": FILE, "gpt2_encoder_json": FILE,
    "gpt2_vocab_bpe": FILE, "source_pos_tags": FILE, "target_pos_tags": FILE,
    "data": FOLDER, "model_dir": FOLDER, "gpt2_dir": FOLDER, "bpe_dir": FOLDER,
    "trainpref": PREFIX, "validpref": PREFIX, "testpref": PREFIXES, "add_test": PREFIXES, "raw_testpref": PREFIXES,
    "sys": NAMED, "baseline": NAMED, "logs": LABELLED,
    # outputs
    "out": RESULTS, "output": OUT_FILE, "readme": OUT_FILE, "destdir": BUILT_FOLDER, "work": WORK, "dest": WORK,
    # not paths: names, languages, lists, flags for other commands
    **{name: NOT_A_PATH for name in (
        "model_overrides", "labels", "split", "train_split", "valid_split", "gen_subset", "test_subsets", "subset",
        "source_lang", "target_lang", "lang", "file_langs", "pair", "arch", "archs", "ddp_archs", "compile_archs",
        "compile_backend", "dtypes", "stages", "max_tokens", "beams", "title", "buckets", "category", "modules",
        "layers", "sides", "metric", "sacrebleu_tokenize", "system", "train_args", "generate_args", "readme_marker",
        "retain_dropout_modules", "eos_token")},
}
# where a command's option is something else than BY_NAME says
BY_COMMAND = {
    ("fusion-benchmark", "out"): OUT_FILE,  # one JSON file
    ("fusion-score-bleu", "out"): Role("output", "prefix", (".json", ".detok")),
    ("fusion-contrastive-translate", "out"): Role("output", "prefix", (".json", ".png", ".hyp")),
    ("fusion-gpu-check", "out"): Role("output", "prefix", (".json", ".md")),
    ("fusion-gpu-speed", "out"): Role("output", "prefix", (".json", ".md")),
    ("fusion-compare", "ref"): NAMED,  # SUBSET=FILE
    ("fusion-compare", "baseline"): NOT_A_PATH,  # a system's name
}


def takes_a_string(action):
    """Whether ``action`` takes a free string value (a path, or a name): argparse's default type or ``str``, no
    choices; flags (store_true, counts, ...) and typed values are not."""
    return (action.nargs != 0 and action.choices is None and action.type in (None, str)
            and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)))


def role_of(prog, action):
    """The role of ``action`` in command ``prog``, or None where the table has none (``tests/test_no_loss.py``)."""
    return BY_COMMAND.get((prog, action.dest), BY_NAME.get(action.dest))


def label_of(action):
    return max(action.option_strings, key=len) if action.option_strings else action.dest.upper()


def _values(namespace, action):
    value = getattr(namespace, action.dest, None)
    values = value if isinstance(value, (list, tuple)) else [value]
    return [v for v in values if isinstance(v, str) and v]


def _input_paths(shape, value):
    """The paths an input value names (a prefix: every PREFIX.* file beside it, and PREFIX itself where it exists)."""
    if shape == "named":
        return [value.partition("=")[2] or value]
    if shape == "labelled":
        return [value.partition("=")[0]]
    if shape in ("prefix", "prefixes"):
        found = []
        for prefix in value.split(",") if shape == "prefixes" else [value]:
            folder, stem = os.path.split(os.path.abspath(prefix))
            try:
                names = os.listdir(folder)
            except OSError:
                names = []
            found += [prefix] * os.path.lexists(prefix) + [os.path.join(folder, n) for n in sorted(names)
                                                           if n.startswith(stem + ".")]
        return found
    return [value]


class Given(NamedTuple):
    label: str  # the flag (or positional) that named it
    value: str  # as given
    path: str  # the path it names


_FOUND = []  # (argv, Given) for the inputs a command found itself (read_from)


def inputs(parser, namespace):
    """Every input path of the command line (``Given``), with those ``read_from`` added for this command line."""
    found = []
    for action in parser._actions:
        role = role_of(parser.prog, action) if takes_a_string(action) else None
        if role is not None and role.kind == "input":
            found += [Given(label_of(action), v, p) for v in _values(namespace, action) for p in _input_paths(role.shape, v)]
    return found + [g for argv, g in _FOUND if argv == _argv()]


def _argv():
    import sys

    return list(sys.argv)


def _same(a, b):
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path, folder):
    """Whether ``path`` is ``folder`` or below it (real paths)."""
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def _link(a, b):
    """How ``a`` and ``b`` are one file: "" (the same name), " (through a link)", " (a hard link of it)"."""
    if os.path.realpath(a) != os.path.realpath(b):
        return " (a hard link of it)"
    return "" if os.path.abspath(a) == os.path.abspath(b) else " (through a link)"


# ------------------------------------------------------------------------------ a running training's folder
def _held(folder):
    """(lock file, who holds it) where a running training holds ``folder`` (its training.lock), else None."""
    lock = os.path.join(os.path.realpath(folder), LOCK_NAME)
    if not os.path.isfile(lock):
        return None
    from fairseq_fusion import file_locks  # here: the plugin package imports torch, the scorers need none

    if not file_locks.held_elsewhere(lock):
        return None
    from fairseq_fusion.guards import save_dir_lock

    found = save_dir_lock.holder(folder)
    return lock, (save_dir_lock.describe(found) + "; " if found else "")


def _held_below(folder):
    """(folder, lock, who) of the first folder at or below ``folder`` that a running training holds, else None."""
    seen = 0
    for root, dirs, files in os.walk(folder):
        if LOCK_NAME in files:
            held = _held(root)
            if held:
                return (root,) + held
        seen += len(dirs) + len(files)
        if seen > WALK_LIMIT:
            break
    return None


def _training_refusal(label, value, folder, lock, who, what):
    return (f"{label} {value}: {folder} is the --save-dir of a running training ({who}lock file {lock}): {what}; wait "
            f"until it has finished (or stop it), or give another {label}")


# ------------------------------------------------------------------------------ what a command wrote in its folder
def record_made(folder, command=None):
    """Write ``folder/.fusion-made.json``: ``command`` (this command line's) made ``folder`` and wrote the files in it
    now (relative paths). ``--overwrite`` replaces a folder only where it holds no other file."""
    files = sorted(os.path.relpath(os.path.join(root, f), folder) for root, _, names in os.walk(folder) for f in names
                   if not (root == folder and f == RECORD_NAME))
    _write_record(os.path.join(folder, RECORD_NAME), {"command": command or current_prog(), "files": files})


def record_added(staging, folder):
    """The files of ``staging`` that the folder's own command adds to ``folder`` (``--add-test``), in a record of their
    own staged with them (``.fusion-made.N.json``: the folder's files are never rewritten); none where ``folder`` has
    no record."""
    record = _read_record(os.path.join(folder, RECORD_NAME))
    if record is None:
        return
    taken = [int(n.split(".")[2]) for n in os.listdir(folder) if _added_record(n)]
    name = f"{RECORD_NAME[:-len('.json')]}.{max(taken, default=0) + 1}.json"
    files = sorted(os.path.relpath(os.path.join(root, f), staging) for root, _, names in os.walk(staging) for f in names)
    _write_record(os.path.join(staging, name), {"command": record["command"], "files": files})


def _added_record(name):
    parts = name.split(".")
    return len(parts) == 4 and name.startswith(RECORD_NAME[:-len("json")]) and parts[2].isdigit() and parts[3] == "json"


def _write_record(path, record):
    with open(path + ".part", "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    os.replace(path + ".part", path)


def _read_record(path):
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    ok = isinstance(record, dict) and isinstance(record.get("files"), list) and isinstance(record.get("command"), str)
    return record if ok else None


def _records(folder):
    """(the command that made ``folder``, the files its records list, the record files) or None without a record."""
    record = _read_record(os.path.join(folder, RECORD_NAME))
    if record is None:
        return None
    names = [RECORD_NAME] + [n for n in os.listdir(folder) if _added_record(n)]
    files = set(record["files"])
    for name in names[1:]:
        added = _read_record(os.path.join(folder, name))
        if added is not None and added["command"] == record["command"]:
            files |= set(added["files"])
    return record["command"], files, set(names)


def not_made_by(prog, folder):
    """What is in ``folder`` that ``prog`` did not write there (files, and empty folders): everything where no record
    says that ``prog`` made it."""
    records = _records(folder)
    command, mine, names = records if records else ("", set(), set())
    if command != prog:
        mine, names = set(), {RECORD_NAME}
    found = []
    for root, dirs, files in os.walk(folder):
        found += [os.path.relpath(os.path.join(root, n), folder) for n in files]
        found += [os.path.relpath(os.path.join(root, d), folder) + os.sep for d in dirs
                  if not os.listdir(os.path.join(root, d))]
    return sorted(f for f in found if f not in names and f not in mine)


def current_prog():
    parsed = user_files._PARSED[0]
    if parsed is not None and parsed[2] == _argv():
        return parsed[0].prog
    import sys

    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""


def _some(paths, n=3):
    return ", ".join(paths[:n]) + (f" and {len(paths) - n} more" if len(paths) > n else "")


# ------------------------------------------------------------------------------ the check
def check(parser, namespace):
    """Refuse, in one line naming the flag, the path and why, an output of this command line that would lose what the
    user gave (module docstring). Called by ``cli/__init__.py`` on every fusion-* parse of the command line."""
    prog = parser.prog
    given = None
    for action in parser._actions:
        role = role_of(prog, action) if takes_a_string(action) else None
        if role is None or role.kind != "output":
            continue
        for value in _values(namespace, action):
            given = inputs(parser, namespace) if given is None else given
            _check_output(prog, label_of(action), value, role, given, bool(getattr(namespace, "overwrite", False)))


def _check_output(prog, label, value, role, given, overwrite):
    if role.shape in ("file", "prefix"):
        names_folder = value.endswith(os.sep) or (os.altsep and value.endswith(os.altsep)) or os.path.isdir(value)
        if names_folder:
            held = os.path.isdir(value) and _held(value)
            if held:
                fail(_training_refusal(label, value, os.path.realpath(value), *held, "it would be written into"))
            what = "a file" if role.shape == "file" else f"a file prefix ({prog} writes {', '.join('OUT' + s for s in role.writes)})"
            why = "ends in /, which names a folder" if not os.path.isdir(value) else "is a folder"
            fail(f"{label} {value} {why}; expected {what}: give a name in it, e.g. {os.path.join(value, 'NAME')}")
    targets = [value]
    if role.shape == "prefix":
        targets += [value + suffix for suffix in role.writes]
    targets.append(value + ".lock")
    lost = {"folder": "replaced", "work": "written into"}.get(role.shape, "overwritten")
    for target in targets:
        for g in given:
            if _same(target, g.path):
                written = "" if target == value else f" writes {target}, which"
                fail(f"{label} {value}{written} is also {g.label} {g.value}{_link(target, g.path)}: that input would be "
                     f"{lost}; give another {label}")
    if role.shape == "work":
        held = os.path.isdir(value) and _held(value)
        if held:
            fail(_training_refusal(label, value, os.path.realpath(value), *held, "it would be written into"))
        return
    if role.shape == "folder":
        if not os.path.isdir(value) or not os.listdir(value):
            return
        held = _held_below(value)
        if held:
            fail(_training_refusal(label, value, *held, "its checkpoints would be deleted"))
        if not overwrite:
            return  # the command's own check: a folder that holds anything is refused, or added to (--add-test)
        inside = [g for g in given if os.path.lexists(g.path) and _inside(g.path, value)]
        if inside:
            g = inside[0]
            fail(f"{label} {value} --overwrite would delete {g.label} {g.value}, an input of this command "
                 f"({_some(list(dict.fromkeys(os.path.realpath(x.path) for x in inside)))}): give another {label}")
        others = not_made_by(prog, value)
        if others:
            whose = ("" if _records(value) else
                     f" (it has no {RECORD_NAME}, the record {prog} keeps of what it wrote in a folder it made)")
            fail(f"{label} {value} --overwrite would delete files {prog} did not write there: {_some(others)}{whose}; "
                 f"move them out, or give another {label}")
        return
    for target in targets:  # a file, or a prefix's files: replacing one in a running training's folder
        held = os.path.lexists(target) and _held(os.path.dirname(os.path.abspath(target)))
        if held:
            fail(_training_refusal(label, value, os.path.dirname(os.path.realpath(target)), *held,
                                   f"{target} would be replaced"))


# ------------------------------------------------------------------------------ inputs found later, the last guard
def read_from(label, paths):
    """Inputs a command found itself (``--inputs DIR --num-epoch-checkpoints N``: the checkpoints of ``DIR``), said as
    soon as they are known, before any work: an output that is one of them is refused as one given directly."""
    parsed = user_files._PARSED[0]
    _FOUND[:] = [(argv, g) for argv, g in _FOUND if argv == _argv()]
    _FOUND.extend((_argv(), Given(label, p, p)) for p in paths)
    if parsed is not None and parsed[2] == _argv():
        check(parsed[0], parsed[1])


def check_replacing(path):
    """Refuse to replace ``path`` where it is an input of the running fusion-* command line (``atomic_files``, before it
    writes a result): the last guard for an output the command derives from other values."""
    parsed = user_files._PARSED[0]
    if parsed is None or parsed[2] != _argv() or not os.path.lexists(path):
        return
    for g in inputs(parsed[0], parsed[1]):
        if _same(path, g.path):
            fail(f"{parsed[0].prog} would replace {path}, which is {g.label} {g.value}{_link(path, g.path)}: that input "
                 "would be overwritten; give another output")
