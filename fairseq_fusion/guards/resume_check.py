"""A training run resumes only with the model it was trained with (issue 41).

fairseq-train resumes from ``checkpoint_last.pt`` in ``--save-dir`` (or from ``--restore-file``): it restores the
weights, the optimizer state and the update count, but builds the model from the command's own flags. A command
whose model differs would train one run's weights under another setting and save them as that run (another
technique value: silently), or stop in fairseq's load with a traceback (another arch or size). Before fairseq loads
a checkpoint to resume, ``checked_load_checkpoint`` compares the checkpoint's model settings with the command's and
refuses a difference in one line, before anything is written.

The model's settings (compared): ``--arch`` and every option of the model classes (their ``add_args``: fairseq's
architecture options, every technique flag of the registry), except those that change training, not the model:
dropout of any kind (names with dropout, dropconnect, layerdrop, quant_noise), activation checkpointing and
offloading, ``--fusion-compile``, FSDP wrapping, TorchScript export, and initialization (``--init-from-vanilla``, embedding files), which
the resumed weights replace. What else fairseq lets a resume change (learning rate and schedule, batch size,
``--max-update``, seeds, logging, saving, precision) is no model option, so it is not compared.

Fine-tuning is not resuming: with ``--reset-optimizer`` fairseq restores the weights alone and counts updates from
0, and ``--finetune-from-model`` implies it; those load the weights into a new setup, which may change any
setting the parameters fit. Where they do not fit, fairseq's traceback becomes one line; so does the plugin's own
refusal in the model's load (a checkpoint of another vocabulary), which fairseq wraps in a bare Exception. Both,
resume and fine-tune, first compare the checkpoint's dictionary fingerprints with the task's (``dictionary_check.py``).
"""
import argparse
import copy
import functools
import os

from . import dictionary_check
from ..errors import FusionError, few
from ..fusion_options import VERSION_KEY, option_name

TRAINING_ONLY_WORDS = ("dropout", "dropconnect", "layerdrop", "quant_noise")
TRAINING_ONLY = {"checkpoint_activations", "offload_activations", "fusion_compile", "fusion_compile_random", "min_params_to_wrap", "export",
                 "init_from_vanilla", "encoder_embed_path", "decoder_embed_path", VERSION_KEY}
_MISSING = object()


def is_training_only(name):
    return name in TRAINING_ONLY or any(word in name for word in TRAINING_ONLY_WORDS)


def model_option_names(*archs):
    """The model options of these archs' model classes that define the model, in their parser's order."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    names = []
    for cls in dict.fromkeys(ARCH_MODEL_REGISTRY.get(arch) for arch in archs):
        if cls is None:
            continue
        parser = argparse.ArgumentParser(add_help=False)
        cls.add_args(parser)
        names += [a.dest for a in parser._actions if a.dest not in names and not is_training_only(a.dest)]
    return names


def model_settings(model_cfg):
    """A model config (the Namespace of fairseq-train, a DictConfig or dict of hydra) as a Namespace, with the arch's
    defaults filled in as building the model fills them (a checkpoint older than a technique flag: its legacy value)."""
    from fairseq.models import ARCH_CONFIG_REGISTRY
    from omegaconf import OmegaConf

    if isinstance(model_cfg, argparse.Namespace):
        values = vars(model_cfg)
    elif OmegaConf.is_config(model_cfg):
        values = OmegaConf.to_container(model_cfg, resolve=True)
    else:
        values = dict(model_cfg)
    args = argparse.Namespace(**copy.deepcopy(values))
    args.arch = getattr(args, "arch", None) or getattr(args, "_name", None)
    if args.arch in ARCH_CONFIG_REGISTRY:
        ARCH_CONFIG_REGISTRY[args.arch](args)
    return args


def checkpoint_state(path):
    """A checkpoint's state; its tensors are mapped, not read."""
    import torch
    from fairseq import checkpoint_utils

    try:
        return torch.load(path, map_location="cpu", mmap=True)
    except Exception:  # not torch's zip format (mmap needs it): fairseq's own load, which names a bad file
        return checkpoint_utils.load_checkpoint_to_cpu(path)


def checkpoint_model_cfg(path, state=None):
    """The model config a checkpoint was trained with, or None."""
    state = checkpoint_state(path) if state is None else state
    cfg = state.get("cfg") or {}
    model = cfg.get("model") if hasattr(cfg, "get") else None
    return model if model is not None else state.get("args")


