"""Recipes: the papers' settings per arch and task, --help of every script, multi30k_en_de end to end."""
import json
import os
import subprocess
import sys

import pytest
from fairseq.models import ARCH_MODEL_REGISTRY

from fairseq_fusion import data_paths
from fairseq_fusion import fusion_options

REPO = data_paths.REPO_ROOT
sys.path.insert(0, os.path.join(REPO, "recipes", "common"))
import settings  # noqa: E402

TASKS = ["wmt14_en_de", "wmt14_en_fr", "wmt16_ro_en", "wmt17_zh_en", "wmt17_en_ru", "wmt18_en_cs", "wmt18_en_fi", "multi30k_en_de"]
FUSION_ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m.__name__ == "FusionTransformerModel")


def test_every_task_of_the_issue_has_a_recipe():
    assert sorted(settings.TASKS) == sorted(TASKS)
    for task in TASKS:
        for step in ("prepare", "train", "evaluate"):
            assert os.access(os.path.join(REPO, "recipes", task, f"{step}.sh"), os.X_OK), f"{task}/{step}.sh"


@pytest.mark.parametrize("arch", FUSION_ARCHS)
def test_every_arch_trains_with_its_papers_settings(arch):
    """Each registered arch maps to a paper that trains on some task; criterion = the arch's default."""
    if arch.startswith("fusion_transformer"):
        assert settings.paper_of(arch, "wmt14_en_de") == "emelin"  # baselines: the task's first paper
        return
    paper = settings.paper_of(arch)  # raises for an arch of no paper
    task = next(t for t, spec in settings.TASKS.items() if paper in spec["papers"])
    s = settings.train_settings(task, arch, n_gpus=8)
    assert s["criterion"] == fusion_options.default_criterion(arch)
    assert s["fp16"] == (s["size"] == "big" or paper != "yang")


def test_emelin_warmup_lr_and_batch():
    """Emelin et al. A.1: warm-up 4k/6k/8k (base, + shortcuts, + feature-fusion), 16k big; 25k tokens; 150k/300k."""
    cases = {"fusion_transformer": 4000, "transformer_lexical_shortcuts": 6000, "transformer_lexical_shortcuts_ff": 8000,
             "transformer_lexical_shortcuts_ff_big": 16000, "fusion_transformer_big": 16000}
    for arch, warmup in cases.items():
        s = settings.train_settings("wmt14_en_de", arch, "emelin", n_gpus=4)
        assert s["warmup"] == warmup, arch
        d = 1024 if arch.endswith("_big") else 512
        assert s["lr"] == pytest.approx(d ** -0.5 * warmup ** -0.5)  # Vaswani et al. Eq. 3 at its peak
        assert s["max_update"] == (300000 if d == 1024 else 150000)
        assert s["update_freq"] * 4 * s["max_tokens"] >= 25000 > (s["update_freq"] - 1) * 4 * s["max_tokens"]
        assert s["average"] == (16 if d == 1024 else 5) and s["save_interval_updates"] == 4000
    assert settings.bpe_settings("wmt18_en_cs", "emelin") == dict(merges=89500, threshold=50, truecase=True, max_len=250, max_ratio=9.0)
    assert settings.bpe_settings("wmt17_en_ru", "emelin")["merges"] == 32000


def test_size_and_warmup_follow_the_model_flags_not_the_arch_name():
    """Emelin et al. A.1's warm-up from the techniques the flags turn on, the size from the embedding dim."""
    cases = [("fusion_transformer", [], "base", 4000), ("fusion_transformer", ["--lexical-shortcuts"], "base", 6000),
             ("fusion_transformer", ["--lexical-shortcuts", "--lexical-shortcuts-feature-fusion"], "base", 8000),
             ("transformer_lexical_shortcuts_ff", ["--lexical-shortcuts-feature-fusion", "false"], "base", 6000),
             ("fusion_transformer", ["--encoder-embed-dim", "1024", "--decoder-embed-dim", "1024"], "big", 16000)]
    for arch, flags, size, warmup in cases:
        s = settings.train_settings("wmt14_en_de", arch, "emelin", n_gpus=4, flags=flags)
        assert (s["size"], s["warmup"]) == (size, warmup), (arch, flags)
        assert s["max_update"] == (300000 if size == "big" else 150000)
    out = subprocess.run([sys.executable, os.path.join(REPO, "recipes", "common", "settings.py"), "train", "--task", "wmt14_en_de",
                          "--arch", "fusion_transformer", "--paper", "emelin", "--model-flags=--lexical-shortcuts"],
                         capture_output=True, text=True, check=True).stdout
    assert "--warmup-updates 6000" in out.replace("'", "")


