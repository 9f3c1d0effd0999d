"""fairseq-hydra-train: YAML model sections, the shipped configs (run from the repository root and from elsewhere),
and the same model as the --arch path; fusion-user-dir."""
import argparse
import os
import subprocess
import sys

import pytest
import torch
from conftest import REPO, run_cli, shell_env
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY
from omegaconf import OmegaConf, open_dict

from fairseq_fusion import fusion_options
from fairseq_fusion.models import FusionTransformerModel
from fairseq_fusion.models.fusion_config import (FAIRSEQ_GETATTR_DEFAULTS, FusionTransformerConfig, check_model_config,
                                                 model_actions)

from fairseq_fusion_tools import recipe_settings as settings  # noqa: E402

HYDRA_DIR = os.path.join(REPO, "recipes", "hydra")
FUSION_ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel)
TINY = {"encoder_layers": 2, "decoder_layers": 2, "encoder_embed_dim": 32, "decoder_embed_dim": 32,
        "encoder_ffn_embed_dim": 64, "decoder_ffn_embed_dim": 64, "encoder_attention_heads": 2, "decoder_attention_heads": 2}


def hydra_args(arch, **model):
    """What fairseq's build_model does with a YAML ``model:`` section: the arch function on the DictConfig."""
    cfg = OmegaConf.create({"_name": arch, **model})
    OmegaConf.set_struct(cfg, True)
    with open_dict(cfg):
        ARCH_CONFIG_REGISTRY[arch](cfg)
    return cfg


@pytest.mark.parametrize("arch", FUSION_ARCHS)
def test_yaml_model_section_gives_the_arch_flags(arch):
    """Every preset from a YAML section (just ``_name``) has the flag values of ``--arch`` on the command line,
    the current options version included (a DictConfig without it would get the legacy values)."""
    legacy = settings.model_args(arch)
    cfg = hydra_args(arch)
    flags = [f.name for g in fusion_options.GROUPS for f in g.flags] + ["encoder_embed_dim", "encoder_layers",
                                                                        "decoder_layers", "share_all_embeddings"]
    differ = {f: (cfg.get(f), getattr(legacy, f, None)) for f in flags if cfg.get(f) != getattr(legacy, f, None)}
    assert not differ, f"YAML vs --arch: {differ}"
    assert cfg[fusion_options.VERSION_KEY] == fusion_options.OPTIONS_VERSION


def test_yaml_values_override_the_preset():
    cfg = hydra_args("transformer_surface_fusion", surface_fusion_lambda=0.7, **TINY)
    assert cfg.surface_fusion_lambda == 0.7 and cfg.encoder_embed_dim == 32
    assert settings.model_args("transformer_surface_fusion").surface_fusion_lambda != 0.7


def test_config_dataclass_is_generated_from_the_flags():
    fields = FusionTransformerConfig.__dataclass_fields__
    for group in fusion_options.GROUPS:
        for flag in group.flags:
            assert flag.name in fields and fields[flag.name].metadata["help"] == flag.help
            if flag.choices:
                assert fields[flag.name].metadata["choices"] == list(flag.choices)
    assert {"encoder_embed_dim", "decoder_layers", "share_all_embeddings", "checkpoint_activations"} <= set(fields)
    assert set(fields) - {"_name"} == set(model_actions())


@pytest.mark.parametrize("section, message", [
    ({"lexical_shortcut": True}, "did you mean lexical_shortcuts"),
    ({"encoder_layers": "two"}, "encoder_layers"),
    ({"surface_fusion": "hardest"}, r"model.surface_fusion \(--surface-fusion\) 'hardest': expected one of none, hard, soft"),
    ({"surface_fusion_lambda": 1.5}, r"model.surface_fusion_lambda \(--surface-fusion-lambda\) 1.5: expected a weight in \[0, 1\]"),
    ({"share_all_embeddings": "maybe"}, "share_all_embeddings"),
])
def test_bad_yaml_model_section_is_refused(section, message):
    with pytest.raises(ValueError, match=message):
        check_model_config(OmegaConf.create({"_name": "fusion_transformer", **section}))


