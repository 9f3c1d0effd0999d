"""Packaging (pyproject.toml): every third-party module the package and its recipes import is declared (dependencies
or an extra), or is torch/fairseq (installed by `make install`, see pyproject.toml); [project.scripts] lists every
cli module with a cli_main() and nothing else."""
import ast
import importlib.metadata as md
import os
import re
import sys

import pytest

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

