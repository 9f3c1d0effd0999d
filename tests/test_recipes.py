"""Recipes: the papers' settings per arch and task, --help of every script, multi30k_en_de end to end."""
import json
import math
import os
import re
import subprocess
import sys

import pytest
from fairseq.models import ARCH_MODEL_REGISTRY

from cli_runner import expect
from conftest import run_cli, run_recipe, write_dicts

from fairseq_fusion_tools import data_paths
from fairseq_fusion import fusion_options

REPO = data_paths.REPO_ROOT
from fairseq_fusion_tools import recipe_settings as settings  # noqa: E402

TASKS = ["wmt14_en_de", "wmt14_en_fr", "wmt16_ro_en", "wmt17_zh_en", "wmt17_en_ru", "wmt18_en_cs", "wmt18_en_fi", "multi30k_en_de",
         "cnndm_summarization", "conll14_gec"]
FUSION_ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m.__name__ == "FusionTransformerModel")


def settings_printed(capsys, *args):
    """What ``python recipes/common/settings.py ARGS`` prints: the script's recipe_settings.main, run in this process
    (the recipes run the script itself: test_multi30k_recipe_end_to_end)."""
    capsys.readouterr()
    settings.main(list(args))
    return capsys.readouterr().out


def test_every_task_of_the_issue_has_a_recipe():
    assert sorted(settings.TASKS) == sorted(TASKS)
    for task in TASKS:
        for step in ("prepare", "train", "evaluate"):
            assert os.access(os.path.join(REPO, "recipes", task, f"{step}.sh"), os.X_OK), f"{task}/{step}.sh"


@pytest.mark.parametrize("arch", FUSION_ARCHS)
def test_every_arch_trains_with_its_papers_settings(arch):
    """Each registered arch maps to a paper that trains on some task, and fairseq parses the command the recipe
    builds for it; Dou's diversity regularizer trains with its criterion, Yang's base models in FP32 (A.1)."""
    from fairseq import options

    paper = settings.paper_of(arch, "wmt14_en_de")  # raises for an arch of no paper (baselines: the task's first paper)
    task = next(t for t, spec in settings.TASKS.items() if paper in spec["papers"])
    s = settings.train_settings(task, arch, n_gpus=8)
    parsed = options.parse_args_and_arch(options.get_training_parser(), ["data", "--user-dir", os.path.join(REPO, "fairseq_fusion"),
                                                                          *settings.train_command_args(s, n_gpus=8)])
    diversity = arch == "transformer_hierarchical_aggregation_big"  # Dou et al. Table 2's "+ Ldiversity" model
    assert parsed.criterion == ("label_smoothed_cross_entropy_with_diversity" if diversity else "label_smoothed_cross_entropy")
    assert parsed.label_smoothing == 0.1
    assert parsed.fp16 == (not (paper == "yang" and s["size"] == "base"))


MULTI30K_SMALL = {"encoder_layers": 3, "decoder_layers": 3, "encoder_embed_dim": 128, "decoder_embed_dim": 128,
                  "encoder_ffn_embed_dim": 512, "decoder_ffn_embed_dim": 512, "encoder_attention_heads": 4,
                  "decoder_attention_heads": 4}


