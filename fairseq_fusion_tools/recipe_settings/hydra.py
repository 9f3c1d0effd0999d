"""The fairseq-hydra-train config of a paper's headline arch (``recipes/hydra/ARCH.yaml``, ``settings.py hydra``)."""
from .lookup import data_settings, train_command_args, train_settings

HYDRA_GROUPS = ("common", "distributed_training", "dataset", "optimization", "checkpoint", "criterion", "optimizer",
                "lr_scheduler")


def hydra_config(task, arch, n_gpus=8):
    """The fairseq-hydra-train config of ``train_command_args`` for ``arch`` on ``task``: the values that differ
    from fairseq's defaults (of the same criterion, optimizer and scheduler), each in its config group; the
    model section holds the preset (``_name``) and the model flags it is given."""
    import logging
    import warnings
    from argparse import Namespace

    from fairseq import options
    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.registry import REGISTRIES
    from omegaconf import OmegaConf

    from fairseq_fusion.models.fusion_config import model_actions

    s = train_settings(task, arch, n_gpus=n_gpus)
    d = data_settings(task, s["paper"])
    argv = ["DATA", *train_command_args(s, n_gpus)]
    base_argv = ["DATA", "--arch", arch, "--criterion", s["criterion"], "--optimizer", "adam", "--lr-scheduler", "inverse_sqrt"]
    with warnings.catch_warnings():  # hydra's compose deprecation notices, not about these settings
        warnings.simplefilter("ignore")
        level = logging.root.manager.disable
        logging.disable(logging.WARNING)
        try:
            args, base = (options.parse_args_and_arch(options.get_training_parser(), a) for a in (argv, base_argv))
            cfg, cfg0 = convert_namespace_to_omegaconf(args), convert_namespace_to_omegaconf(base)
        finally:
            logging.disable(level)
    schema = OmegaConf.structured(FairseqConfig)

    def interpolated(group, key):  # e.g. optimizer.lr: ${optimization.lr}; kept as the interpolation
        node = schema[group] if OmegaConf.is_config(schema[group]) else None
        if node is None:
            registry = REGISTRIES.get(group)
            dc = registry and registry["dataclass_registry"].get(cfg[group]["_name"])
            node = OmegaConf.structured(dc) if dc else None
        return node is not None and key in node and OmegaConf.is_interpolation(node, key)

    out = {"common": {"user_dir": "fairseq_fusion"}}
    for group in HYDRA_GROUPS:
        new, old = cfg[group], cfg0[group]
        changed = {k: new[k] for k in new if (k == "_name" and new[k] is not None or k != "_name" and new[k] != old.get(k))
                   and not interpolated(group, k)}
        if group in ("criterion", "optimizer", "lr_scheduler") or len(changed) > ("_name" in changed):
            out.setdefault(group, {}).update(changed)
    model, model0 = vars(cfg.model) if isinstance(cfg.model, Namespace) else cfg.model, vars(base)
    flags = model_actions()
    out["model"] = {"_name": arch, **{k: model[k] for k in sorted(flags) if k in model and model[k] != model0.get(k)}}
    out["task"] = {"_name": "translation", "data": "???", "source_lang": d["src"], "target_lang": d["tgt"]}
    order = ["common", "task", "model", "criterion", "optimizer", "lr_scheduler", "optimization", "dataset",
             "distributed_training", "checkpoint"]
    out = {k: OmegaConf.to_container(OmegaConf.create(out[k])) for k in order if k in out}
    # hydra runs the job where the command was given (as fairseq's own config.yaml: no outputs/DATE/TIME folder, so
    # relative task.data, checkpoint.save_dir and user_dir mean what they say) and writes no .hydra/ folder there;
    # both keys exist in hydra-core 1.0 (fairseq 0.12.2's) and 1.3
    out["hydra"] = {"run": {"dir": "."}, "output_subdir": None}
    header = (f"# @package _global_\n# {arch} on {task} as {s['paper']} trained it, for {n_gpus} GPUs (written by\n"
              f"# `python recipes/common/settings.py hydra --task {task} --arch {arch} --n-gpus {n_gpus}`; the same\n"
              f"# settings as recipes/{task}/train.sh). Relative paths are relative to where you run it. From the\n"
              f"# repository root:\n"
              f"#   fairseq-hydra-train --config-dir recipes/hydra --config-name {arch} task.data=DATA_BIN\n"
              f"# from any other directory (REPO: this clone; fusion-user-dir prints the installed plugin's folder):\n"
              f"#   fairseq-hydra-train --config-dir \"$REPO/recipes/hydra\" --config-name {arch} task.data=DATA_BIN \\\n"
              f"#       common.user_dir=$(fusion-user-dir)\n")
    return header + OmegaConf.to_yaml(OmegaConf.create(out), sort_keys=False)