def test_length_ratio_cleaning_per_paper():
    """fairseq's prepare scripts clean with a length ratio of 1.5 (Yang et al. A.1; Liu et al.'s En-De/En-Fr via
    Ott et al. 2018); Moses' default 9 elsewhere."""
    ratio = {(p, t): settings.bpe_settings(t, p)["max_ratio"] for p, t in
             [("yang", "wmt14_en_de"), ("yang", "wmt17_zh_en"), ("liu", "wmt14_en_de"), ("liu", "wmt14_en_fr"),
              ("liu", "wmt16_ro_en"), ("emelin", "wmt14_en_de"), ("dou", "wmt14_en_de")]}
    assert ratio == {("yang", "wmt14_en_de"): 1.5, ("yang", "wmt17_zh_en"): 1.5, ("liu", "wmt14_en_de"): 1.5,
                     ("liu", "wmt14_en_fr"): 1.5, ("liu", "wmt16_ro_en"): 9.0, ("emelin", "wmt14_en_de"): 9.0,
                     ("dou", "wmt14_en_de"): 9.0}
    out = subprocess.run([sys.executable, os.path.join(REPO, "recipes", "common", "settings.py"), "prepare", "--task",
                          "wmt14_en_de", "--paper", "yang"], capture_output=True, text=True, check=True).stdout
    assert "MAX_RATIO=1.5" in out
    assert '--max-ratio "$MAX_RATIO"' in open(os.path.join(REPO, "recipes", "common", "recipe.sh")).read()


def test_other_papers_settings():
    liu = settings.train_settings("wmt14_en_de", "transformer_surface_fusion_big", n_gpus=8, max_tokens=3584)
    assert (liu["beam"], liu["lenpen"], liu["max_update"], liu["dropout"], liu["average"]) == (5, 0.6, 30000, 0.3, None)
    assert liu["update_freq"] == 16  # Ott et al. 2018: 8 GPUs x 3584 tokens x 16 = "460K" tokens
    ro = settings.train_settings("wmt16_ro_en", "transformer_surface_fusion", size="base")
    assert (ro["beam"], ro["lenpen"], ro["max_update"], ro["batch_tokens"]) == (4, 1.0, 60000, 16000)
    # SurfaceFusion's lambda: 0.8 on Ro-En (Liu et al. §4.1), the presets' 0.9 on En-De / En-Fr, as fairseq reads it
    from fairseq import options

    for task, arch, lam in (("wmt16_ro_en", "transformer_surface_fusion", 0.8), ("wmt16_ro_en", "transformer_surface_fusion_soft", 0.8),
                            ("wmt14_en_de", "transformer_surface_fusion_big", 0.9)):
        train_args = settings.train_command_args(settings.train_settings(task, arch, size="base"))
        parsed = options.parse_args_and_arch(options.get_training_parser(), ["data", "--user-dir", os.path.join(REPO, "fairseq_fusion"),
                                                                              *train_args])
        assert parsed.surface_fusion_lambda == lam, (task, arch)
    assert "--surface-fusion-lambda" not in settings.train_command_args(settings.train_settings("wmt16_ro_en", "fusion_transformer", "liu"))
    fr = settings.train_settings("wmt14_en_fr", "transformer_surface_fusion_big")
    assert (fr["beam"], fr["lenpen"], fr["max_update"], fr["dropout"]) == (5, 0.9, 80000, 0.1)
    yang = settings.train_settings("wmt17_zh_en", "transformer_simplified_decoder")
    assert (yang["beam"], yang["average"], settings.bpe_settings("wmt17_zh_en", "yang")["merges"]) == (10, None, 40000)
    xu = settings.train_settings("wmt14_en_de", "transformer_phrase_big")
    assert (xu["warmup"], xu["dropout"], xu["share"], xu["average"], xu["max_positions"]) == (8000, 0.3, "decoder", 20, 256)
    assert settings.train_settings("wmt14_en_fr", "transformer_phrase_big")["dropout"] == 0.1
    dou = settings.train_settings("wmt17_zh_en", "transformer_hierarchical_aggregation_big", n_gpus=8)
    assert (dou["batch_tokens"], dou["update_freq"], settings.bpe_settings("wmt17_zh_en", "dou")["max_len"]) == (32768, 1, 50)
    with pytest.raises(ValueError, match="does not train on wmt17_en_ru"):
        settings.train_settings("wmt17_en_ru", "transformer_phrase")
    args = settings.train_command_args(liu, n_gpus=8)
    assert "--fp16" in args and args[args.index("--update-freq") + 1] == "16" and "--ddp-backend" in args