def test_good_yaml_model_section_passes():
    check_model_config(OmegaConf.create({"_name": "transformer_surface_fusion", "surface_fusion": "soft",
                                         "surface_fusion_lambda": 0.8, "dropout": 0.3, **TINY}))


@pytest.mark.parametrize("paper", sorted(settings.HYDRA_HEADLINE))
def test_shipped_yaml_is_the_recipe(paper):
    """recipes/hydra/ARCH.yaml is what `settings.py hydra` writes from the recipe's settings (regenerate when
    they change: python recipes/common/settings.py hydra --task TASK --arch ARCH --n-gpus 8 > recipes/hydra/ARCH.yaml)."""
    task, arch = settings.HYDRA_HEADLINE[paper]
    with open(os.path.join(HYDRA_DIR, f"{arch}.yaml")) as f:
        assert f.read() == settings.hydra_config(task, arch, 8)


def load_checkpoint(path):
    return torch.load(path, map_location="cpu", weights_only=False)


def test_hydra_train_equals_fairseq_train(multi30k_slice, tmp_path):
    """The shipped SurfaceFusion YAML through fairseq-hydra-train and the recipe's fairseq-train arguments (the
    same few overrides in both: tiny size, CPU, 3 updates) train the same model to the same parameters."""
    task, arch = settings.HYDRA_HEADLINE["liu"]
    overrides = {**TINY}
    hydra_dir, legacy_dir = str(tmp_path / "hydra"), str(tmp_path / "legacy")
    run_cli(["fairseq-hydra-train", "--config-dir", HYDRA_DIR, "--config-name", arch,
             f"task.data={multi30k_slice}", "task.source_lang=en", "task.target_lang=de",
             f"common.user_dir={os.path.join(REPO, 'fairseq_fusion')}", "common.fp16=false", "common.cpu=true",
             "common.seed=1", "optimization.max_update=3", "optimization.update_freq=[1]", "dataset.max_tokens=1500",
             "dataset.num_workers=0", f"checkpoint.save_dir={hydra_dir}",
             *[f"+model.{k}={v}" for k, v in overrides.items()]], cwd=str(tmp_path))
    s = settings.train_settings(task, arch, n_gpus=8)
    argv = [a for a in settings.train_command_args(s, 8) if a != "--fp16"]
    run_cli(["fairseq-train", multi30k_slice, "-s", "en", "-t", "de", "--user-dir", os.path.join(REPO, "fairseq_fusion"),
             *argv, "--cpu", "--seed", "1", "--max-update", "3", "--update-freq", "1", "--max-tokens", "1500",
             "--num-workers", "0", "--save-dir", legacy_dir,
             *[a for k, v in overrides.items() for a in ("--" + k.replace("_", "-"), str(v))]], cwd=str(tmp_path))
    hydra_ckpt = load_checkpoint(os.path.join(hydra_dir, "checkpoint_last.pt"))
    legacy_ckpt = load_checkpoint(os.path.join(legacy_dir, "checkpoint_last.pt"))
    h_model, l_model = hydra_ckpt["cfg"]["model"], legacy_ckpt["cfg"]["model"]
    l_model = vars(l_model) if isinstance(l_model, argparse.Namespace) else l_model
    assert h_model["surface_fusion_lambda"] == l_model["surface_fusion_lambda"] == 0.8  # the paper's Ro-En lambda
    assert h_model["dropout"] == l_model["dropout"] == 0.3
    assert h_model[fusion_options.VERSION_KEY] == fusion_options.OPTIONS_VERSION
    # a key fairseq reads as getattr(cfg.model, key, default) is that default where the command line left it out
    l_model = {**FAIRSEQ_GETATTR_DEFAULTS, **l_model}
    differ = [k for k in model_actions() if h_model.get(k) != l_model.get(k)]
    assert not differ, {k: (h_model.get(k), l_model.get(k)) for k in differ}
    assert hydra_ckpt["optimizer_history"][-1]["num_updates"] == 3
    h_params, l_params = hydra_ckpt["model"], legacy_ckpt["model"]
    assert h_params.keys() == l_params.keys()
    assert any(k.startswith("decoder.output_fusion.") for k in h_params)  # SurfaceFusion is in the model
    for k in h_params:
        assert torch.equal(h_params[k], l_params[k]), k


