"""fusion-convert-checkpoint's run: a transformer (or fusion_transformer) checkpoint loaded into another
fusion_transformer arch, its new parameters freshly initialized on request.
"""
import ast
import copy

import torch

from .. import atomic_files
from fairseq_fusion.guards import checkpoint_files
from fairseq_fusion.compat import checkpoint_safety
from fairseq_fusion.errors import FusionError


def convert(state, arch, overrides=None, init_new_parameters=False, task=None):
    from fairseq import tasks
    from fairseq.models import ARCH_CONFIG_REGISTRY

    import fairseq_fusion  # noqa: F401
    from fairseq_fusion import fusion_options

    args = copy.deepcopy(state["args"] if state.get("args") is not None else state["cfg"]["model"])
    if args is None or not hasattr(args, "arch"):
        raise FusionError("checkpoint has no argparse model config (args / cfg.model): not a fairseq translation checkpoint")
    if arch not in ARCH_CONFIG_REGISTRY:
        raise FusionError(f"--arch {arch}: not a registered architecture")
    old_arch = args.arch
    # the new arch's preset decides its own flags; sizes and data settings come from the checkpoint
    technique_flags = {f.name for g in fusion_options.GROUPS for f in g.flags}
    for flag in list(vars(args)):
        if flag in technique_flags:
            delattr(args, flag)
    args.arch, args._name = arch, "fusion_transformer"
    for k, v in (overrides or {}).items():
        setattr(args, k, v)
    ARCH_CONFIG_REGISTRY[arch](args)
    if task is None:
        task = tasks.setup_task(args)
    model = task.build_model(args)
    own = model.state_dict()
    old = state["model"]
    new_keys = [k for k in own if k not in old]
    dropped = [k for k in old if k not in own]
    if dropped:
        raise FusionError(f"--arch {arch}: the {old_arch} checkpoint has parameters the new model lacks: {dropped[:8]}")
    if new_keys and not init_new_parameters:
        raise FusionError(
            f"{arch} has parameters the {old_arch} checkpoint lacks: {new_keys[:8]}...; "
            "pass --init-new-parameters to initialize them freshly"
        )
    merged = {k: old.get(k, v) for k, v in own.items()}
    model.load_state_dict(merged, strict=True)
    out = dict(state)
    out["model"] = model.state_dict()
    out["args"] = args
    if out.get("cfg") is not None:
        out["cfg"] = dict(out["cfg"])
        out["cfg"]["model"] = args
    return out, new_keys


def main(args):
    checkpoint_safety.allow_fairseq_checkpoint_globals()
    torch.manual_seed(args.seed)
    state = checkpoint_files.read_checkpoint(torch.load, args.input, map_location="cpu", fairseq=True)
    overrides = ast.literal_eval(args.model_overrides)
    if args.data:
        overrides["data"] = args.data
    out, new_keys = convert(state, args.arch, overrides, args.init_new_parameters)
    with atomic_files.replacing(args.output) as tmp:
        torch.save(out, tmp)
    print(f"| {len(out['model']) - len(new_keys)} parameters loaded from {args.input}; {len(new_keys)} new (fresh init)")
    for k in new_keys:
        print(f"|   new: {k}")
    print(f"| wrote {args.output} ({args.arch})")
