"""fusion-compare: systems x seeds on the real Multi30k slice; the table checked against sacreBLEU run here on the
run's own outputs, fairseq's parameter count against the checkpoint, the bootstrap against sacreBLEU's command line;
resuming (nothing redone, an interrupted run continues from its checkpoint) and refusals."""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

import pytest
import sacrebleu
import torch

from fairseq_fusion_tools.compare import figure, protocols, table, training
from cli_runner import expect
from conftest import BIN, REPO, run_cli, shell_env


def test_system_specs():
    assert protocols.parse_system("transformer") == {"name": "transformer", "arch": "transformer", "flags": []}
    assert protocols.parse_system("combo=fusion_transformer --surface-fusion hard") == {
        "name": "combo", "arch": "fusion_transformer", "flags": ["--surface-fusion", "hard"]}
    for bad in ("x=--arch fusion_transformer", "a b=fusion_transformer", "=", ""):
        with pytest.raises(ValueError):
            protocols.parse_system(bad)


def test_words_per_second_is_training_time_after_each_attempts_first_interval(tmp_path):
    """Words over fairseq's train_wall, summed over intervals (validation and checkpoint saves left out);
    each process's first logged interval (warm-up) is left out: an interrupted run's second attempt begins with one."""
    log = tmp_path / "train.log"

    def inner(updates, wpb, train_wall, wps):
        return (f'2026-01-01 | INFO | train_inner | {{"epoch": 1, "wps": "{wps}", "wpb": "{wpb}", '
                f'"num_updates": "{updates}", "train_wall": "{train_wall}"}}')
    lines = ["# 2026-01-01 00:00:00 fairseq-train data-bin",
             "2026-01-01 | INFO | fairseq_cli.train | num. shared model params: 1,234,567 (num. trained: 1,234,567)",
             inner(25, 1000.0, 90, 10.0),   # warm-up: left out
             inner(50, 2000.0, 20, 900.0),  # 25 updates x 2000 words in 20 s: 2500 words/s
             inner(75, 1000.0, 10, 500.0),  # 25 x 1000 in 10 s: 2500
             inner(100, 1000.0, 50, 300.0),  # 25 x 1000 in 50 s: 500 (disturbed)
             "# 2026-01-01 01:00:00 fairseq-train data-bin",  # resumed from update 80
             "2026-01-01 | INFO | fairseq_cli.train | num. shared model params: 1,234,567 (num. trained: 1,234,567)",
             inner(100, 4000.0, 99, 20.0),  # the second attempt's warm-up: left out
             inner(110, 3000.0, 20, 700.0),  # 10 x 3000 in 20 s: 1500
             '2026-01-01 | INFO | train | {"epoch": 1, "train_loss": "7.5", "train_num_updates": "110"}']
    log.write_text("\n".join(lines) + "\n")
    s = training.train_summary(str(log))
    words, seconds = 25 * 2000 + 25 * 1000 + 25 * 1000 + 10 * 3000, 20 + 10 + 50 + 20
    assert s["words_per_s"] == pytest.approx(words / seconds)  # 1300; fairseq's wps: median 600
    assert (s["wps_median"], s["wps_intervals"], s["updates"], s["params"], s["train_loss"]) == (600.0, 4, 110, 1234567, 7.5)


STOPPED_PARENT = """
import signal, sys
from fairseq_fusion_tools.compare import training
from fairseq_fusion_tools.cli import compare as cli
sys.argv = ["fusion-compare", "data-bin", "--system", "=", "--max-update", "1", "--work", "work"]
try:
    cli.cli_main()  # sets fusion-compare's SIGTERM handler, refuses the --system in one line and exits
except SystemExit:
    pass
assert signal.getsignal(signal.SIGTERM) is training.exit_on_sigterm
child = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(120)"
training.run_logged([sys.executable, "-c", child], LOG)
"""