def _plain(value):
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def differences(checkpoint_cfg, command_cfg):
    """[(option, checkpoint's value, command's value)] of the model settings that differ, --arch first."""
    before, now = model_settings(checkpoint_cfg), model_settings(command_cfg)
    found = [("--arch", before.arch, now.arch)] if before.arch != now.arch else []
    for name in model_option_names(before.arch, now.arch):
        a, b = getattr(before, name, _MISSING), getattr(now, name, _MISSING)
        if _MISSING not in (a, b) and _plain(a) != _plain(b):
            found.append((option_name(name), a, b))
    return found


def _shown(value):
    return "unset" if value is None else str(value)


def describe(found):
    return few([f"{name} {_shown(a)} -> {_shown(b)}" for name, a, b in found])


def resume_refusal(path, save_dir, found):
    if save_dir is not None:
        where = f"--save-dir {save_dir} holds a run of another model ({os.path.basename(path)})"
    else:
        where = f"--restore-file {path} is a checkpoint of another model"
    return FusionError(
        f"{where}: resuming it would train its weights under this command's settings and save them as its run "
        f"(checkpoint -> this command: {describe(found)}); start fresh with another --save-dir, or fine-tune from it "
        f"with --restore-file {path} --reset-optimizer --reset-dataloader --reset-meters (or --finetune-from-model "
        f"{path} with another --save-dir)")


def misfit_refusal(path, found, load_error):
    if found:
        why = f"its model differs (checkpoint -> this command: {describe(found)})"
    else:
        lines = [line.strip() for line in str(load_error).splitlines() if line.strip()]
        why = (lines[1] if len(lines) > 1 else lines[0])[:300]
    return FusionError(f"checkpoint {path}: its parameters do not fit this command's model: {why}; fine-tuning loads "
                       "weights into a model of the same sizes (fusion-convert-checkpoint gives a checkpoint another "
                       "arch's new parameters)")


def _is_wrapped_refusal(error):
    return str(error).startswith("Cannot load model parameters") and isinstance(error.__context__, FusionError)


def _is_misfit(error):
    """fairseq's 'Cannot load model parameters' around torch's state-dict mismatch (bad input, not a bug)."""
    cause = error.__context__
    return (str(error).startswith("Cannot load model parameters from checkpoint") and isinstance(cause, RuntimeError)
            and str(cause).startswith("Error(s) in loading state_dict"))


def checked_load_checkpoint(load_checkpoint):
    """Wraps ``Trainer.load_checkpoint``: a resume (no --reset-optimizer) of another model is refused; a fine-tune
    whose parameters do not fit ends in one line."""
    @functools.wraps(load_checkpoint)
    def wrapper(self, filename, reset_optimizer=False, *args, **kwargs):
        local = isinstance(filename, str) and "://" not in filename and os.path.isfile(filename)
        state = checkpoint_state(filename) if local else None
        if local:  # resumed or fine-tuned: its dictionaries are this task's (dictionary_check.py)
            dictionary_check.check(filename, dictionary_check.saved_fingerprints(state), self.task)
        if local and not reset_optimizer:
            saved = checkpoint_model_cfg(filename, state)
            found = differences(saved, self.cfg.model) if saved is not None else []
            if found:
                last = os.path.join(self.cfg.checkpoint.save_dir, f"checkpoint_last{self.checkpoint_suffix}.pt")
                in_save_dir = os.path.abspath(filename) == os.path.abspath(last)
                raise resume_refusal(filename, self.cfg.checkpoint.save_dir if in_save_dir else None, found)
        try:
            return load_checkpoint(self, filename, reset_optimizer, *args, **kwargs)
        except Exception as e:  # fairseq wraps every failure of its load in a bare Exception
            if _is_wrapped_refusal(e):
                raise e.__context__ from None  # the plugin's own refusal (another vocabulary), as one line
            if isinstance(e, AssertionError) and str(e).startswith(("Criterion does not match", "Optimizer does not match")):
                what, saved_vs_now = str(e).split(";")[0], str(e).rsplit(". ", 1)[-1]
                raise FusionError(f"checkpoint {filename}: {what.lower()} ({saved_vs_now.replace(' vs ', ' -> ')}): "
                                  "resume with the run's own --criterion and --optimizer, or fine-tune from it with "
                                  "--reset-optimizer") from None
            if not (local and _is_misfit(e)):
                raise
            saved = checkpoint_model_cfg(filename)
            raise misfit_refusal(filename, differences(saved, self.cfg.model) if saved is not None else [],
                                 e.__context__) from e

    wrapper.patched_by_fairseq_fusion = True
    return wrapper
