"""fusion-compare's converged table on one GPU: --budget-from-curve (the budget read off fairseq's own validation BLEU
curve), with the README's second marker pair (--jobs N: tests/test_compare.py's end-to-end test)."""
import json
import os
import re

import pytest

from fairseq_fusion_tools.compare import budget
from cli_runner import expect
from conftest import run_cli
from test_compare import SYSTEMS, slice_small_test  # noqa: F401 (the fixture)


def valid_line(updates, bleu):
    return (f'2026-01-01 | INFO | valid | {{"epoch": 1, "valid_loss": "9.1", "valid_bleu": "{bleu}", '
            f'"valid_num_updates": "{updates}", "valid_best_bleu": "{bleu}"}}\n')


def test_curve_read_from_fairseqs_valid_lines_and_plateau_rule(tmp_path):
    log = tmp_path / "train.log"
    # the epoch-end validation repeats update 400's: one point each
    log.write_text("# 2026-01-01 fairseq-train ...\n" + "".join(valid_line(u, b) for u, b in [
        (100, 3.0), (200, 12.5), (300, 20.1), (400, 24.0), (400, 24.0), (500, 24.6), (600, 24.2), (700, 24.7)]))
    curve = budget.valid_curve(str(log))
    assert curve == [(100, 3.0), (200, 12.5), (300, 20.1), (400, 24.0), (500, 24.6), (600, 24.2), (700, 24.7)]
    assert budget.plateau(curve, 0.3) == 500  # 24.6 >= 24.7 - 0.3; 24.0 is not
    assert budget.plateau(curve, 1.0) == 400
    assert budget.plateau(curve, 0.0) == 700


# the baseline and one system (the budget applies to every system alike; the second stages: tests/test_compare.py)
CONVERGED_SYSTEMS = SYSTEMS[:4]


def _compare(data, work, *extra, check=True):
    return run_cli(["fusion-compare", data, "--work", work, "--size", "tiny", "--seeds", "1", *CONVERGED_SYSTEMS,
                    "--save-interval-updates", "1", "--log-interval", "1", "--bootstrap-samples", "100",
                    "--test-subsets", "test", *extra], check=check)


@pytest.mark.long_run
def test_budget_from_the_baselines_curve_into_the_second_readme_table(slice_small_test, tmp_path):  # noqa: F811
    work = str(tmp_path / "work")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- RESULTS TABLE -->\nold\n<!-- /RESULTS TABLE -->\n"
                      "<!-- CONVERGED RESULTS TABLE -->\n<!-- /CONVERGED RESULTS TABLE -->\n")
    proc = _compare(slice_small_test, work, "--budget-from-curve", "6", "--budget-tolerance", "0.5", "--protocol", "same",
                    "--jobs", "2", "--readme", str(readme), "--readme-marker", "CONVERGED RESULTS TABLE")
    record = json.load(open(os.path.join(work, "budget", "budget.json")))
    log = open(os.path.join(work, "budget", "transformer", "seed1", "train.log")).read()
    logged = {}
    for m in re.finditer(r"\| valid \| (\{.*\})", log):
        stats = json.loads(m.group(1))
        logged[int(stats["valid_num_updates"])] = float(stats["valid_bleu"])
    expect(proc, [tuple(p) for p in record["curve"]] == sorted(logged.items()) and len(logged) >= 6,
           f"budget.json's curve {record['curve']} to be the 6+ validations of the log {sorted(logged.items())}")
    best = max(logged.values())
    assert record["budget"] == min(u for u, b in logged.items() if b >= best - 0.5)
    cmd = json.load(open(os.path.join(work, "runs", "combo", "seed1", "command.json")))
    assert cmd[cmd.index("--max-update") + 1] == str(record["budget"])
    text = readme.read_text()
    assert text.startswith("<!-- RESULTS TABLE -->\nold\n<!-- /RESULTS TABLE -->\n")  # the first table untouched
    assert f"{record['budget']} updates (where `transformer`'s validation BLEU stopped improving" in text
    # a second call finds budget.json and redoes nothing
    again = _compare(slice_small_test, work, "--budget-from-curve", "6", "--budget-tolerance", "0.5", "--protocol", "same",
                     "--jobs", "2")
    expect(again, "from " + os.path.join(work, "budget", "budget.json") in again.stdout, "a second call to read budget.json")