def test_readme_table_lists_every_paper_and_task():
    table = settings.readme_table()
    for paper in ("emelin", "dou", "xu", "yang", "liu"):
        for task in (t for t, s in settings.TASKS.items() if paper in s["papers"]):
            assert f"| {paper} | {task} |" in table


def run_recipe(task, step, *args, env=None, check=True):
    proc = subprocess.run(["bash", os.path.join(REPO, "recipes", task, f"{step}.sh"), *args], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1", **(env or {})))
    if check and proc.returncode != 0:
        raise AssertionError(f"{task}/{step}.sh {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.mark.parametrize("task", TASKS)
def test_help_of_every_script(task):
    for step in ("prepare", "train", "evaluate"):
        out = run_recipe(task, step, "--help").stdout
        assert f"recipes/{task}/{step}.sh" in out and len(out.splitlines()) > 5
    assert "unknown option --bogus" in run_recipe(task, "prepare", "--bogus", check=False).stderr


def test_prepare_rejects_incomplete_local_folder(tmp_path):
    (tmp_path / "train.en").write_text("a\n")
    proc = run_recipe("wmt14_en_de", "prepare", "--local", str(tmp_path), "--work", str(tmp_path / "w"), check=False)
    assert proc.returncode != 0 and "missing train.de" in proc.stderr


def test_wmt14_evaluate_scores_a_system_output(tmp_path):
    system = data_paths.data_path("wmt14", "system_outputs", "sennrich2016.newstest2014.de.tok.gz", must_exist=False)
    if not os.path.exists(system):
        pytest.skip("shared wmt14 data not found")
    ref = data_paths.data_path("wmt14", "newstest2014.de")
    out = str(tmp_path / "nt14")
    stdout = run_recipe("wmt14_en_de", "evaluate", "--hyp", system, "--ref", ref, "--out", out).stdout
    direct = subprocess.run([os.path.join(os.path.dirname(sys.executable), "sacrebleu"), ref, "-i", out + ".detok", "-b", "-w", "2"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert f"BLEU = {direct} " in stdout and "tokenized BLEU (compound split)" in stdout


def test_multi30k_recipe_end_to_end(tmp_path):
    """prepare (local copy) -> train (a few updates, tiny model) -> evaluate (generate + both BLEUs)."""
    import sacrebleu

    env = {"WORK": str(tmp_path), "BPE_MERGES": "300", "MAX_UPDATE": "2", "AVERAGE": "2", "GEN_ARGS": "--max-len-a 0 --max-len-b 8",
           "EXTRA_ARGS": "--encoder-embed-dim 32 --decoder-embed-dim 32 --encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 "
                         "--save-interval-updates 1 --num-workers 0"}
    run_recipe("multi30k_en_de", "prepare", "--max-lines", "200", "--workers", "1", env=env)
    data = tmp_path / "data-multi30k.en-de"
    assert (data / "dict.en.txt").exists() and (data / "test2.en-de.de.bin").exists()
    run_recipe("multi30k_en_de", "train", "fusion_transformer", env=env)
    save = tmp_path / "checkpoints" / "fusion_transformer.multi30k.en-de"
    assert (save / "checkpoint_1_2.pt").exists()
    stdout = run_recipe("multi30k_en_de", "evaluate", "fusion_transformer", env=env).stdout
    result = json.loads((save / "eval" / "test.json").read_text())
    assert result["sentences"] == 200 and (save / "eval" / "average.last2.pt").exists()
    with open(save / "eval" / "test.detok", encoding="utf-8") as f:
        detok = [line.rstrip("\n") for line in f]
    refs = (data / "tok" / "test.raw.de").read_text(encoding="utf-8").splitlines()
    assert result["sacrebleu"]["score"] == pytest.approx(sacrebleu.corpus_bleu(detok, [refs]).score, abs=1e-9)
    assert "beam 5, length penalty 1.0" in stdout