@pytest.mark.parametrize("arch", FUSION_ARCHS)
def test_every_arch_trains_on_multi30k_with_the_small_setting(arch, tmp_path):
    """Multi30k takes every registered arch (no --paper): recipes/README.md's small setting replaces the paper's
    size and training settings, the arch keeps its technique flags and its criterion; fairseq parses the command and
    builds the model and the criterion from it."""
    from fairseq import options, tasks

    assert settings.paper_of(arch, "multi30k_en_de") == "multi30k"
    s = settings.train_settings("multi30k_en_de", arch)
    data = write_dicts(tmp_path, 40, ("en", "de"))
    parsed = options.parse_args_and_arch(options.get_training_parser(), [
        data, "--user-dir", os.path.join(REPO, "fairseq_fusion"), "-s", "en", "-t", "de", *settings.train_command_args(s)])
    assert {k: getattr(parsed, k) for k in MULTI30K_SMALL} == MULTI30K_SMALL
    assert (parsed.dropout, parsed.lr, parsed.warmup_updates, parsed.max_update, parsed.max_tokens, parsed.update_freq,
            parsed.save_interval_updates, parsed.share_all_embeddings, parsed.fp16) == (0.3, [1e-3], 1000, 6000, 4096, [1], 500, True, False)
    assert (s["size"], s["beam"], s["lenpen"], s["average"]) == ("base", 5, 1.0, 5)
    diversity = arch == "transformer_hierarchical_aggregation_big"  # Dou et al. Table 2's "+ Ldiversity" model
    assert parsed.criterion == ("label_smoothed_cross_entropy_with_diversity" if diversity else "label_smoothed_cross_entropy")
    # the arch's own technique flags, as --arch gives them (those that follow --dropout, e.g. the layer-attention
    # DropConnect, at the setting's dropout); none of a paper's per-task values (README: SurfaceFusion keeps 0.9)
    preset = settings.model_args(arch, ["--dropout", "0.3"])
    technique = [f.name for g in fusion_options.GROUPS for f in g.flags]
    assert {f: getattr(parsed, f, None) for f in technique} == {f: getattr(preset, f, None) for f in technique}
    if arch.startswith("transformer_surface_fusion"):
        assert parsed.surface_fusion_lambda == 0.9
    task = tasks.setup_task(parsed)
    model = task.build_model(parsed)
    task.build_criterion(parsed)
    assert model.encoder.embed_tokens.embedding_dim == 128 and len(model.decoder.layers) == 3


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


def test_size_and_warmup_follow_the_model_flags_not_the_arch_name(capsys):
    """Emelin et al. A.1's warm-up from the techniques the flags turn on, the size from the embedding dim."""
    cases = [("fusion_transformer", [], "base", 4000), ("fusion_transformer", ["--lexical-shortcuts"], "base", 6000),
             ("fusion_transformer", ["--lexical-shortcuts", "--lexical-shortcuts-feature-fusion"], "base", 8000),
             ("transformer_lexical_shortcuts_ff", ["--lexical-shortcuts-feature-fusion", "false"], "base", 6000),
             ("fusion_transformer", ["--encoder-embed-dim", "1024", "--decoder-embed-dim", "1024"], "big", 16000)]
    for arch, flags, size, warmup in cases:
        s = settings.train_settings("wmt14_en_de", arch, "emelin", n_gpus=4, flags=flags)
        assert (s["size"], s["warmup"]) == (size, warmup), (arch, flags)
        assert s["max_update"] == (300000 if size == "big" else 150000)
    out = settings_printed(capsys, "train", "--task", "wmt14_en_de", "--arch", "fusion_transformer", "--paper", "emelin",
                           "--model-flags=--lexical-shortcuts")
    assert "--warmup-updates 6000" in out.replace("'", "")


def test_length_ratio_cleaning_per_paper(capsys):
    """fairseq's prepare scripts clean with a length ratio of 1.5 (Yang et al. A.1; Liu et al.'s En-De/En-Fr via
    Ott et al. 2018); Moses' default 9 elsewhere."""
    ratio = {(p, t): settings.bpe_settings(t, p)["max_ratio"] for p, t in
             [("yang", "wmt14_en_de"), ("yang", "wmt17_zh_en"), ("liu", "wmt14_en_de"), ("liu", "wmt14_en_fr"),
              ("liu", "wmt16_ro_en"), ("emelin", "wmt14_en_de"), ("dou", "wmt14_en_de")]}
    assert ratio == {("yang", "wmt14_en_de"): 1.5, ("yang", "wmt17_zh_en"): 1.5, ("liu", "wmt14_en_de"): 1.5,
                     ("liu", "wmt14_en_fr"): 1.5, ("liu", "wmt16_ro_en"): 9.0, ("emelin", "wmt14_en_de"): 9.0,
                     ("dou", "wmt14_en_de"): 9.0}
    out = settings_printed(capsys, "prepare", "--task", "wmt14_en_de", "--paper", "yang")
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


