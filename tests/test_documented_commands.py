"""Every documented command runs as written (tests/documented_commands.py says how each one runs here).

Each group of commands runs in order in its own throwaway copy of a fresh clone's layout: `repo/` (symlinks to the
repository's files, cwd of every command) beside `shared/data`; `data-bin` there is the session's Multi30k slice.
"""
import contextlib
import gzip
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import torch

import cli_runner
from conftest import BIN, REPO, run_cli, train_args, write_dicts
import doc_extraction as docs
import documented_commands as dc
from fairseq_fusion_tools import data_paths

GROUPS = list(dict.fromkeys(e.group for e in dc.REGISTRY.values()))
# the repository's own outputs and caches are not part of a fresh clone
NOT_CLONED = {".git", "demo_work", "work", "compare_work", "checkpoints", "data-bin", "outputs", "build", ".pytest_cache",
              "__pycache__", "fairseq_fusion.egg-info", "results"}
STUBBED = ["fusion-prepare-text", "fairseq-train", "fairseq-generate", "fusion-average-checkpoints", "fusion-score-bleu", "fusion-score-rouge",
           "fusion-score-m2", "fusion-benchmark"]


@pytest.fixture(scope="session")
def documented():
    return docs.extract()


def test_every_documented_command_is_registered(documented):
    missing = [f"{d.where}: {d.text}" for d in documented if docs.normalize(d.text) not in dc.REGISTRY]
    assert not missing, ("documented commands with no entry in tests/documented_commands.py's REGISTRY (add one: how it "
                         "runs here):\n" + "\n".join(missing))


def test_every_registry_entry_is_still_documented(documented):
    shown = {docs.normalize(d.text) for d in documented}
    stale = [k for k in dc.REGISTRY if k not in shown]
    assert not stale, "REGISTRY entries no doc shows any more (update or remove them):\n" + "\n".join(stale)


@pytest.mark.parametrize("text", [
    "```\nfairseq-train data-bin \\\n    --arch x ...   # comment\n```\n",
    "Run `fusion-score-bleu --hyp F\n--ref F` here.\n",
    "text\n\n    recipes/wmt14_en_de/prepare.sh --paper dou\n",
])
def test_extraction_finds_fenced_inline_and_indented_commands(text):
    (doc,) = docs.markdown_commands("x.md", text)
    assert docs.normalize(doc.text) in ("fairseq-train data-bin --arch x ...", "fusion-score-bleu --hyp F --ref F",
                                      "recipes/wmt14_en_de/prepare.sh --paper dou")


def test_placeholders_and_dots_are_filled():
    e = dc.Entry("g", sub=[("DATA", "data-bin")], tiny="--max-update 2")
    assert e.command("fairseq-train DATA --arch a ... --cpu") == "fairseq-train data-bin --arch a --max-update 2 --cpu"
    assert e.command("fusion-x --data DATA_BIN $DATA/x") == "fusion-x --data DATA_BIN $DATA/x --max-update 2"


# ------------------------------------------------------------------------------------------------ the layout

def link_dir(src, dst):
    """A real folder whose entries are symlinks to src's (so writes into it stay in the copy)."""
    os.makedirs(dst)
    for name in os.listdir(src):
        os.symlink(os.path.join(src, name), os.path.join(dst, name))


def tiny_shared_data(root, n=dc.TINY_SHARED_LINES):
    m30k = os.path.join(root, "multi30k")
    os.makedirs(m30k)
    for split in ("train", "val", "test_2016_flickr"):
        for lang in ("en", "de"):
            with gzip.open(data_paths.data_path("multi30k", f"{split}.{lang}.gz"), "rt", encoding="utf-8") as f:
                lines = [next(f) for _ in range(n)]
            with gzip.open(os.path.join(m30k, f"{split}.{lang}.gz"), "wt", encoding="utf-8") as f:
                f.writelines(lines)


