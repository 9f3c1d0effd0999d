"""fusion-information-probe's run: the batches sampled, each checkpoint's probes trained and evaluated, the figure.
"""
import ast
import os

import torch

from . import information_batches as data
from . import information_probe as probe
from .common import load_model, with_updates
from ..outputs import write_outputs
from fairseq_fusion_tools.user_files import fail


def probe_checkpoint(path, args, modules, sides):
    """One JSON entry: the probes' PPLs for the checkpoint at ``path``."""
    torch.manual_seed(args.seed)
    model, task, cfg = load_model(path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    for p in model.parameters():
        p.requires_grad_(False)
    device = next(model.parameters()).device
    samples = {}
    for flag, split, n in (("--train-split", args.train_split, args.train_sentences),
                           ("--valid-split", args.valid_split, args.valid_sentences),
                           ("--split", args.split, args.sentences)):
        try:
            samples[flag] = data.sample_indices(task, split, n or None, args.seed)
        except (FileNotFoundError, ValueError) as e:
            fail(f"fusion-information-probe: {flag} {split}: cannot read it from the data directory ({e})")

    def train_epochs(epoch):
        return data.batches(task, args.train_split, samples["--train-split"], args.max_tokens, device,
                            shuffle_seed=args.seed + epoch, desc=f"train (epoch {epoch + 1})")

    def valid_batches():
        return data.batches(task, args.valid_split, samples["--valid-split"], args.max_tokens, device, desc="held-out")

    def test_batches():
        return data.batches(task, args.split, samples["--split"], args.max_tokens, device, desc=f"measure on {args.split}")

    try:
        result = probe.run(
            model, task, train_epochs, valid_batches, test_batches, modules=modules, sides=sides,
            group_size=args.probe_group_size, baseline=not args.no_baseline, layers=args.layer_list, lr=args.lr, warmup=args.warmup_steps,
            max_epochs=args.max_epochs, max_steps=args.max_steps, eval_interval=args.eval_interval,
            patience=args.patience, dropout=args.probe_dropout,
        )
    except ValueError as e:
        fail(f"fusion-information-probe: {path}: {e}")
    for side, by_module in result["ppl"].items():
        base = result.get("baseline_ppl", {}).get(side)
        print(f"| {side:6s} zero-representation baseline PPL: {'-' if base is None else f'{base:.2f}'}")
        for module, ys in by_module.items():
            print(f"| {side:6s} {module:10s} PPL by layer: " + " ".join("-" if y is None else f"{y:.2f}" for y in ys))
    return {"checkpoint": path, "arch": cfg.model.arch, **result,
            "sentences": {flag: len(idx) for flag, idx in samples.items()}}


def main(args):
    modules = [m.strip() for m in args.modules.split(",") if m.strip()]
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    bad = [m for m in modules if m not in probe.MODULES] + [s for s in sides if s not in probe.SIDES]
    if bad:
        fail(f"fusion-information-probe: unknown --modules/--sides {bad}; expected modules from {list(probe.MODULES)}, sides from {list(probe.SIDES)}")
    try:
        args.layer_list = [int(n) for n in args.layers.split(",")] if args.layers else None
    except ValueError:
        fail(f"fusion-information-probe: --layers {args.layers!r}: expected comma-separated layer numbers, e.g. 1,6")
    labels = args.labels.split(",") if args.labels else [with_updates(os.path.basename(p), p) for p in args.path]
    if len(labels) != len(args.path):
        fail(f"fusion-information-probe: --labels has {len(labels)} names but --path has {len(args.path)} checkpoints")
    for p in args.path:
        if not os.path.exists(p):
            fail(f"fusion-information-probe: --path {p}: no such checkpoint")
    entries = []
    for path, label in zip(args.path, labels):
        entries.append({"label": label, **probe_checkpoint(path, args, modules, sides)})
    settings = {k: getattr(args, k) for k in ("train_split", "valid_split", "split", "layers", "lr", "warmup_steps", "max_epochs",
                                              "max_steps", "eval_interval", "patience", "probe_group_size", "seed")}
    fig = probe.plot(entries, f"Recovery PPL of {', '.join(args.path)} on {args.split}; probes trained on "
                               f"{args.train_split}, early stopping on {args.valid_split}")
    write_outputs(args.out, {"settings": settings, "checkpoints": entries}, fig)
    return entries