def test_a_stopped_run_stops_its_training_and_keeps_its_log(tmp_path):
    """SIGTERM to fusion-compare (as ``kill PID`` sends it) stops the fairseq-train it runs, which would otherwise
    train on beside the next attempt; the lines printed so far are in the log while the run goes on."""
    log = tmp_path / "train.log"
    parent = subprocess.Popen([sys.executable, "-c", f"LOG = {str(log)!r}" + STOPPED_PARENT], cwd=REPO,
                              stdout=subprocess.DEVNULL)
    try:
        deadline, line = time.time() + 60, None
        while line is None and time.time() < deadline and parent.poll() is None:
            time.sleep(0.1)
            line = re.search(r"^pid (\d+)$", log.read_text() if log.exists() else "", re.M)
        assert line, "the child's line is not in the log while it runs"  # line by line, not at close
        child = int(line.group(1))
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        parent.kill()
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


def test_table_rows_are_mean_and_sample_sd_over_seeds():
    systems = [protocols.parse_system("base=transformer"), protocols.parse_system("x=fusion_transformer --flag")]

    def run(system, seed, wps, bleu, tok, p=None, baseline_bleu=None):
        return {"system": system, "seed": seed, "train": {"words_per_s": wps, "params": 2_500_000, "updates": 10},
                "eval": {"t": {"sacrebleu": {"score": bleu}, "tokenized_bleu": {"score": tok}}},
                "significance": {} if p is None else {"t": {"p_value": p, "bleu": bleu, "baseline_bleu": baseline_bleu}}}

    # x's seed 2 is tested against the baseline with x's checkpoint selection, where the baseline has 24.5, not its
    # row's 22.0: the difference is -0.5, not the +2.0 the rows' BLEU would suggest
    runs = [run("base", 1, 1000.0, 20.0, 21.0), run("x", 1, 800.0, 23.0, 24.0, 0.01, 20.0),
            run("base", 2, 1200.0, 22.0, 23.0), run("x", 2, 900.0, 24.0, 26.0, 0.2, 24.5)]
    rows = table.summarize(systems, runs, ["t"], "base")
    lines = table.markdown(rows, ["t"], "base").splitlines()
    # base: BLEU 21 +- sqrt(2) = 1.41, words/s 1100; x: 23.5 +- 0.71, 25 +- 1.41, 850 / 1100 = 0.77
    assert lines[2] == "| `base` (`transformer`) | 2.50M | 1100 (1.00) | 21.00 ± 1.41 | 22.00 ± 1.41 | baseline |"
    assert lines[3] == "| `x` (`fusion_transformer --flag`) | 2.50M | 850 (0.77) | 23.50 ± 0.71 | 25.00 ± 1.41 | +3.00 (0.010*), -0.50 (0.200) |"
    runs[1]["significance"] = {"t": {"p_value": None, "same_output": True}}  # seed 1 translated as the baseline
    lines = table.markdown(table.summarize(systems, runs, ["t"], "base"), ["t"], "base").splitlines()
    assert lines[3].endswith("| same output, -0.50 (0.200) |")


def test_readme_block_goes_between_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- RESULTS TABLE -->\nold\n<!-- /RESULTS TABLE -->\nend\n")
    table.update_readme(str(readme), "| new |")
    assert readme.read_text() == "intro\n<!-- RESULTS TABLE -->\n| new |\n<!-- /RESULTS TABLE -->\nend\n"
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="RESULTS TABLE"):
        table.update_readme(str(readme), "| new |")


SYSTEMS = ["--system", "transformer", "--system", "combo=transformer_simplified_decoder --lexical-shortcuts",
           "--system", "transformer_hierarchical_aggregation"]