@pytest.fixture(scope="session")
def doc_checkpoint(multi30k_slice, tmp_path_factory):
    """arch -> a checkpoint_best.pt of 2 updates on the slice (conftest's small model), trained once."""
    made = {}

    def get(arch):
        if arch not in made:
            save = str(tmp_path_factory.mktemp(f"ckpt_{arch}"))
            run_cli(train_args(multi30k_slice, save, arch=arch, max_update=2, extra=["--no-epoch-checkpoints"]))
            made[arch] = os.path.join(save, "checkpoint_best.pt")
        return made[arch]
    return get


def make_layout(root, group, multi30k_slice, doc_checkpoint):
    repo, shared = os.path.join(root, "repo"), os.path.join(root, "shared")
    os.makedirs(repo)
    os.makedirs(shared)
    if group in dc.GROUP_TINY_SHARED:
        tiny_shared_data(os.path.join(shared, "data"))
    else:  # a tree of folders with symlinked files: what a command writes beside a shared file stays in the copy
        for top, dirs, files in os.walk(data_paths.data_root()):
            dst = os.path.join(shared, "data", os.path.relpath(top, data_paths.data_root()))
            os.makedirs(dst, exist_ok=True)
            for name in files:
                os.symlink(os.path.join(top, name), os.path.join(dst, name))
    for name in os.listdir(REPO):
        if name not in NOT_CLONED:
            os.symlink(os.path.join(REPO, name), os.path.join(repo, name))
    if group not in dc.GROUP_NO_DATA_BIN:
        link_dir(multi30k_slice, os.path.join(repo, "data-bin"))
        os.symlink(multi30k_slice, os.path.join(repo, "data-bin", "multi30k"))
    for path, arch in dc.GROUP_CKPTS.get(group, {}).items():
        os.makedirs(os.path.dirname(os.path.join(repo, path)) or repo, exist_ok=True)
        shutil.copy(doc_checkpoint(arch), os.path.join(repo, path))
    for hook in GROUP_SETUP.get(group, ()):
        hook(repo)
    return repo


# ------------------------------------------------------------------------ files the commands read (tiny, by hand)

def fake_tags(word):
    return "NN" if word[:1].isupper() else "VBG" if word.endswith("ing") else "DT"


def read_lines(path, n=None):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    return lines[:n] if n else lines


def write_lines(path, lines):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def pos_tags(repo):
    for lang in ("en", "de"):
        words = read_lines(os.path.join(repo, "data-bin/multi30k/tok", f"test.{lang}"))
        write_lines(os.path.join(repo, f"test.tags.{lang}"), [" ".join(fake_tags(w) for w in l.split()) for l in words])


def tree(line):
    leaf = lambda w: "(X " + w.replace("(", "-LRB-").replace(")", "-RRB-") + ")"  # noqa: E731
    return "(ROOT (S " + " ".join(leaf(w) for w in line.split()) + "))"


def parse_trees(repo):
    for split in ("train", "valid", "test"):
        write_lines(os.path.join(repo, f"{split}.en.parse"),
                    [tree(l) for l in read_lines(os.path.join(repo, "data-bin/tok", f"{split}.en"))])


def input_tree(repo):
    write_lines(os.path.join(repo, "input.en.parse"), ["(ROOT (S (NP (DT A) (NN dog)) (VP (VBZ runs)) (. .)))"])


def parallel_text(repo):
    en, de = (read_lines(os.path.join(repo, "data-bin/tok", f"test.{l}"), 30) for l in ("en", "de"))
    write_lines(os.path.join(repo, "train.en-de"), [f"{a} ||| {b}" for a, b in zip(en, de)])


def system_outputs(repo):
    wmt14 = data_paths.data_path("wmt14")
    ref = read_lines(os.path.join(wmt14, "newstest2014.de"), 200)
    write_lines(os.path.join(repo, "src.en"), read_lines(os.path.join(wmt14, "newstest2014.en"), 200))
    write_lines(os.path.join(repo, "ref.de"), ref)
    write_lines(os.path.join(repo, "A.detok"), ref)
    write_lines(os.path.join(repo, "B.detok"), [" ".join(l.split()[::-1]) if i % 2 else l for i, l in enumerate(ref)])


