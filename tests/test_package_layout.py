"""The plugin stands apart from its tools: ``fairseq_fusion`` (what ``--user-dir`` loads) never imports
``fairseq_fusion_tools``, neither package has an import cycle, and nothing is loaded by file path. Inside the plugin
the three layers of ARCHITECTURE.md import only downward: the core (the techniques and models) neither ``compat/``
nor ``guards/``, ``compat/`` not ``guards/``.

The import graph is read from the source (``ast``), so a test module importing either package does not change it.
It holds every import statement, those inside functions too: an import deferred into a function still makes the two
modules depend on each other, it only hides the cycle from Python.
"""
import ast
import os
import subprocess
import sys

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
    if name == "fairseq_fusion.global_changes":  # the list names what it applies by strings, imported when applied
        targets.update(string_imports())
    return {t for t in targets if t in known}


def string_imports():
    """The plugin modules ``global_changes.py`` imports by name: each change's ``how`` and ``covers``."""
    from fairseq_fusion import global_changes

    found = set()
    for change in global_changes.CHANGES:
        for dotted in (change.how.split()[1] if " " in change.how else change.how, change.covers):
            if dotted:
                found.add("fairseq_fusion." + dotted.rsplit(".", 1)[0])
    return found


def test_the_layer_test_sees_the_string_imports_of_the_list():
    known = modules()
    seen = imports("fairseq_fusion.global_changes", *known["fairseq_fusion.global_changes"], known)
    assert {"fairseq_fusion.guards.entry_checks", "fairseq_fusion.compat.fairseq_fixes",
            "fairseq_fusion.guards.plugin_models"} <= seen
    assert string_imports() <= set(known), sorted(string_imports() - set(known))


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


WIRING = ("fairseq_fusion", "fairseq_fusion.global_changes", "fairseq_fusion.command_line")


def layer(module):
    """core, compat or guards: the plugin module's layer (its folder under ``fairseq_fusion/``); the wiring (the
    package's ``__init__``, the list of changes and the command-line run) applies all three."""
    if module in WIRING:
        return "wiring"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ("compat", "guards") else "core"


MAY_IMPORT = {"core": {"core"}, "compat": {"core", "compat"}, "guards": {"core", "compat", "guards"},
              "wiring": {"core", "compat", "guards", "wiring"}}


def test_layer_of_a_module_is_its_folder():
    assert [layer(m) for m in ("fairseq_fusion.modules.lexical_shortcuts", "fairseq_fusion.compat.quiet",
                               "fairseq_fusion.guards.entry_checks", "fairseq_fusion.errors",
                               "fairseq_fusion.global_changes")] == ["core", "compat", "guards", "core", "wiring"]


def test_the_plugin_layers_import_only_downward():
    """The technique code (models, modules, tasks, criterions, encoders, the registry) imports neither compat/ nor
    guards/; compat/ does not import guards/. The wiring (``__init__.py``, ``global_changes.py``, whose string
    imports count, and ``command_line.py``) is what imports every layer."""
    known = modules()
    wrong = []
    for name, (path, pkg) in known.items():
        if not name.startswith("fairseq_fusion") or name.startswith("fairseq_fusion_tools"):
            continue
        for target in imports(name, path, pkg, known):
            if target.startswith("fairseq_fusion.") and layer(target) not in MAY_IMPORT[layer(name)]:
                wrong.append(f"{name} ({layer(name)}) imports {target} ({layer(target)})")
    assert not wrong, "\n".join(sorted(wrong))


def test_the_plugin_root_holds_only_the_core():
    """What ``ls fairseq_fusion`` shows: the three layers' folders, the core's packages and a few core modules."""
    root = os.path.join(REPO, "fairseq_fusion")
    entries = {e for e in os.listdir(root) if e != "__pycache__"}
    assert {"compat", "guards"} <= entries
    assert entries - {"compat", "guards"} == {
        "__init__.py", "global_changes.py", "command_line.py", "errors.py", "seams.py", "fusion_options.py",
        "host_sync.py", "compile_training.py",
        "file_locks.py", "models", "modules", "tasks", "criterions", "encoders"}


