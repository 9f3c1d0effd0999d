"""One number a newcomer can trust: fusion-score-bleu on a fairseq-generate log says that its sacreBLEU is the result
and that the log's own ``BLEU4 = ...`` (fairseq's score of subword units) is not; the README's quick start says so."""
import os

from conftest import REPO, run_cli

GENERATE_LOG = """S-0\tA dog runs .
T-0\tEin Hund läuft .
H-0\t-0.5\tEin Hu@@ nd läuft .
D-0\t-0.5\tEin Hu@@ nd läuft .
S-1\tTwo men .
T-1\tZwei Männer .
H-1\t-0.4\tZwei Män@@ ner .
D-1\t-0.4\tZwei Män@@ ner .
Generate test with beam=5: BLEU4 = 16.88, 50.1/22.2/11.1/5.5 (BP=1.000, ratio=1.000, syslen=8, reflen=8)
"""


def test_score_bleu_says_the_generate_logs_bleu4_is_not_the_result(tmp_path):
    (tmp_path / "gen.out").write_text(GENERATE_LOG, encoding="utf-8")
    (tmp_path / "ref.de").write_text("Ein Hund läuft.\nZwei Männer.\n", encoding="utf-8")
    proc = run_cli(["fusion-score-bleu", "--hyp", str(tmp_path / "gen.out"), "--ref", str(tmp_path / "ref.de"),
                    "-t", "de"])
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("sacreBLEU (detokenized): BLEU = 100.00")  # the result, first
    assert lines[-1] == (f"(the result is the sacreBLEU above; the last line of {tmp_path / 'gen.out'}, BLEU4 = 16.88, "
                         "is fairseq-generate's own score on subword units (BPE left in: no --remove-bpe): not "
                         "comparable to published scores)")


def test_readme_quick_start_names_the_result():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        quick = f.read().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "fusion-score-bleu --hyp gen.out" in quick and "# the result: its first line, sacreBLEU" in quick
    assert "`BLEU4 = ...`" in quick and "not comparable" in quick