def test_readme_shows_the_current_settings_table():
    """recipes/README.md carries the table settings.py prints (regenerate it after changing a setting)."""
    with open(os.path.join(REPO, "recipes", "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert settings.readme_table() in readme


def test_data_per_paper(capsys):
    """Dev/test sets, direction and corpora as the papers name them; the headline test set is subset test."""
    d = settings.data_settings
    assert d("wmt14_en_fr", "liu")["valid_name"] == "newstest2012+newstest2013"  # Liu et al. A.1
    assert d("wmt14_en_fr", "xu")["valid_name"] == "newstest2013"
    assert (d("wmt17_zh_en", "yang")["src"], d("wmt17_zh_en", "dou")["src"]) == ("en", "zh")  # Yang En->Zh, Dou Zh->En
    for task in ("wmt18_en_cs", "wmt18_en_fi"):  # Emelin et al. Table 2: newstest2015 and 2018, the WMT18 one first
        assert [n for _, n in d(task, "emelin")["test"]] == ["newstest2018", "newstest2015"]
    assert [n for _, n in d("wmt14_en_de", "emelin")["test"]] == [f"newstest{y}" for y in range(2014, 2019)]  # Table 1
    assert [n for _, n in d("wmt17_en_ru", "emelin")["test"]] == ["newstest2017", "newstest2018"]
    assert d("wmt14_en_de", "liu")["preprocessed"]["nwords"] == 32768  # Table 4's En-De vocabulary
    assert d("wmt16_ro_en", "liu")["preprocessed"]["train"] == "train/corpus.bpe"  # the authors' README
    assert d("wmt14_en_de", "emelin")["preprocessed"] is None
    urls = {t: " ".join(u for u, _ in settings.TASKS[t]["train"]) for t in settings.TASKS}
    assert "OPUS-UNPC/v1.0/moses/en-zh" in urls["wmt17_zh_en"] and "OPUS-UNPC/v1.0/moses/en-ru" in urls["wmt17_en_ru"]
    assert "paracrawl-release1.en-cs" in urls["wmt18_en_cs"] and "paracrawl-release1.en-fi" in urls["wmt18_en_fi"]
    assert any("CWMT" in name for name, _ in settings.TASKS["wmt17_zh_en"]["registration"])
    out = settings_printed(capsys, "prepare", "--task", "wmt17_zh_en", "--paper", "yang")
    assert "SRC=en\nTGT=zh" in out and "CWMT" in out


@pytest.mark.parametrize("task", TASKS)
def test_help_of_every_script(task):
    for step in ("prepare", "train", "evaluate"):
        out = run_recipe(task, step, "--help").stdout
        assert f"recipes/{task}/{step}.sh" in out and len(out.splitlines()) > 5
    assert "unknown option --bogus" in run_recipe(task, "prepare", "--bogus", check=False).stderr


RECIPE_SH = open(os.path.join(REPO, "recipes", "common", "recipe.sh")).read()


def shell_function(src, name):
    return re.search(rf"^{name}\(\) \{{.*?^\}}", src, re.S | re.M).group(0)


def parsed_options(src):
    """The options a bash parser takes: case patterns (``--x)``, ``-t|--target-lang)``) and tests (``== --x``)."""
    flags = {f for pattern in re.findall(r"^\s*((?:-[\w-]+\|?)+)\)[ \t]+\S", src, re.M) for f in pattern.split("|")}
    return (flags | set(re.findall(r"== (--[\w-]+)", src))) - {"-h", "--help"}


def documented_options(help_text):
    """The options of a --help: in its usage lines and at the start of its option lines ("  --x ARG  what")."""
    usage = help_text.split("\n\n")[0]
    heads = [re.split(r"\s{2,}", line.strip())[0] for line in help_text.splitlines() if re.match(r"^  -", line)]
    return set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", usage + "\n" + "\n".join(heads)))


@pytest.mark.parametrize("task", TASKS)
def test_help_describes_the_options_the_scripts_take(task):
    """Each step's --help names exactly the options its parser takes and that work for the task: --preprocessed /
    --from-raw where a paper trained on a release, --hyp where the metric is BLEU, --paper / --reverse where prepare.sh
    prepares more than the task's one setting and direction (cnndm, conll14 refuse them)."""
    spec = settings.TASKS[task]
    own = spec.get("own_prepare", False)
    common = parsed_options(shell_function(RECIPE_SH, "parse_common")) - ({"--paper", "--reverse"} if own else set())
    script = open(os.path.join(REPO, "recipes", task, "prepare.sh")).read()
    if "recipe_prepare" in script:
        prepare = parsed_options(shell_function(RECIPE_SH, "recipe_prepare"))
        if not any(settings.data_settings(task, p)["preprocessed"] for p in spec["papers"]):
            prepare -= {"--preprocessed", "--from-raw"}
    else:
        prepare = parsed_options(script)
    train = parsed_options(shell_function(RECIPE_SH, "recipe_train"))
    evaluate = parsed_options(shell_function(RECIPE_SH, "recipe_evaluate")) - {"--hyp"}
    if spec.get("metric", "bleu") == "bleu":
        evaluate |= parsed_options(shell_function(RECIPE_SH, "score_only"))
    for step, expected in (("prepare", prepare), ("train", train), ("evaluate", evaluate)):
        assert documented_options(run_recipe(task, step, "--help").stdout) == common | expected, step
    if own:
        for step, args in (("prepare", ["--reverse"]), ("train", ["fusion_transformer", "--paper", "vaswani"])):
            proc = run_recipe(task, step, *args, env={"N_GPUS": "0"}, check=False)
            assert proc.returncode == 2 and proc.stderr.startswith("error: --"), (step, proc.stderr)


def test_benchmark_and_compare_help(tmp_path):
    """recipes/benchmark/run.sh and recipes/compare/multi30k.sh --help: usage only (nothing prepared or run), naming
    each environment variable the script reads."""
    for script in ("benchmark/run.sh", "compare/multi30k.sh"):
        path = os.path.join(REPO, "recipes", script)
        proc = subprocess.run(["bash", path, "--help"], capture_output=True, text=True, cwd=str(tmp_path),
                              env=dict(os.environ, BIN=str(tmp_path / "bin"), WORK=str(tmp_path / "work"), DATA=str(tmp_path / "none")))
        assert proc.returncode == 0 and "flag (fusion-" in proc.stdout and not os.listdir(tmp_path), proc.stderr
        read = set(re.findall(r"\$\{([A-Z_]+):[-+]", open(path).read()))
        assert read <= set(re.findall(r"\b([A-Z]+)=", proc.stdout)), script


def test_prepare_rejects_incomplete_local_folder(tmp_path):
    (tmp_path / "train.en").write_text("a\n")
    proc = run_recipe("wmt14_en_de", "prepare", "--local", str(tmp_path), "--work", str(tmp_path / "w"), check=False)
    expect(proc, proc.returncode != 0 and "missing train.de" in proc.stderr, "a refusal naming the missing train.de")


def test_wmt14_evaluate_scores_a_system_output(tmp_path):
    system = data_paths.data_path("wmt14", "system_outputs", "sennrich2016.newstest2014.de.tok.gz", must_exist=False)
    if not os.path.exists(system):
        pytest.skip("shared wmt14 data not found")
    ref = data_paths.data_path("wmt14", "newstest2014.de")
    out = str(tmp_path / "nt14")
    proc = run_recipe("wmt14_en_de", "evaluate", "--hyp", system, "--ref", ref, "--out", out)
    direct = subprocess.run([os.path.join(os.path.dirname(sys.executable), "sacrebleu"), ref, "-i", out + ".detok", "-b", "-w", "2"],
                            capture_output=True, text=True, check=True).stdout.strip()
    expect(proc, f"BLEU = {direct} " in proc.stdout and "tokenized BLEU (compound split)" in proc.stdout,
           f"sacreBLEU's own 'BLEU = {direct}' and the tokenized BLEU (compound split)")


@pytest.mark.long_run
def test_multi30k_recipe_end_to_end(tmp_path):
    """recipes/README.md's Multi30k commands with a paper's arch (transformer_lexical_shortcuts_ff) at tiny size
    through the documented environment overrides: prepare (local copy; again: nothing to do) -> train (the small
    setting's 3+3 layers with the arch's shortcuts, MAX_TOKENS through --update-freq) -> evaluate (averaged
    checkpoints, generate, both BLEUs: sacreBLEU's as sacreBLEU computes it)."""
    import sacrebleu
    import torch

    # EXTRA_ARGS come last: tiny dims, a checkpoint per update, and --update-freq 1 (the recipe's, from MAX_TOKENS, would
    # make each update a whole epoch of these 200 pairs, which fairseq saves as checkpoint_last.pt only)
    env = {"WORK": str(tmp_path), "BPE_MERGES": "300", "MAX_UPDATE": "2", "MAX_TOKENS": "1000", "N_GPUS": "0", "AVERAGE": "2",
           "GEN_ARGS": "--max-len-a 0 --max-len-b 8",
           "EXTRA_ARGS": "--encoder-embed-dim 32 --decoder-embed-dim 32 --encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 "
                         "--save-interval-updates 1 --update-freq 1 --num-workers 0"}
    prepare = run_recipe("multi30k_en_de", "prepare", "--max-lines", "200", "--workers", "1", env=env)
    data = tmp_path / "data-multi30k.en-de"
    expect(prepare, (data / "dict.en.txt").exists() and (data / "test2.en-de.de.bin").exists(),
           f"prepare.sh to write dict.en.txt and test2.en-de.de.bin in {data}")
    stamp = os.path.getmtime(data / "prepare.json")
    again = run_recipe("multi30k_en_de", "prepare", env=env)
    expect(again, "is prepared already: nothing to do" in again.stdout and os.path.getmtime(data / "prepare.json") == stamp,
           "a second prepare.sh to say 'is prepared already: nothing to do' and leave prepare.json alone")
    arch = "transformer_lexical_shortcuts_ff"
    train = run_recipe("multi30k_en_de", "train", arch, env=env)
    save = tmp_path / "checkpoints" / f"{arch}.multi30k.en-de"
    expect(train, "with multi30k's settings" in train.stdout, "train.sh to say it trains 'with multi30k's settings'")
    batch = f"--max-tokens 1000 --update-freq {math.ceil(4096 / 1000)}"
    expect(train, (save / "command.txt").exists() and batch in (save / "command.txt").read_text(),
           f"command.txt to record '{batch}' (MAX_TOKENS through --update-freq)")
    expect(train, (save / "checkpoint_1_2.pt").exists(), f"checkpoint_1_2.pt in {save} (--save-interval-updates 1)")
    ckpt = torch.load(save / "checkpoint_1_2.pt", map_location="cpu", weights_only=False)
    model = ckpt["cfg"]["model"]
    model = model if isinstance(model, dict) else vars(model)
    trained = {k: model[k] for k in ("lexical_shortcuts", "lexical_shortcuts_feature_fusion", "encoder_layers",
                                     "encoder_embed_dim", "dropout")}
    assert trained == {"lexical_shortcuts": True, "lexical_shortcuts_feature_fusion": True, "encoder_layers": 3,
                       "encoder_embed_dim": 32, "dropout": 0.3}, "expected the arch's shortcuts at the small setting's " \
                                                                 "3 layers and dropout, EXTRA_ARGS' dim 32"
    evaluate = run_recipe("multi30k_en_de", "evaluate", arch, env=env)
    expect(evaluate, "beam 5, length penalty 1.0" in evaluate.stdout, "evaluate.sh to say 'beam 5, length penalty 1.0'")
    expect(evaluate, (save / "eval" / "average.last2.pt").exists() and (save / "eval" / "test.json").exists(),
           "evaluate.sh to write eval/average.last2.pt (AVERAGE=2) and eval/test.json")
    result = json.loads((save / "eval" / "test.json").read_text())
    expect(evaluate, result["sentences"] == 200, f"200 test sentences scored, not {result['sentences']}")
    with open(save / "eval" / "test.detok", encoding="utf-8") as f:
        detok = [line.rstrip("\n") for line in f]
    refs = (data / "tok" / "test.raw.de").read_text(encoding="utf-8").splitlines()
    direct = sacrebleu.corpus_bleu(detok, [refs]).score
    expect(evaluate, result["sacrebleu"]["score"] == pytest.approx(direct, abs=1e-9),
           f"test.json's sacreBLEU {result['sacrebleu']['score']} to be sacreBLEU's own {direct}")


def test_prepare_joins_dev_parts_and_extra_corpora(tmp_path):
    """Liu's En-Fr dev set is newstest2012+2013 (A.1): --local parts are concatenated; --extra-train adds a corpus
    (registration-only ones) to the training data; the further test sets are optional."""
    from fairseq.data import data_utils

    local, extra = tmp_path / "local", tmp_path / "yandex"
    local.mkdir()
    sizes = {"train": 40, "newstest2012": 7, "newstest2013": 5, "newstest2014": 6}
    for name, n in sizes.items():
        for lang in ("en", "fr"):
            (local / f"{name}.{lang}").write_text("".join(f"{name} line {i} of {lang} .\n" for i in range(n)))
    for lang in ("en", "fr"):
        (tmp_path / f"yandex.{lang}").write_text("".join(f"extra pair {i} in {lang} .\n" for i in range(9)))
    proc = run_recipe("wmt14_en_fr", "prepare", "--paper", "liu", "--local", str(local), "--extra-train", str(extra),
                      "--work", str(tmp_path / "w"), "--workers", "1", env={"BPE_MERGES": "30"})
    data = tmp_path / "w" / "data-liu.en-fr"

    def lines(split):
        return len(data_utils.load_indexed_dataset(str(data / f"{split}.en-fr.fr"), None))

    counts = (lines("valid"), lines("train"), lines("test"))
    expect(proc, counts == (7 + 5, 40 + 9, 6), f"valid/train/test of 12, 49, 6 sentences, not {counts}")
    expect(proc, "newstest2012+newstest2013" in proc.stdout, "the dev set named newstest2012+newstest2013")
    proc = run_recipe("wmt14_en_fr", "prepare", "--paper", "liu", "--local", str(tmp_path / "none"), "--work", str(tmp_path / "v"),
                      check=False)
    expect(proc, proc.returncode != 0 and "no such folder" in proc.stderr, "a refusal of the missing --local folder")


def test_prepare_of_a_preprocessed_release_names_what_it_expects(tmp_path):
    """Liu et al. trained Ro-En on Lee et al.'s release: prepare.sh asks for it by its files, and refuses
    --preprocessed where the paper used raw data."""
    empty = tmp_path / "release"
    empty.mkdir()
    proc = run_recipe("wmt16_ro_en", "prepare", "--paper", "liu", "--preprocessed", str(empty), "--work", str(tmp_path / "w"),
                      check=False)
    expect(proc, proc.returncode != 0 and "no train/corpus.bpe.ro in it" in proc.stderr and "dev/dev.bpe" in proc.stderr,
           "a refusal naming the release's files")
    proc = run_recipe("wmt14_en_de", "prepare", "--paper", "emelin", "--preprocessed", str(empty), "--work", str(tmp_path / "w"),
                      check=False)
    expect(proc, proc.returncode != 0 and "emelin trained wmt14_en_de on raw data" in proc.stderr,
           "a refusal of --preprocessed for a paper trained on raw data")
    proc = run_recipe("wmt16_ro_en", "prepare", "--paper", "liu", "--local", str(empty), "--work", str(tmp_path / "w"), check=False)
    expect(proc, proc.returncode != 0 and "--local/--extra-train need --from-raw" in proc.stderr,
           "a refusal saying --local needs --from-raw")


@pytest.mark.long_run
def test_two_stage_training_with_validation_bleu(tmp_path):
    """train.sh --two-stage (Dou et al. 4.1): the vanilla model first, then ARCH from its last checkpoint; with
    --eval-bleu the log has validation BLEU, which fusion-training-curve plots."""
    from fairseq import checkpoint_utils

    env = {"WORK": str(tmp_path), "BPE_MERGES": "200", "MAX_UPDATE": "2",
           "EXTRA_ARGS": "--encoder-embed-dim 32 --decoder-embed-dim 32 --encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 "
                         "--num-workers 0 --eval-bleu-args {\"beam\":1,\"max_len_a\":0,\"max_len_b\":6}"}
    run_recipe("multi30k_en_de", "prepare", "--max-lines", "120", "--workers", "1", env=env)
    proc = run_recipe("multi30k_en_de", "train", "transformer_hierarchical_aggregation", "--paper", "multi30k", "--two-stage",
                      "--eval-bleu", env=env)
    vanilla = tmp_path / "checkpoints" / "fusion_transformer.multi30k.en-de"
    stage2 = tmp_path / "checkpoints" / "transformer_hierarchical_aggregation.multi30k.en-de"
    expect(proc, "stage 1: the vanilla fusion_transformer" in proc.stdout, "train.sh to train the vanilla model first")
    expect(proc, f"--init-from-vanilla {vanilla}/checkpoint_last.pt" in (stage2 / "command.txt").read_text(),
           "stage 2's command.txt to start from the vanilla checkpoint_last.pt")
    expect(proc, "freshly initialized" in (stage2 / "train.log").read_text(),
           "stage 2's train.log to name the freshly initialized parameters")
    # the aggregation model starts from the vanilla one: two warm-up updates moved the shared weights only a little
    v = checkpoint_utils.load_checkpoint_to_cpu(str(vanilla / "checkpoint_last.pt"))["model"]
    last = checkpoint_utils.load_checkpoint_to_cpu(str(stage2 / "checkpoint_last.pt"))["model"]
    name = "encoder.layers.0.fc1.weight"
    moved, size = (last[name] - v[name]).abs().max().item(), v[name].abs().max().item()
    assert moved < 1e-3 < 0.05 < size, f"expected {name} to move < 1e-3 from the vanilla one (of size > 0.05): {moved}, {size}"
    assert set(last) > set(v), f"expected the vanilla parameters plus the aggregation's; missing {set(v) - set(last)}"
    log = str(stage2 / "train.log")
    valid_lines = [line for line in open(log, encoding="utf-8") if "valid on 'valid' subset" in line]
    expect(proc, valid_lines and all("| bleu " in line for line in valid_lines),
           f"every validation line of {log} to carry '| bleu ' (--eval-bleu)")
    out = str(tmp_path / "curve")
    run_cli(["fusion-training-curve", f"{log}=hier", f"{vanilla}/train.log", "--out", out])
    result = json.load(open(out + ".json"))
    assert set(result["curves"]) == {"hier", vanilla.name} and os.path.exists(out + ".png"), \
        f"expected the curves hier and {vanilla.name} and {out}.png; curves: {sorted(result['curves'])}"
    logged = [float(line.split("| bleu ")[1].split()[0]) for line in valid_lines]
    plotted = [p["bleu"] for p in result["curves"]["hier"]]
    assert plotted == logged, f"expected the plotted BLEU to be the logged {logged}, not {plotted}"

    # a second run reuses the trained vanilla model
    proc = run_recipe("multi30k_en_de", "train", "transformer_hierarchical_aggregation", "--paper", "multi30k", "--two-stage", env=env)
    expect(proc, "stage 1: reusing" in proc.stdout, "a second train.sh --two-stage to reuse the vanilla model")


def test_training_curve_reads_simple_and_json_logs(tmp_path):
    """Validation points from both of fairseq's log formats (lines as fairseq-train writes them); other lines skipped."""
    from fairseq_fusion_tools.cli import training_curve as training_curve_cli
    from fairseq_fusion_tools.scoring import training_curve

    simple = tmp_path / "simple.log"
    simple.write_text(
        "2026-01-01 10:00:00 | INFO | train_inner | epoch 001:    100 / 500 loss=9.1, nll_loss=9.0, ppl=512, num_updates=100\n"
        "2026-01-01 10:01:00 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 7.5 | nll_loss 7.1 | ppl 137.2 | "
        "bleu 3.41 | wps 1000 | wpb 2000 | bsz 60 | num_updates 500\n"
        "2026-01-01 10:02:00 | INFO | valid | epoch 002 | valid on 'test' subset | loss 7.0 | nll_loss 6.8 | ppl 111 | num_updates 1000\n"
        "2026-01-01 10:02:00 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 6.2 | nll_loss 5.9 | ppl 59.7 | "
        "bleu 8.05 | num_updates 1000 | best_loss 6.2\n")
    js = tmp_path / "json.log"
    js.write_text('2026-01-01 10:01:00 | INFO | valid | {"epoch": 1, "valid_loss": "7.5", "valid_nll_loss": "7.1", '
                  '"valid_ppl": "137.2", "valid_wps": "1000", "valid_num_updates": "500"}\n')
    assert training_curve.read_log(str(simple)) == [
        {"num_updates": 500, "bleu": 3.41, "loss": 7.5, "nll_loss": 7.1, "ppl": 137.2},
        {"num_updates": 1000, "bleu": 8.05, "loss": 6.2, "nll_loss": 5.9, "ppl": 59.7}]
    assert training_curve.read_log(str(simple), "test") == [{"num_updates": 1000, "bleu": None, "loss": 7.0, "nll_loss": 6.8, "ppl": 111}]
    assert training_curve.read_log(str(js)) == [{"num_updates": 500, "bleu": None, "loss": 7.5, "nll_loss": 7.1, "ppl": 137.2}]
    empty = tmp_path / "empty.log"
    empty.write_text("2026-01-01 10:00:00 | INFO | fairseq_cli.train | no validation here\n")
    with pytest.raises(SystemExit, match="has no 'valid' validation lines"):
        training_curve.main(training_curve_cli.get_parser().parse_args([str(empty), "--out", str(tmp_path / "o")]))


def test_evaluate_without_checkpoints_to_average_names_the_alternatives(tmp_path):
    """A run shorter than the save interval leaves checkpoint_last.pt/checkpoint_best.pt and no checkpoint_E_U.pt:
    evaluate.sh says how many it found and how many the setting averages, and how to evaluate the best or last one;
    with no checkpoint at all it says to train first. One line each."""
    save = tmp_path / "checkpoints" / "fusion_transformer.multi30k.en-de"
    save.mkdir(parents=True)
    env = {"WORK": str(tmp_path), "N_GPUS": "0"}
    proc = run_recipe("multi30k_en_de", "evaluate", "fusion_transformer", env=env, check=False)
    assert proc.returncode == 2 and proc.stderr.strip() == f"error: no checkpoint in {save}: train first " \
                                                           "(recipes/multi30k_en_de/train.sh fusion_transformer)"
    for name in ("checkpoint_best.pt", "checkpoint_last.pt"):
        (save / name).write_bytes(b"")
    proc = run_recipe("multi30k_en_de", "evaluate", "fusion_transformer", env=env, check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: found 0 checkpoint_E_U.pt in {save}, multi30k's setting averages the last 5 ")
    assert "AVERAGE=0" in lines[0] and f"--checkpoint {save}/checkpoint_last.pt" in lines[0]


@pytest.mark.parametrize("step, args, expected", [
    ("prepare", ["--local", "{tmp}/no-such-folder"], "error: --local {tmp}/no-such-folder: no such folder"),
    ("prepare", ["--paper", "vaswanni"], "error: unknown paper 'vaswanni'; papers: vaswani,"),
    ("prepare", ["--bogus"], "error: prepare.sh: unknown option --bogus (see --help)"),
    ("train", ["--bogus"], "error: the first argument must be ARCH (see --help)"),
    ("train", ["transformer_surface_fusoin"], "error: unknown arch 'transformer_surface_fusoin'; fusion_transformer archs:"),
    ("train", ["transformer", "--work", "{tmp}"], "error: {tmp}/data-multi30k.en-de not prepared: run "
                                                   "recipes/multi30k_en_de/prepare.sh"),
    ("evaluate", ["transformer", "--work", "{tmp}"], "error: no checkpoint in {tmp}/checkpoints/transformer.multi30k.en-de: "
                                                      "train first"),
    ("evaluate", ["transformer", "--bogus"], "error: evaluate.sh: unknown option --bogus (see --help)"),
], ids=lambda v: v if isinstance(v, str) and not v.startswith("error") else None)
def test_recipe_mistakes_are_one_line(tmp_path, step, args, expected):
    """The recipes' scripts, fed the mistakes users make (the mistakes matrix of tests/test_mistakes.py for the shell
    scripts): one line naming the option or folder and what to do, exit status 2, nothing written."""
    proc = run_recipe("multi30k_en_de", step, *[a.format(tmp=tmp_path) for a in args], check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(expected.format(tmp=tmp_path)), proc.stderr[-2000:]
    assert not os.listdir(tmp_path)