def test_the_plugin_never_reaches_its_tools_through_sys_modules():
    """No name of the tools in a dynamic import or a ``sys.modules`` lookup of the plugin, and loading the plugin as
    fairseq-train does (``--user-dir``, then building a model) leaves the tools unimported (a fresh interpreter)."""
    dynamic = []
    for name, (path, _) in modules().items():
        if not name.startswith("fairseq_fusion.") and name != "fairseq_fusion":
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            looked_up = (isinstance(node, ast.Subscript) and ast.unparse(node.value) == "sys.modules") or (
                isinstance(node, ast.Call) and ast.unparse(node.func) in (
                    "sys.modules.get", "importlib.import_module", "__import__", "import_module"))
            if looked_up and "fairseq_fusion_tools" in ast.unparse(node):
                dynamic.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    assert not dynamic, "\n".join(dynamic)
    probe = ("import sys; from fairseq import options, tasks; from fairseq.utils import import_user_module; "
             "import argparse; import_user_module(argparse.Namespace(user_dir=sys.argv[1])); "
             "p = options.get_training_parser(); "
             "a = options.parse_args_and_arch(p, ['/nonexistent', '--arch', 'transformer_lexical_shortcuts', "
             "'--max-tokens', '100']); import fairseq_fusion.models; "
             "print(sorted(m for m in sys.modules if m.startswith('fairseq_fusion')))")
    out = subprocess.run([sys.executable, "-c", probe, os.path.join(REPO, "fairseq_fusion")], capture_output=True,
                         text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = eval(out.stdout.strip().splitlines()[-1])
    assert "fairseq_fusion.guards.plugin_models" in loaded  # the probe did load the plugin with its guards
    assert not [m for m in loaded if m.startswith("fairseq_fusion_tools")]


def test_no_module_of_either_package_is_git_ignored():
    """A package folder named like a run's output (``checkpoints/``, ``work/``) would be left out of every clone."""
    paths = [os.path.relpath(path, REPO) for path, _ in modules().values()]
    out = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=REPO, capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    assert not out.stdout.split(), f"git ignores: {out.stdout.split()}"


def thin_entry_point_breaches(source):
    """What a ``cli/`` module holds beyond a thin entry point: its docstring, imports, ``get_parser`` (defined or
    taken from its family), ``cli_main`` of one statement (parse, call one function) and the ``__main__`` guard."""
    breaches = []
    for i, node in enumerate(ast.parse(source).body):
        allowed = (
            (i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
            or isinstance(node, (ast.Import, ast.ImportFrom))
            or (isinstance(node, ast.FunctionDef) and node.name == "get_parser")
            or (isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["get_parser"])
            or (isinstance(node, ast.FunctionDef) and node.name == "cli_main" and len(node.body) == 1
                and not isinstance(node.body[0], (ast.If, ast.For, ast.While, ast.With, ast.Try)))
            or (isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"))
        if not allowed:
            breaches.append(f"line {node.lineno}: {ast.unparse(node).splitlines()[0][:80]}")
    return breaches


def test_thin_entry_point_rule_finds_logic():
    thin = '"""fusion-x."""\nimport argparse\n\n\ndef get_parser():\n    return argparse.ArgumentParser()\n\n\n' \
           'def cli_main():\n    family.main(get_parser().parse_args())\n\n\nif __name__ == "__main__":\n    cli_main()\n'
    assert thin_entry_point_breaches(thin) == []
    assert thin_entry_point_breaches(thin + "\n\ndef main(args):\n    pass\n") == ["line 17: def main(args):"]
    assert thin_entry_point_breaches(thin.replace("    family.main", "    args = 1\n    family.main")) == [
        "line 9: def cli_main():"]


def test_every_cli_module_is_a_thin_entry_point():
    folder = os.path.join(REPO, "fairseq_fusion_tools", "cli")
    found = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and name not in ("__init__.py", "_tools.py"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                found[name] = thin_entry_point_breaches(f.read())
    assert len(found) > 25
    assert not {k: v for k, v in found.items() if v}


def test_the_tools_top_level_holds_packages_and_the_shared_modules():
    """``ls fairseq_fusion_tools``: one package a family, and the few modules every family shares."""
    root = os.path.join(REPO, "fairseq_fusion_tools")
    entries = {e for e in os.listdir(root) if e != "__pycache__"}
    modules_ = {e for e in entries if e.endswith(".py")}
    assert modules_ == {"__init__.py", "atomic_files.py", "data_paths.py", "fairseq_runs.py",
                        "outputs.py", "path_roles.py", "progress.py", "user_files.py"}
    packages = entries - modules_
    assert all(os.path.isfile(os.path.join(root, p, "__init__.py")) for p in packages), packages
    assert {"scoring", "analysis", "compare", "benchmark", "gpu", "cli"} <= packages