M2 = ["S A cat sit on the mat .", "A 2 3|||R:VERB:SVA|||sits|||REQUIRED|||-NONE-|||0", "",
      "S He go home .", "A 1 2|||R:VERB:SVA|||goes|||REQUIRED|||-NONE-|||0", ""]


def m2_files(repo):
    write_lines(os.path.join(repo, "work/conll14_gec/data-liu.src-trg/test.m2"), M2)
    write_lines(os.path.join(repo, "generate.test.txt"), ["H-0\t-0.5\tA cat sits on the mat .", "H-1\t-0.5\tHe go home ."])
    write_lines(os.path.join(repo, "hyp.txt"), ["A cat sits on the mat .", "He go home ."])


def fake_conll14(repo):
    d = os.path.join(repo, "work/conll14_gec/data-liu.src-trg")
    os.makedirs(d, exist_ok=True)
    write_dicts(d, 100, langs=("src", "trg"))


def fake_cnndm(repo):
    d = os.path.join(repo, "work/cnndm_summarization/data-liu.source-target")
    os.makedirs(d)
    write_dicts(d, 100, langs=("source", "target"))


def fake_checkpoints(repo):
    """Empty checkpoint files where the stubbed train.sh would have written them."""
    for save in [os.path.join(root) for root, dirs, files in os.walk(os.path.join(repo, "work"))
                 if "recipe_settings.sh" in files]:
        for name in ["checkpoint_best.pt", "checkpoint_last.pt"] + [f"checkpoint_1_{100 * i}.pt" for i in range(1, 21)]:
            open(os.path.join(save, name), "w").close()


def wmt14_local(repo):
    """A --local folder for wmt14_en_de: Multi30k lines as training and dev data, newstest2014 and copies as tests."""
    d = os.path.join(repo, "work/wmt14_local")
    if os.path.exists(d):
        return
    for lang in ("en", "de"):
        write_lines(os.path.join(d, f"train.{lang}"), read_lines(data_paths.data_path("multi30k", f"train.{lang}.gz"), 100))
        write_lines(os.path.join(d, f"newstest2013.{lang}"), read_lines(data_paths.data_path("multi30k", f"val.{lang}.gz"), 30))
        test = read_lines(data_paths.data_path("wmt14", f"newstest2014.{lang}"), 30)
        for year in range(2014, 2019):
            write_lines(os.path.join(d, f"newstest{year}.{lang}"), test)


def fake_wmt14_dou(repo):
    d = os.path.join(repo, "work/wmt14_en_de/data-dou.en-de")
    os.makedirs(d, exist_ok=True)
    write_dicts(d, 100, langs=("en", "de"))


def train_log(repo):
    """A fairseq-train log with validation BLEU (what train.sh --eval-bleu writes) for fusion-training-curve."""
    save = os.path.join(repo, "work/wmt14_en_de/checkpoints/transformer_lexical_shortcuts_ff.emelin.en-de")
    os.makedirs(save, exist_ok=True)
    write_lines(os.path.join(save, "train.log"), [
        f"2026-11-25 12:00:0{u} | INFO | valid | epoch {u:03d} | valid on 'valid' subset | loss {9 - u}.1 | nll_loss "
        f"{8 - u}.9 | ppl {300 - 50 * u} | bleu {u}.5 | wps 1000 | wpb 500 | bsz 30 | num_updates {100 * u}" for u in (1, 2, 3)])


def input_en(repo):
    write_lines(os.path.join(repo, "input.en"), ["A dog runs through the grass.", "Two men play football."])


def readme_copy(repo):
    """A README the command may rewrite (the layout's is a link to the repository's)."""
    os.remove(os.path.join(repo, "README.md"))
    shutil.copy(os.path.join(REPO, "README.md"), os.path.join(repo, "README.md"))


