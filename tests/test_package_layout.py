"""The plugin stands apart from its tools: ``fairseq_fusion`` (what ``--user-dir`` loads) never imports
``fairseq_fusion_tools``, neither package has an import cycle, and nothing is loaded by file path.

The import graph is read from the source (``ast``), so a test module importing either package does not change it.
"""
import ast
import os

from conftest import REPO

PACKAGES = ("fairseq_fusion", "fairseq_fusion_tools")


def modules():
    """module name -> (file, is_package) for every module of both packages."""
    found = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(REPO, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    parts = os.path.relpath(path, REPO)[:-3].split(os.sep)
                    is_package = parts[-1] == "__init__"
                    found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def imports(name, path, is_package, known, top_level_only):
    """The modules of ``known`` that ``name`` imports (only its module-level statements with ``top_level_only``)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    nodes = [n for stmt in tree.body for n in ast.walk(stmt) if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef))] \
        if top_level_only else list(ast.walk(tree))
    targets = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            for alias in node.names:  # a submodule named in the list is imported itself
                targets.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module)
    return {t for t in targets if t in known}


def test_the_plugin_never_imports_its_tools():
    known = modules()
    wrong = {name: sorted(t for t in imports(name, path, pkg, known, False) if t.startswith("fairseq_fusion_tools"))
             for name, (path, pkg) in known.items() if name.split(".")[0] == "fairseq_fusion"}
    assert not {k: v for k, v in wrong.items() if v}


def test_no_import_cycles():
    known = modules()
    graph = {name: imports(name, path, pkg, known, True) for name, (path, pkg) in known.items()}
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    # a package importing its own submodules, which import it back for a name it defines first, is no cycle:
    # only cycles through two or more modules that are not each other's package count
    real = [c for c in cycles if not all(a.startswith(b + ".") or b.startswith(a + ".") for a, b in zip(c, c[1:]))]
    assert not real, real


def test_nothing_is_loaded_by_file_path():
    for name, (path, _) in modules().items():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for how in ("spec_from_file_location", "SourceFileLoader", "runpy.run_path", "exec(open("):
            assert how not in text, f"{path}: {how}"
