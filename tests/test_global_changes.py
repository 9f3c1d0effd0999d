"""The list of every change the plugin makes (fairseq_fusion/global_changes.py): complete for each scope (importing the
plugin, configuring a command-line run, importing the tools' commands; seen in a fresh interpreter by
tests/import_changes_probe.py, which does not read the list to find them), each change made only where the fairseq
function it replaces is the one it was written for, each test it names exists, and ARCHITECTURE.md's table is its
rendering."""
import json
import logging
import os
import re
import subprocess
import sys

import pytest

from fairseq_fusion import global_changes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- global changes: global_changes.table() -->\n", "<!-- end of global changes -->\n"


def probe(what):
    env = {k: v for k, v in os.environ.items() if k not in ("FUSION_CUDNN_ATTENTION", "FUSION_FAIRSEQ_FIXES")}
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "import_changes_probe.py"), what],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def in_scope(*scopes):
    return [c for c in global_changes.CHANGES if c.scope in scopes]


@pytest.mark.parametrize("what, changes", [("plugin", in_scope("import", "fix", "plugin")),
                                           ("command", in_scope("command")), ("tools", global_changes.TOOLS)])
def test_each_scope_changes_exactly_what_the_list_names(what, changes):
    found = probe(what)
    changed, listed = set(found["changed"]), found["listed"]
    assert sorted(changed - set(listed.values())) == [], f"changed ({what}) but not in global_changes.py"
    conditional = {name for c in changes if c.when for name in (c.target,) + c.also}
    assert sorted(n for n, spelt in listed.items() if spelt not in changed and n not in conditional) == [], \
        f"listed in global_changes.py ({what}) but unchanged"
    if what == "command":  # what configure() returns is what it changed
        assert set(found["said"]) - conditional == {n for c in changes for n in (c.target,) + c.also} - conditional


def test_importing_the_plugin_changes_no_process_wide_setting():
    """Threads, hooks, warnings, loggers and torch's backends are the command-line run's, never the import's."""
    at_import = {c.target for c in in_scope("import", "fix", "plugin")}
    assert not at_import & {"sys.excepthook", "warnings.showwarning", "warnings.filters", "sys.meta_path",
                            "torch.set_num_threads", "torch.backends.cuda.cudnn_sdp_enabled",
                            "atexit.register"}
    assert {c.target for c in in_scope("import")} == {"torch.serialization.get_safe_globals",
                                                     "fairseq.utils.import_user_module"}


def test_a_changed_fairseq_function_is_left_alone_with_one_warning(monkeypatch, caplog):
    """A fairseq whose function differs from the one a change was written for (another release, fairseq's main
    branch): the change is skipped, and one warning names it."""
    from fairseq.data import data_utils

    change = next(c for c in global_changes.CHANGES if c.target == "fairseq.data.data_utils.batch_by_size")

    def batch_by_size(indices, num_tokens_fn, max_tokens=None, max_sentences=None, required_batch_size_multiple=1,
                      fixed_shapes=None):  # a fairseq that rewrote it
        return [indices]

    monkeypatch.setattr(data_utils, "batch_by_size", batch_by_size)
    monkeypatch.setattr(global_changes, "SKIPPED", [])
    with caplog.at_level(logging.WARNING, logger=global_changes.__name__):
        applied = global_changes._apply(change)
    assert not applied and data_utils.batch_by_size is batch_by_size
    said = [r.getMessage() for r in caplog.records if "batch_by_size" in r.getMessage()]
    assert len(said) == 1 and "is not applied" in said[0] and global_changes.source_hash(batch_by_size) in said[0]


def test_the_installed_fairseq_is_one_each_change_was_written_for():
    """On the fairseq this repository installs, nothing is skipped (a hash out of date would skip a fix silently):
    every change of every scope applied, fairseq's command modules imported."""
    import fairseq_cli.generate  # noqa: F401
    import fairseq_cli.interactive  # noqa: F401
    import fairseq_cli.preprocess  # noqa: F401
    import fairseq_cli.train  # noqa: F401

    from fairseq_fusion import command_line

    command_line.configure()
    assert global_changes.SKIPPED == []


def test_each_change_names_a_test_that_exists():
    for change in global_changes.CHANGES + global_changes.TOOLS:
        path, name = change.test.split("::")
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            assert re.search(rf"^def {name}\(", f.read(), re.M), change.test


def test_each_change_says_why_where_and_for_which_fairseq():
    for change in global_changes.CHANGES + global_changes.TOOLS:
        assert change.reason and change.scope in global_changes.SCOPES and "|" not in change.reason + change.when
        wraps = change.how.startswith(("wrap", "on-import")) or change.scope == "fix"
        assert bool(change.sources) == (wraps and change.target.startswith("fairseq")), change.target
        assert (change.scope == "fix") == change.reason.startswith("fairseq bug") == bool(change.upstream), change.target
        assert (change.scope == "plugin") == bool(change.covers), change.target


def test_one_change_per_fairseq_function():
    names = [n for c in global_changes.CHANGES for n in (c.target,) + c.also]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_architecture_table_is_the_lists_rendering():
    with open(os.path.join(ROOT, "ARCHITECTURE.md"), encoding="utf-8") as f:
        text = f.read()
    shown = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    assert shown == global_changes.table(), "ARCHITECTURE.md's table differs; the new table:\n" + global_changes.table()


def test_one_switch_turns_every_fix_of_fairseq_off():
    code = ("import pkgutil, fairseq_fusion\nfrom fairseq_fusion import global_changes as g\n"
            "fixed = [c.target for c in g.CHANGES if c.scope == 'fix' and c.how.startswith('wrap') and getattr("
            "getattr(*g.owner_and_name(c.target)), 'patched_by_fairseq_fusion', False)]\n"
            "from fairseq.models import distributed_fairseq_model as d\n"
            "print(len(fixed), d.DistributedDataParallel.__name__)")
    found = {}
    for value in ("on", "off"):
        env = dict(os.environ, FUSION_FAIRSEQ_FIXES=value, PYTHONPATH=ROOT)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-2000:]
        found[value] = proc.stdout.split()[-2:]
    wraps = sum(c.scope == "fix" and c.how.startswith("wrap") for c in global_changes.CHANGES)
    assert found == {"on": [str(wraps), "CPUAwareDistributedDataParallel"], "off": ["0", "DistributedDataParallel"]}