def compare_work(repo):
    """multi30k.sh's data-bin (its .done: prepared), the slice's test reference standing in for test_2017_flickr."""
    link_dir(os.path.join(repo, "data-bin"), os.path.join(repo, "compare_work/data-bin"))
    os.remove(os.path.join(repo, "compare_work/data-bin/tok"))
    link_dir(os.path.join(repo, "data-bin/tok"), os.path.join(repo, "compare_work/data-bin/tok"))
    os.symlink("test.raw.de", os.path.join(repo, "compare_work/data-bin/tok/test1.raw.de"))
    for lang in ("en", "de"):
        for ext in ("bin", "idx"):
            os.symlink(f"test.en-de.{lang}.{ext}", os.path.join(repo, f"compare_work/data-bin/test1.en-de.{lang}.{ext}"))
    open(os.path.join(repo, "compare_work/data-bin/.done"), "w").close()


def bench_done(repo):
    open(os.path.join(repo, "data-bin/.done"), "w").close()


HOOKS = {f.__name__: f for f in (pos_tags, parse_trees, input_tree, parallel_text, system_outputs, m2_files, fake_conll14,
                                  fake_cnndm, fake_checkpoints, wmt14_local, fake_wmt14_dou, train_log, input_en)}
GROUP_SETUP = {"compare": [compare_work], "bench": [bench_done], "conll14": [fake_conll14, m2_files],
               "archs": [readme_copy]}


# ------------------------------------------------------------------------------------------------ runners

def environment(repo, entry, extra_path=()):
    env = dict(os.environ, OMP_NUM_THREADS="1", FUSION_DATA=os.path.join(os.path.dirname(repo), "shared", "data"))
    for name in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS"):  # under `make test` a documented make would be a sub-make
        env.pop(name, None)
    env["PATH"] = os.pathsep.join([*extra_path, BIN, env.get("PATH", "")])
    env.update(entry.env)
    return env


def bash(cmd, cwd, env, stdin=None):
    proc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, input=stdin, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


@contextlib.contextmanager
def inside(cwd, env):
    old_cwd, old_env = os.getcwd(), dict(os.environ)
    os.chdir(cwd)
    os.environ.update(env)
    try:
        yield
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)


def argv_of(cmd, cwd):
    """shlex words with globs expanded as a shell would (relative to cwd)."""
    import glob
    words = []
    for w in shlex.split(cmd):
        hits = sorted(glob.glob(os.path.join(cwd, w))) if any(c in w for c in "*?") else []
        words += [os.path.relpath(h, cwd) for h in hits] or [w]
    return words


def tool_module(prog):
    return importlib.import_module("fairseq_fusion_tools.cli." + prog[len("fusion-"):].replace("-", "_"))


def tool_parser(prog):
    mod = tool_module(prog)
    if hasattr(mod, "get_parser"):
        return mod.get_parser()
    owner = importlib.import_module("fairseq_fusion." + prog[len("fusion-"):])  # fusion-compare, fusion-benchmark
    return owner.get_parser()


ONE_COMMAND = re.compile(r'^(?:echo "(?P<echo>[^"]*)" \| )?(?P<command>[^|;&`]*)$')


def one_command(cmd, cwd, env):
    """A documented command that is one console script of this environment with the shell words a user types around
    it, as (argv, environment, standard input text, file its stdout goes to): VAR=value before it, $VAR,
    $(fusion-user-dir), globs, `< FILE`, `> FILE`, `echo "TEXT" |`. None for anything else (make, scripts, loops,
    pipes, other programs): that runs in bash."""
    m = ONE_COMMAND.match(cmd.replace("$(fusion-user-dir)", cli_runner.plugin_dir()))
    if not m or "$(" in m["command"]:
        return None
    words, assigned = argv_of(re.sub(r"\$(\w+)", lambda v: env.get(v[1], ""), m["command"]), cwd), {}
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        key, value = words.pop(0).split("=", 1)
        assigned[key] = value
    stdin, stdout = m["echo"] and m["echo"] + "\n", None
    for op in ("<", ">"):
        if op in words:
            at = words.index(op)
            path = os.path.join(cwd, words[at + 1])
            if op == "<":
                with open(path, encoding="utf-8") as f:
                    stdin = f.read()
            else:
                stdout = path
            del words[at:at + 2]
    if not words or not words[0].startswith(("fairseq-", "fusion-")) or not cli_runner.is_console_script(words[0]):
        return None  # other programs' console scripts (sacrebleu) reopen the process's standard streams
    return words, assigned, stdin, stdout


