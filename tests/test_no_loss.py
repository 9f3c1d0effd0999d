"""Nothing the user gave is lost (issue 58, item 3; fairseq_fusion_tools/path_roles.py): no fusion-* command deletes or
overwrites an input, a folder a running training holds, or (with --overwrite) a folder it did not make.

The matrix is generated: every fusion-* command with an output option (its role in path_roles's table), from its
minimal valid command line (test_mistakes.VALID), gets that output pointed at each of its inputs (a copy: directly,
through a symbolic link, through a hard link, and, for a prefix, as the input its OUT.json would be), at a folder a
running training holds, and (with --overwrite) at a folder it did not make. Each must exit != 0 with one line naming
the output flag, no traceback, within its time limit, and every input byte for byte as it was."""
import hashlib
import importlib
import os
import shutil

import pytest

from conftest import run_cli, time_limit
from fairseq_fusion.errors import PREFIX
from fairseq_fusion_tools import path_roles
from test_mistakes import VALID, files  # noqa: F401  (files: the module fixture of the mistakes matrix's inputs)
from test_save_dir_lock import hold

CASE_SECONDS = 60  # a refusal comes before any work: seconds; a command that goes on would train or translate


def parser_of(command):
    module = importlib.import_module("fairseq_fusion_tools.cli." + command[len("fusion-"):].replace("-", "_"))
    return module.get_parser()


def all_commands():
    import tomllib

    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    return sorted(c for c in scripts if c.startswith("fusion-") and c != "fusion-user-dir")


def test_every_path_option_of_every_command_has_a_role():
    """A string-valued option (a path, or a name) without a role in path_roles's table fails here: a new command or
    flag is covered by the check only once the table says what it is. And the table names nothing no parser has."""
    missing, used = [], set()
    for command in all_commands():
        parser = parser_of(command)
        for action in parser._actions:
            if not path_roles.takes_a_string(action):
                continue
            if path_roles.role_of(parser.prog, action) is None:
                missing.append(f"{command} {path_roles.label_of(action)}")
            used.add((command, action.dest) if (command, action.dest) in path_roles.BY_COMMAND else action.dest)
    assert missing == [], "options without a role (path_roles.BY_NAME / BY_COMMAND): " + ", ".join(missing)
    stale = [k for k in list(path_roles.BY_NAME) + list(path_roles.BY_COMMAND) if k not in used]
    assert stale == [], f"roles of options no parser has: {stale}"
    assert set(VALID) == set(all_commands())  # the matrix below starts from every command


def test_the_lock_name_is_the_trainings():
    from fairseq_fusion.guards import save_dir_lock

    assert path_roles.LOCK_NAME == save_dir_lock.LOCK_NAME


# ---- the matrix -------------------------------------------------------------------------------------------------
def options_in(command, argv):
    """(flag, index of its first value in ``argv``, role) of every option of ``argv`` with a path role; positionals
    are the tokens no option takes, given to the parser's positionals in order."""
    parser = parser_of(command)
    found, taken, i = [], set(), 0
    while i < len(argv):
        action = parser._option_string_actions.get(argv[i])
        if action is None:
            i += 1
            continue
        taken.update(range(i, i + 1 + (action.nargs != 0)))
        if path_roles.takes_a_string(action):
            role = path_roles.role_of(command, action)
            if role.kind != "none":
                found.append((argv[i], i + 1, role))
        i += 1
    positionals = [a for a in parser._actions if not a.option_strings]
    free = [j for j in range(len(argv)) if j not in taken]
    for action, j in zip(positionals, free):
        role = path_roles.role_of(command, action)
        if path_roles.takes_a_string(action) and role.kind != "none":
            found.append((path_roles.label_of(action), j, role))
    return found


def placeholder(token):
    """The fixture file a token names: ``{name}`` or ``NAME={name}``, else None."""
    value = token.partition("=")[2] if "=" in token else token
    return value[1:-1] if value.startswith("{") and value.endswith("}") and "/" not in value else None


