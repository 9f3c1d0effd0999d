"""The list of every change the plugin makes at import (fairseq_fusion/compat/global_changes.py): complete, each change
made (seen in a fresh interpreter by tests/import_changes_probe.py, which does not read the list to find them), each
test it names exists, and ARCHITECTURE.md's table is its rendering."""
import json
import os
import re
import subprocess
import sys

import pytest

from fairseq_fusion.compat import global_changes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- global changes: global_changes.table() -->\n", "<!-- end of global changes -->\n"


def probe(what):
    env = {k: v for k, v in os.environ.items() if k != "FUSION_CUDNN_ATTENTION"}
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "import_changes_probe.py"), what],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("what, changes", [("plugin", global_changes.CHANGES), ("tools", global_changes.TOOLS)])
def test_importing_changes_exactly_what_the_list_names(what, changes):
    found = probe(what)
    changed, listed = set(found["changed"]), found["listed"]
    assert sorted(changed - set(listed.values())) == [], "changed at import but not in global_changes.py"
    conditional = {name for c in changes if c.when for name in (c.target,) + c.also}
    assert sorted(n for n, spelt in listed.items() if spelt not in changed and n not in conditional) == [], \
        "listed in global_changes.py but unchanged by the import"


def test_each_change_names_a_test_that_exists():
    for change in global_changes.CHANGES + global_changes.TOOLS:
        path, name = change.test.split("::")
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            assert re.search(rf"^def {name}\(", f.read(), re.M), change.test


def test_each_change_says_why_for_which_fairseq_and_when():
    for change in global_changes.CHANGES + global_changes.TOOLS:
        assert change.reason and change.fairseq and "|" not in change.reason + change.when, change.target
    assert [c.stage for c in global_changes.CHANGES] == sorted((c.stage for c in global_changes.CHANGES),
                                                               key=global_changes.STAGES.index)


def test_architecture_table_is_the_lists_rendering():
    with open(os.path.join(ROOT, "ARCHITECTURE.md"), encoding="utf-8") as f:
        text = f.read()
    shown = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    assert shown == global_changes.table(), "ARCHITECTURE.md's table differs; the new table:\n" + global_changes.table()