def run_in_process(form, cwd, env):
    """(exit status, output) of ``one_command``'s form run in this process: its stdout to its file or the output."""
    argv, assigned, stdin_text, stdout_file = form
    stdin = None
    if stdin_text is not None:
        stdin = os.path.join(os.path.dirname(cwd), "stdin.txt")
        with open(stdin, "w", encoding="utf-8") as f:
            f.write(stdin_text)
    proc = cli_runner.run_in_process(argv, cwd=cwd, env=dict(env, **assigned), stdin=stdin)
    if stdout_file is None:
        return proc.returncode, proc.stdout + proc.stderr
    with open(stdout_file, "w", encoding="utf-8") as f:
        f.write(proc.stdout)
    return proc.returncode, proc.stderr


FAIRSEQ_PARSERS = {"fairseq-train": "get_training_parser", "fairseq-generate": "get_generation_parser",
                   "fairseq-interactive": "get_interactive_generation_parser", "fairseq-preprocess": "get_preprocessing_parser"}


def without_user_dir(args):
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--user-dir":
            skip = True
        elif not a.startswith("--user-dir="):
            out.append(a)
    return out


def parse_command(argv, cwd, build=True):
    """The command's arguments through its own parser, in this process; fairseq-train's model is also built (on the
    meta device: its modules and shapes without the seconds a WMT-size initialisation takes)."""
    prog, args = argv[0], argv[1:]
    if prog.startswith("fusion-"):
        return tool_parser(prog).parse_args(args)
    from fairseq import options, tasks
    parser = getattr(options, FAIRSEQ_PARSERS[prog])()
    with inside(cwd, {}):
        ns = options.parse_args_and_arch(parser, without_user_dir(args))
        if prog == "fairseq-train" and build and not getattr(ns, "init_from_vanilla", None):
            ns.cpu = True
            task = tasks.setup_task(ns)
            with torch.device("meta"):
                task.build_model(ns)
    return ns


def check_flags(text, repo, env):
    """Each --flag of a fragment is an option of its program."""
    words = shlex.split(text.replace("\\|", "|"))
    prog, flags = words[0], [w.split("=")[0] for w in words[1:] if w.startswith("--")]
    if prog.startswith("fusion-"):
        known = tool_parser(prog)._option_string_actions
        missing = [f for f in flags if f not in known]
    elif prog in FAIRSEQ_PARSERS:  # the parser as fairseq completes it for a fusion arch (it adds to the one given)
        from fairseq import options
        parser = getattr(options, FAIRSEQ_PARSERS[prog])()
        if prog == "fairseq-train":
            options.parse_args_and_arch(parser, ["data-bin", "--arch", "fusion_transformer"], parse_known=True)
        missing = [f for f in flags if f not in parser._option_string_actions]
    else:  # scripts and other programs: their --help
        rc, help_text = bash(f"{prog} --help", repo, env)
        missing = [f for f in flags if not re.search(rf"{re.escape(f)}(?![\w-])", help_text)]
    assert not missing, f"{prog} has no option {missing}"



def write_stubs(stub_dir):
    os.makedirs(stub_dir, exist_ok=True)
    with open(os.path.join(stub_dir, "python"), "w") as f:  # this environment's python
        f.write(f'#!/bin/bash\nexec "{sys.executable}" "$@"\n')
    for name in STUBBED:
        with open(os.path.join(stub_dir, name), "w") as f:
            f.write("#!/bin/bash\n"
                    f'echo "STUB: {name} $(printf "%q " "$@")" >&2\n'
                    # what the next step looks for: a checkpoint in --save-dir, the file of --output
                    'while [ $# -gt 0 ]; do case "$1" in --save-dir) mkdir -p "$2"; touch "$2/checkpoint_last.pt";;'
                    ' --output) touch "$2";; esac; shift; done\n')
    for name in os.listdir(stub_dir):
        os.chmod(os.path.join(stub_dir, name), 0o755)