SUITE_FOLDERS = {"suite", "mucow"}  # the contrastive suites given to a file role: folders (no hard link)
CASES = []  # (command, case, output flag, input flag)
for _command, _argv in sorted(VALID.items()):
    _options = options_in(_command, _argv)
    _ins = [(flag, i, role) for flag, i, role in _options if role.kind == "input" and placeholder(_argv[i])]
    for _out, _oi, _role in [o for o in _options if o[2].kind == "output"]:
        for _flag, _at, _in_role in _ins:
            a_file = _in_role.shape in ("file", "named", "labelled") and placeholder(_argv[_at]) not in SUITE_FOLDERS
            CASES.append((_command, "is the input", _out, _flag))
            CASES.append((_command, "is the input through a symbolic link", _out, _flag))
            if _role.shape in ("file", "prefix") and a_file:
                CASES.append((_command, "is the input through a hard link", _out, _flag))
            if _role.shape == "prefix" and a_file:
                CASES.append((_command, f"writes OUT{_role.writes[0]}, the input", _out, _flag))
            if _role.shape == "folder":
                CASES.append((_command, "is the input, --overwrite", _out, _flag))
                CASES.append((_command, "is the input through a symbolic link, --overwrite", _out, _flag))
        CASES.append((_command, "is a running training's folder", _out, None))
        if _role.shape in ("file", "prefix"):
            CASES.append((_command, "ends in / (a folder)", _out, None))
        if _role.shape == "file":
            CASES.append((_command, "replaces a file of a running training", _out, None))
        if _role.shape == "folder":
            CASES.append((_command, "is a running training's folder, --overwrite", _out, None))
            CASES.append((_command, "--overwrite of a folder of other files", _out, None))
            CASES.append((_command, "--overwrite of a prepared folder with a file of the user's", _out, None))
            CASES.append((_command, "--overwrite of a prepared folder without its record", _out, None))