@pytest.fixture(scope="module")
def slice_small_test(multi30k_slice, tmp_path_factory):
    """The Multi30k slice with its first 30 test and 100 valid sentences as the test and valid sets (an untrained
    model's translation of the whole test set costs 20 s, and the test translates it 16 times; the budget curve
    translates the valid set at every validation)."""
    dest = tmp_path_factory.mktemp("slice_small_test")
    for name in os.listdir(multi30k_slice):
        if not name.startswith(("test.", "valid.")) and name != "tok":
            os.symlink(os.path.join(multi30k_slice, name), dest / name)
    (dest / "tok").mkdir()
    for split, n in (("test", 30), ("valid", 100)):
        for name in (f"{split}.raw.de", f"{split}.bpe.en", f"{split}.bpe.de"):
            lines = open(os.path.join(multi30k_slice, "tok", name), encoding="utf-8").read().splitlines()[:n]
            (dest / "tok" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    staged = tmp_path_factory.mktemp("staged")
    run_cli(["fairseq-preprocess", "-s", "en", "-t", "de", "--testpref", str(dest / "tok" / "test.bpe"),
             "--validpref", str(dest / "tok" / "valid.bpe"), "--destdir", str(staged),
             "--srcdict", os.path.join(multi30k_slice, "dict.en.txt"),
             "--tgtdict", os.path.join(multi30k_slice, "dict.de.txt"), "--workers", "1"])
    for name in os.listdir(staged):
        if name.startswith(("test.", "valid.")):
            os.rename(staged / name, dest / name)
    return str(dest)


def _compare(data, work, *extra, systems=SYSTEMS, check=True):
    return run_cli(["fusion-compare", data, "--work", work, "--size", "tiny", "--max-update", "5", "--seeds", "1", "2",
                    *systems, "--save-interval-updates", "1", "--log-interval", "1", "--bootstrap-samples", "200",
                    "--test-subsets", "test", *extra], check=check)


def _sacrebleu_of_generate(path, ref):
    """Detokenized sacreBLEU of a fairseq-generate log, computed here: H lines by id, BPE off, Moses detok, 13a."""
    import sacrebleu
    from sacremoses import MosesDetokenizer

    hyps = {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^H-(\d+)\t[^\t]*\t(.*)$", line.rstrip("\n"))
        if m:
            hyps[int(m.group(1))] = m.group(2)
    detok = MosesDetokenizer(lang="de")
    out = [detok.detokenize(hyps[i].replace("@@ ", "").split(), unescape=True) for i in range(len(hyps))]
    return sacrebleu.corpus_bleu(out, [open(ref, encoding="utf-8").read().splitlines()]).score


def _average_of(paths):
    """The element-wise mean of the checkpoints' parameters, computed here."""
    states = [torch.load(p, map_location="cpu", weights_only=False)["model"] for p in paths]
    return {k: sum(s[k].double() for s in states) / len(states) for k in states[0]}


@pytest.mark.long_run
def test_compare_end_to_end_protocols_resume_refusals_and_jobs(slice_small_test, tmp_path):
    """The papers' protocols: the transformer (Vaswani) and the hierarchical aggregation (Dou, second stage from
    the transformer's checkpoint, tested against the transformer continued as long) by the average of their last
    5 checkpoints, the simplified decoder (Yang) by its best validation loss; each tested against the baseline
    with the same selection. The runs with --jobs 3 (trained and translated at once; a second stage after its
    baseline). Then a second call, an interrupted run trained again alone (the same translations), refusals."""
    work = str(tmp_path / "work")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- RESULTS TABLE -->\n<!-- /RESULTS TABLE -->\n")
    first_call = _compare(slice_small_test, work, "--readme", str(readme), "--jobs", "3")
    res = json.load(open(os.path.join(work, "results.json")))
    hier, cont = "transformer_hierarchical_aggregation", "transformer+continued"
    expect(first_call, res["complete"] and [r["system"] for r in res["rows"]] == ["transformer", cont, "combo", hier],
           f"a complete results.json with the rows transformer, {cont}, combo, {hier}")
    rows = {r["system"]: r for r in res["rows"]}
    assert [(rows[n]["protocol"]["paper"], rows[n]["protocol"]["stages"], rows[n]["protocol"]["select"], rows[n]["compared_with"])
            for n in rows] == [("vaswani", 1, "average5", None), ("vaswani", 2, "average5", None),
                               ("yang", 1, "best", "transformer"), ("dou", 2, "average5", cont)]
    assert os.path.getsize(os.path.join(work, "results.png")) > 0
    ref = os.path.join(slice_small_test, "tok", "test.raw.de")
    for name, row in rows.items():
        select = row["protocol"]["select"]
        scores = []
        for seed in (1, 2):
            run_dir = os.path.join(work, "runs", name, f"seed{seed}")
            scores.append(_sacrebleu_of_generate(os.path.join(run_dir, "eval", f"test.{select}.generate.txt"), ref))
            # fairseq's parameter count = the unique parameters of the saved model
            state = torch.load(os.path.join(run_dir, "checkpoint_last.pt"), map_location="cpu", weights_only=False)["model"]
            unique = {t.data_ptr(): t.numel() for k, t in state.items() if not k.endswith("_float_tensor")
                      and "version" not in k}
            assert row["params"] == sum(unique.values())
        assert row["subsets"]["test"]["sacrebleu"] == pytest.approx(scores, abs=1e-6)
        assert row["subsets"]["test"]["sacrebleu_mean_sd"] == pytest.approx([statistics.mean(scores), statistics.stdev(scores)])
        expect(first_call, row["updates"] == [5, 5], f"{name}: 5 updates per stage, not {row['updates']}")
    # the tested average is the mean of the last 5 interval checkpoints, computed here
    run_dir = os.path.join(work, "runs", hier, "seed1")
    kept = sorted(n for n in os.listdir(run_dir) if re.fullmatch(r"checkpoint_\d+_\d+\.pt", n))
    assert [int(n.split("_")[2][:-3]) for n in kept] == [1, 2, 3, 4, 5]
    mine = torch.load(os.path.join(run_dir, "eval", "average5.pt"), map_location="cpu", weights_only=False)["model"]
    for k, v in _average_of([os.path.join(run_dir, n) for n in kept]).items():
        assert torch.allclose(mine[k].double(), v, atol=1e-6), k
    # second stages: Dou's arch from the baseline's last checkpoint, the baseline continued from the same one
    first = os.path.join(work, "runs", "transformer", "seed1", "checkpoint_last.pt")
    hier_cmd = json.load(open(os.path.join(run_dir, "command.json")))
    assert hier_cmd[hier_cmd.index("--init-from-vanilla") + 1] == first
    expect(first_call, "--init-from-vanilla " + first + ": loaded" in open(os.path.join(run_dir, "train.log")).read(),
           f"{hier}'s train.log to say it loaded the baseline's checkpoint_last.pt")
    cont_cmd = json.load(open(os.path.join(work, "runs", cont, "seed1", "command.json")))
    assert cont_cmd[cont_cmd.index("--finetune-from-model") + 1] == first
    cont_log = open(os.path.join(work, "runs", cont, "seed1", "train.log")).read()
    first_loss = {n: float(json.loads(re.search(r"\| train_inner \| (\{.*\})", open(os.path.join(
        work, "runs", n, "seed1", "train.log")).read()).group(1))["loss"]) for n in ("transformer", cont)}
    assert first_loss[cont] < first_loss["transformer"] - 0.1  # it starts from the trained weights
    assert [int(json.loads(m)["num_updates"]) for m in re.findall(r"\| train_inner \| (\{.*\})", cont_log)] == [1, 2, 3, 4, 5]
    # each bootstrap against its baseline under the same selection is sacreBLEU's own (its command line); the
    # plot's lower panel draws the same difference per seed, filled where sacreBLEU's p < 0.05, the baselines none
    fig = figure.results_figure(res["rows"], ["test"], "title")
    drawn = {line.get_gid(): list(line.get_ydata()) for line in fig.axes[1].lines if line.get_gid()}
    assert sorted(drawn) == ["combo test", "combo test p<0.05", f"{hier} test", f"{hier} test p<0.05"]
    for name, against, select in (("combo", "transformer", "best"), (hier, cont, "average5")):
        det = [os.path.join(work, "runs", n, "seed1", "eval", f"test.{select}.detok") for n in (against, name)]
        out = subprocess.run([os.path.join(BIN, "sacrebleu"), ref, "-i", *det, "--paired-bs", "--paired-bs-n", "200",
                              "-m", "bleu", "--format", "json"], capture_output=True, text=True, check=True).stdout
        assert open(det[0]).read() != open(det[1]).read()  # a real test (a copy of the baseline is reported as such)
        p_value = json.loads(out)[1]["BLEU"]["p_value"]
        assert rows[name]["subsets"]["test"]["p_values"][0] == pytest.approx(p_value)
        base_bleu, bleu = (sacrebleu.corpus_bleu(open(d).read().splitlines(), [open(ref).read().splitlines()]).score
                           for d in det)
        assert rows[name]["subsets"]["test"]["deltas"][0] == pytest.approx(bleu - base_bleu)
        assert drawn[f"{name} test"][0] == pytest.approx(bleu - base_bleu)
        assert (pytest.approx(bleu - base_bleu) in drawn[f"{name} test p<0.05"]) == (p_value < 0.05)  # seed 1 filled?
    import matplotlib.pyplot as plt

    plt.close(fig)
    table = readme.read_text()
    assert "| `combo` (`transformer_simplified_decoder --lexical-shortcuts`) | Yang et al. 2020: best valid loss |" in table
    assert (f"| `{hier}` | Dou et al. 2018: 2 stages, from `transformer`; average of the last 5; p vs `{cont}` |") in table

    # --jobs 3: a second stage (Dou's arch, the baseline continued) starts after its baseline's run has finished
    for seed in ("seed1", "seed2"):
        finished = os.path.getmtime(os.path.join(work, "runs", "transformer", seed, "train.json"))
        for name in (cont, hier):
            first_line = open(os.path.join(work, "runs", name, seed, "train.log")).readline()
            started = re.match(r"# (\S+ \S+) ", first_line).group(1)
            expect(first_call, time.mktime(time.strptime(started, "%Y-%m-%d %H:%M:%S")) >= int(finished),
                   f"{name} {seed} to start after its baseline's run finished")

    # a second call redoes nothing
    logs = {p: os.path.getsize(p) for p in (os.path.join(work, "runs", n, s, "train.log")
                                            for n in rows for s in ("seed1", "seed2"))}
    gen = os.path.join(work, "runs", "combo", "seed2", "eval", "test.best.generate.txt")
    mtime = os.path.getmtime(gen)
    second_call = _compare(slice_small_test, work)
    expect(second_call, "trained before, reused" in second_call.stdout, "a second call to reuse every run")
    expect(second_call, {p: os.path.getsize(p) for p in logs} == logs and os.path.getmtime(gen) == mtime,
           "a second call to leave the train logs and translations alone")

    # an interrupted run (checkpoint at update 2, no train.json) continues from its checkpoint to update 5, alone,
    # and translates as when it was trained beside two other runs (each in a process of one thread)
    run_dir = os.path.join(work, "runs", "combo", "seed2")
    beside_others = open(os.path.join(run_dir, "eval", "test.best.detok"), encoding="utf-8").read()
    cmd = [a if a != "USER_DIR" else os.path.join(REPO, "fairseq_fusion") for a in json.load(open(os.path.join(run_dir, "command.json")))]
    for name in os.listdir(run_dir):
        if name != "command.json":
            subprocess.run(["rm", "-rf", os.path.join(run_dir, name)], check=True)
    run_cli(["fairseq-train", *cmd, "--max-update", "2"], process=True)  # a process of one thread, as compare's
    assert os.path.exists(os.path.join(run_dir, "checkpoint_last.pt"))
    resumed = _compare(slice_small_test, work)
    log = open(os.path.join(run_dir, "train.log")).read()
    expect(resumed, re.search(r"[Ll]oaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ 2 updates\)", log),
           f"the interrupted run to continue from its checkpoint at update 2 ({run_dir}/train.log)")
    updates = [int(json.loads(m)["num_updates"]) for m in re.findall(r"\| train_inner \| (\{.*\})", log)]
    expect(resumed, updates == [3, 4, 5], f"updates 3, 4, 5 after the checkpoint, not {updates}")
    assert json.load(open(os.path.join(run_dir, "train.json")))["updates"] == 5
    expect(resumed, open(os.path.join(run_dir, "eval", "test.best.detok"), encoding="utf-8").read() == beside_others,
           "the run trained again alone to translate as when it was trained beside the others (--jobs 3)")

    # another command in the same place is refused, naming the folder; a bad flag, or too few checkpoints to
    # average, fail before any training
    proc = _compare(slice_small_test, work, "--train-args", "--dropout 0.3", check=False)
    last = proc.stderr.strip().splitlines()[-1]
    expect(proc, proc.returncode == 1 and "Traceback" not in proc.stderr, "a refusal in one line, exit status 1")
    expect(proc, last.startswith("fairseq-fusion: error: fusion-compare: ") and "seed1 was trained with another command" in last
           and "(recorded -> now: --dropout 0.1 -> 0.3)" in last, "the refusal to name the run and the changed flag")
    proc = run_cli(["fusion-compare", slice_small_test, "--work", str(tmp_path / "w2"), "--size", "tiny", "--max-update", "2",
                    "--system", "transformer", "--system", "x=fusion_transformer --surface-fusion-lambda 0.5"], check=False)
    expect(proc, proc.returncode != 0 and "--surface-fusion" in proc.stderr and not os.path.exists(tmp_path / "w2" / "runs"),
           "a refusal of the flag transformer does not take, before any run")
    proc = run_cli(["fusion-compare", slice_small_test, "--work", str(tmp_path / "w3"), "--size", "tiny", "--max-update", "4",
                    "--save-interval-updates", "1", "--system", "transformer"], check=False)
    expect(proc, proc.returncode != 0 and proc.stderr.strip().splitlines()[-1] == (
        "fairseq-fusion: error: fusion-compare: the protocols average the last 5 checkpoints, but --max-update 4 with "
        "--save-interval-updates 1 saves 4: lower --save-interval-updates, or use --protocol same")
        and not os.path.exists(tmp_path / "w3"), "a refusal of too few checkpoints to average, before any run")


def test_recipe_systems_are_valid(multi30k_slice, tmp_path):
    """recipes/compare/multi30k.sh (the README's table): every system parses and validates (--dry-run)."""
    work = tmp_path / "work"
    work.mkdir()
    os.symlink(multi30k_slice, work / "data-bin")
    (work / "data-bin" / ".done").touch()
    env = shell_env(dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], WORK=str(work)))
    script = os.path.join(REPO, "recipes", "compare", "multi30k.sh")
    assert "fusion-compare" in subprocess.run(["bash", script, "--help"], capture_output=True, text=True, check=True).stdout
    proc = subprocess.run(["bash", script, "--dry-run", "--test-subsets", "test"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trains = [line for line in proc.stdout.splitlines() if line.startswith("fairseq-train ")]
    assert len(trains) == 10 and "--lexical-shortcuts" in trains[-1] and "--surface-fusion hard" in trains[-1]
    second = {line.split("--arch ")[1].split()[0]: line for line in trains if "--init-from-vanilla" in line or "--finetune-from-model" in line}
    assert sorted(second) == ["transformer", "transformer_hierarchical_aggregation"]  # the continued baseline, Dou's