def run_entry(text, entry, repo):
    """(exit status, output) of one documented command, run the way its entry says."""
    cwd = os.path.join(repo, entry.cwd) if entry.cwd else repo
    os.makedirs(cwd, exist_ok=True)
    env = environment(repo, entry)
    if entry.before:
        HOOKS[entry.before](repo)
    if entry.mode == "python":
        with inside(cwd, env):
            *body, last = text.strip().splitlines()
            scope = {}
            exec("\n".join(body), scope)
            return 0, str(eval(last, scope))
    cmd = entry.command(docs.normalize(text))
    if entry.mode == "flags":
        if entry.run:
            rc, out = bash(cmd, cwd, env)
            assert rc == 0, f"expected {cmd} to exit 0, not {rc}\n{out[-3000:]}"
        check_flags(docs.normalize(text), repo, env)
        return 0, ""
    if entry.mode == "parse":
        parse_command(argv_of(cmd, cwd), cwd)
        return 0, ""
    if entry.mode == "stub":
        stub_dir = os.path.join(os.path.dirname(repo), "stubs")
        write_stubs(stub_dir)
        env = environment(repo, entry, extra_path=[stub_dir])
        env["PYTHON"] = os.path.join(stub_dir, "python")
        rc, out = bash(cmd, cwd, env)
        calls = [shlex.split(line[len("STUB: "):]) for line in out.splitlines() if line.startswith("STUB: ")]
        assert calls, f"{cmd}: no stubbed command was called\n{out[-3000:]}"
        for argv in calls:
            if argv[0] in FAIRSEQ_PARSERS or argv[0] in ("fusion-benchmark", "fusion-prepare-text"):
                parse_command(argv, cwd)
        return rc, out
    form = one_command(cmd, cwd, env) if entry.stdin is None else None
    return run_in_process(form, cwd, env) if form else bash(cmd, cwd, env, stdin=entry.stdin)


def expectation_failures(entry, rc, out, repo):
    bad = []
    if rc != entry.rc:
        bad.append(f"exit status {rc}, expected {entry.rc}")
    if callable(entry.out):
        problem = entry.out(out, repo)
        bad += [problem] if problem else []
    elif entry.out and not re.search(entry.out, out):
        bad.append(f"output does not match {entry.out!r}")
    bad += [f"did not write {f}" for f in entry.files if not os.path.exists(os.path.join(repo, f))]
    return bad


@pytest.mark.long_run
@pytest.mark.parametrize("group", GROUPS)
def test_documented_commands_run(group, documented, multi30k_slice, doc_checkpoint, tmp_path):
    where = {}
    for d in documented:
        where.setdefault(docs.normalize(d.text), []).append(d)
    entries = [(k, e) for k, e in dc.REGISTRY.items() if e.group == group and k in where]
    repo = make_layout(str(tmp_path), group, multi30k_slice, doc_checkpoint)
    failures, passed_xfail, expected = [], [], []
    for key, entry in entries:
        doc = where[key][0]
        text = doc.text if entry.mode == "python" else key
        before = [f for f in entry.files if os.path.exists(os.path.join(repo, f))]
        assert not before, f"{doc.where}: {before} exist before the command"
        rc, out = run_entry(text, entry, repo)
        bad = expectation_failures(entry, rc, out, repo)
        label = f"{doc.where} ({entry.local or 'runs as written'}): {entry.command(key) if entry.mode != 'python' else 'python'}"
        if entry.xfail:
            (expected if bad else passed_xfail).append(f"{label}: {entry.xfail}" if bad else
                                                       f"{label}\n  marked xfail ({entry.xfail}) but passes now")
            continue
        if bad:
            failures.append(f"{label}\n  " + "; ".join(bad) + "\n  --- output (end)\n" + out[-2500:])
    assert not failures, "\n\n".join(failures)
    assert not passed_xfail, "\n".join(passed_xfail)  # strict: a fixed command must lose its xfail mark
    if expected:
        pytest.xfail("expected failures (the code is being changed): " + "; ".join(expected))