def tiny_run_overrides():
    """A few CPU updates of a tiny model, as hydra overrides (validation off: only the training is timed here)."""
    return ["task.source_lang=en", "task.target_lang=de", "common.fp16=false", "common.cpu=true", "common.seed=1",
            "optimization.max_update=2", "optimization.update_freq=[1]", "dataset.max_tokens=1500", "dataset.num_workers=0",
            "dataset.disable_validation=true", *[f"+model.{k}={v}" for k, v in TINY.items()]]


def test_fusion_user_dir_prints_the_plugin_folder(capsys):
    """fusion-user-dir: the folder fairseq's --user-dir / common.user_dir needs (this checkout's, installed editable)."""
    import fusion_user_dir

    fusion_user_dir.cli_main([])
    printed = capsys.readouterr().out
    assert printed == os.path.join(REPO, "fairseq_fusion") + "\n" and os.path.isfile(os.path.join(printed.strip(), "__init__.py"))


def test_shipped_config_trains_from_the_repository_root(multi30k_slice, tmp_path):
    """README's command from the repository root, with the config's own relative common.user_dir: hydra stays in
    the root (no outputs/DATE/TIME), so relative task.data and checkpoint.save_dir are relative to it."""
    arch = settings.HYDRA_HEADLINE["liu"][1]
    data, save = os.path.relpath(multi30k_slice, REPO), os.path.relpath(str(tmp_path / "ckpt"), REPO)
    log = os.path.join(REPO, "hydra_train.log")  # hydra's own log, written where the command runs (git-ignored)
    had_log = os.path.exists(log)
    try:
        run_cli(["fairseq-hydra-train", "--config-dir", "recipes/hydra", "--config-name", arch, f"task.data={data}",
                 f"checkpoint.save_dir={save}", *tiny_run_overrides()], cwd=REPO)
    finally:
        if not had_log and os.path.exists(log):
            os.remove(log)
    ckpt = load_checkpoint(str(tmp_path / "ckpt" / "checkpoint_last.pt"))
    assert ckpt["optimizer_history"][-1]["num_updates"] == 2
    assert ckpt["cfg"]["common"]["user_dir"] == "fairseq_fusion" and ckpt["cfg"]["model"]["_name"] == arch


def test_shipped_config_trains_from_another_directory(multi30k_slice, tmp_path):
    """README's command from any other directory: --config-dir "$REPO/recipes/hydra" and
    common.user_dir=$(fusion-user-dir), through a shell as typed; the default relative save_dir (checkpoints) and a
    relative task.data are relative to that directory."""
    arch = settings.HYDRA_HEADLINE["liu"][1]
    where = tmp_path / "elsewhere"
    where.mkdir()
    command = (f'fairseq-hydra-train --config-dir "$REPO/recipes/hydra" --config-name {arch} '
               f'task.data={os.path.relpath(multi30k_slice, str(where))} common.user_dir=$(fusion-user-dir) '
               + " ".join(tiny_run_overrides()))
    proc = subprocess.run(["bash", "-c", command], cwd=str(where), capture_output=True, text=True,
                          env=shell_env(dict(os.environ, REPO=REPO, OMP_NUM_THREADS="1",
                                             PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])))
    assert proc.returncode == 0, proc.stderr[-3000:]
    ckpt = load_checkpoint(str(where / "checkpoints" / "checkpoint_last.pt"))
    assert ckpt["optimizer_history"][-1]["num_updates"] == 2
    assert ckpt["cfg"]["common"]["user_dir"] == os.path.join(REPO, "fairseq_fusion")
    assert sorted(os.listdir(where)) == ["checkpoints", "hydra_train.log"]  # no outputs/ or .hydra/ folder
