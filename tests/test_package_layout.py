"""The plugin stands apart from its tools: ``fairseq_fusion`` (what ``--user-dir`` loads) never imports
``fairseq_fusion_tools``, neither package has an import cycle, and nothing is loaded by file path.

The import graph is read from the source (``ast``), so a test module importing either package does not change it.
It holds every import statement, those inside functions too: an import deferred into a function still makes the two
modules depend on each other, it only hides the cycle from Python.
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


def imports(name, path, is_package, known):
    """The modules of ``known`` that ``name`` imports, at module level or inside its functions."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    targets = set()
    for node in ast.walk(tree):
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
    wrong = {name: sorted(t for t in imports(name, path, pkg, known) if t.startswith("fairseq_fusion_tools"))
             for name, (path, pkg) in known.items() if name.split(".")[0] == "fairseq_fusion"}
    assert not {k: v for k, v in wrong.items() if v}


def import_cycles(graph):
    """Every cycle a depth-first walk of ``graph`` (module -> the modules it imports) closes, as [a, b, ..., a]."""
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
    return cycles


def test_import_cycles_are_found_function_level_imports_included():
    """The walk's own check, on a made-up graph: a -> b at module level, b -> a inside a function."""
    assert import_cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b", "a"]]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycles():
    known = modules()
    graph = {name: imports(name, path, pkg, known) for name, (path, pkg) in known.items()}
    cycles = [" -> ".join(cycle) for cycle in import_cycles(graph)]
    assert not cycles, "import cycles (function-level imports included): " + "; ".join(cycles)


def test_nothing_is_loaded_by_file_path():
    for name, (path, _) in modules().items():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for how in ("spec_from_file_location", "SourceFileLoader", "runpy.run_path", "exec(open("):
            assert how not in text, f"{path}: {how}"