def _copy(path, dest):
    """A copy of the file or folder ``path`` (a prefix: its PREFIX.* files) at ``dest``; returns the copy's path."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if os.path.isdir(path):
        shutil.copytree(path, dest, symlinks=True)
    elif os.path.exists(path):
        shutil.copy2(path, dest)
    else:  # a prefix
        folder, stem = os.path.split(path)
        for name in os.listdir(folder):
            if name.startswith(stem + "."):
                shutil.copy2(os.path.join(folder, name), os.path.join(os.path.dirname(dest), os.path.basename(dest) +
                                                                       name[len(stem):]))
    return dest


def hashes(paths):
    """sha256 of every readable file at or under each of ``paths`` (a prefix: its PREFIX.* files)."""
    out = {}
    for path in paths:
        if not os.path.exists(path):
            folder, stem = os.path.split(path)
            paths_here = [os.path.join(folder, n) for n in os.listdir(folder) if n.startswith(stem + ".")] \
                if os.path.isdir(folder) else []
        else:
            paths_here = [path]
        for p in paths_here:
            walked = [(p, [], [""])] if os.path.isfile(p) else os.walk(p)
            for root, _, names in walked:
                for name in names:
                    f = os.path.join(root, name) if name else root
                    if os.path.isfile(f) and os.access(f, os.R_OK):
                        with open(f, "rb") as fh:
                            out[os.path.realpath(f)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def build_case(f, tmp, command, case, out_flag, in_flag):
    """(argv, the paths whose files must stay as they were, held lock or None) of one case of the matrix."""
    argv = list(VALID[command])
    options = {flag: (i, role) for flag, i, role in options_in(command, argv)}
    out_at, out_role = options[out_flag]
    values = dict(f, out=str(tmp / "res"))
    lock = None
    if in_flag is not None:
        in_at, in_role = options[in_flag]
        name = placeholder(argv[in_at])
        original = values[name]
        copy_name = os.path.basename(original.rstrip("/")) or name
        if case.startswith("writes OUT"):
            copy_name = "mine" + out_role.writes[0]
        copy = _copy(original, str(tmp / "in" / copy_name))
        argv[in_at] = argv[in_at].replace("{" + name + "}", copy)
        target = copy
        if out_role.shape in ("folder", "work") and not os.path.isdir(copy):
            target = os.path.dirname(copy)  # the folder that holds the input's files
        if case.startswith("writes OUT"):
            target = copy[:-len(out_role.writes[0])]
        elif "symbolic link" in case:
            os.symlink(target, str(tmp / "link"))
            target = str(tmp / "link")
        elif "hard link" in case:
            os.link(target, str(tmp / "hard"))
            target = str(tmp / "hard")
        argv[out_at] = target
    elif case.startswith("ends in /"):
        argv[out_at] = str(tmp / "results") + "/"
    elif "running training" in case:
        held = str(tmp / "checkpoints")
        os.makedirs(held)
        with open(os.path.join(held, "checkpoint_last.pt"), "wb") as fh:
            fh.write(b"a checkpoint of a running training")
        lock = hold(held)
        argv[out_at] = os.path.join(held, "checkpoint_last.pt") if case.startswith("replaces") else held
    else:  # --overwrite of a folder the command did not make, or holding more than it wrote
        mine = str(tmp / "mine")
        if "prepared" in case:
            _copy(f["data"], mine)
            if "without its record" in case:
                os.remove(os.path.join(mine, path_roles.RECORD_NAME))
            else:
                with open(os.path.join(mine, "notes.txt"), "w") as fh:
                    fh.write("my notes on this data\n")
        else:
            os.makedirs(mine)
            with open(os.path.join(mine, "thesis.tex"), "w") as fh:
                fh.write("years of work\n")
        argv[out_at] = mine
    if "--overwrite" in case:
        argv.append("--overwrite")
    argv = [a.format(**values) for a in argv]
    kept = [argv[i].partition("=")[2] if "=" in argv[i] and not argv[i].startswith("/") else argv[i]
            for flag, i, role in options_in(command, VALID[command]) if role.kind == "input" or flag == out_flag]
    return argv, kept + [str(tmp / "in"), str(tmp / "checkpoints"), str(tmp / "mine")], lock


def written_files(tmp):
    """What a case left in its folder that it did not make: a refusal before any work writes nothing."""
    return sorted(os.path.relpath(os.path.join(root, n), tmp) for root, _, names in os.walk(tmp) for n in names
                  if not os.path.relpath(root, tmp).split(os.sep)[0] in ("in", "checkpoints", "mine"))


def one_line_naming(proc, flag):
    errors = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
    last = (proc.stderr.strip().splitlines() or [""])[-1]
    assert proc.returncode != 0, f"exit 0; expected a refusal naming {flag}\n{proc.stderr[-2500:]}"
    assert "Traceback" not in proc.stderr and len(errors) == 1 and last == errors[0], proc.stderr[-2500:]
    assert f"{flag} " in last, f"{last!r} does not name {flag}"
    return last


@pytest.mark.parametrize("command, case, out_flag, in_flag", CASES,
                         ids=[f"{c}: {o} {case}" + (f" {i}" if i else "") for c, case, o, i in CASES])
def test_an_output_never_replaces_what_the_user_gave(files, tmp_path, command, case, out_flag, in_flag):  # noqa: F811
    argv, kept, lock = build_case(files, tmp_path, command, case, out_flag, in_flag)
    before = hashes(kept)
    try:
        with time_limit(CASE_SECONDS):
            proc = run_cli([command] + argv, check=False)
    finally:
        if lock is not None:
            lock.release()
    after = hashes(kept)
    assert before or case.startswith("ends in /"), "the case has no input to keep"
    assert {p: after.get(p) for p in before} == before, f"inputs changed: " \
        f"{sorted(p for p in before if after.get(p) != before[p])}\n{proc.stderr[-2000:]}"
    one_line_naming(proc, out_flag)
    assert set(written_files(tmp_path)) <= {"link", "hard"}, written_files(tmp_path)  # refused before any work


# ---- what the check lets through, and what a command finds itself --------------------------------------------------
def test_new_files_beside_and_inside_inputs_are_written(files, tmp_path):
    """Not every output near an input is a loss: --out X beside an input X.de (X.json, X.detok are new), and an
    averaged checkpoint written as a new file into the folder of the checkpoints it averages."""
    hyp = _copy(files["hyp"], str(tmp_path / "test.de"))
    with time_limit(CASE_SECONDS):
        run_cli(["fusion-score-bleu", "--hyp", hyp, "--hyp-format", "detok", "--ref", files["ref"], "-t", "de",
                 "--out", str(tmp_path / "test")])
    assert sorted(os.listdir(tmp_path)) == ["test.de", "test.detok", "test.json", "test.lock"]
    folder = tmp_path / "ck"
    for epoch in (1, 2):
        _copy(files["ckpt"], str(folder / f"checkpoint{epoch}.pt"))
    before = hashes([str(folder)])
    with time_limit(CASE_SECONDS):
        proc = run_cli(["fusion-average-checkpoints", "--inputs", str(folder), "--num-epoch-checkpoints", "2",
                        "--output", str(folder / "checkpoint2.pt")], check=False)
    line = one_line_naming(proc, "--output")
    assert f"is also --inputs {folder / 'checkpoint2.pt'}" in line
    assert hashes([str(folder)]) == before
    with time_limit(CASE_SECONDS):
        run_cli(["fusion-average-checkpoints", "--inputs", str(folder), "--num-epoch-checkpoints", "2",
                 "--output", str(folder / "averaged.pt")])
    assert sorted(os.listdir(folder)) == ["averaged.pt", "checkpoint1.pt", "checkpoint2.pt"]


def test_the_last_guard_refuses_to_replace_an_input(files, tmp_path, monkeypatch):
    """atomic_files.replacing, the writer of every result, refuses an input of the running command line that the
    command derived an output name from (the check before any work missed it: here it is switched off)."""
    hyp = _copy(files["hyp"], str(tmp_path / "mine.detok"))
    before = hashes([hyp])
    monkeypatch.setattr(path_roles, "check", lambda parser, namespace: None)
    with time_limit(CASE_SECONDS):
        proc = run_cli(["fusion-score-bleu", "--hyp", hyp, "--hyp-format", "detok", "--ref", files["ref"], "-t", "de",
                        "--out", str(tmp_path / "mine")], check=False)
    line = one_line_naming(proc, "--hyp")
    assert f"would replace {hyp}, which is --hyp {hyp}" in line
    assert hashes([hyp]) == before


GOOD_EN = "A dog runs .\nA girl plays .\nTwo men .\n"
GOOD_DE = "Ein Hund läuft .\nEin Mädchen spielt .\nZwei Männer .\n"


def test_overwrite_replaces_a_folder_the_command_made_and_only_that(tmp_path):
    """fusion-prepare-text --overwrite replaces its own folder (tests added with --add-test included: the record
    grows); once the folder holds a file of the user's, it is refused in one line naming it, and kept."""
    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("train", "valid", "extra"):
        (raw / f"{split}.en").write_text(GOOD_EN * 4)
        (raw / f"{split}.de").write_text(GOOD_DE * 4)
    dest = str(tmp_path / "data")
    argv = ["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", str(raw / "train"), "--validpref",
            str(raw / "valid"), "--destdir", dest, "--bpe-merges", "20", "--workers", "1"]
    with time_limit(CASE_SECONDS * 2):
        run_cli(argv)
        run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--destdir", dest, "--workers", "1",
                 "--add-test", str(raw / "extra")])
        assert path_roles.not_made_by("fusion-prepare-text", dest) == []
        run_cli(argv + ["--overwrite"])
    with open(os.path.join(dest, "notes.txt"), "w") as fh:
        fh.write("mine\n")
    before = hashes([dest, str(raw)])
    with time_limit(CASE_SECONDS):
        proc = run_cli(argv + ["--overwrite"], check=False)
    line = one_line_naming(proc, "--destdir")
    assert "would delete files fusion-prepare-text did not write there: notes.txt;" in line
    assert hashes([dest, str(raw)]) == before
