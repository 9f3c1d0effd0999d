"""fusion-information-probe: how much source / target information each decoder module holds
(Yang et al. 2020, §3.1, Eq. 1, Fig. 3 and Fig. 8).

Trains one-layer Transformer-decoder probes on the frozen model's TEM, SEM, IFM (and IFM's
Add&Norm I, FFN, Add&Norm II) outputs of every decoder layer to regenerate the source or the
target sentence, plus a baseline probe per side reading zeros (the side's language model),
and reports each probe's recovery perplexity on a test split. Probes train on a random
sample of a training split with early stopping on a held-out split, in groups of
--probe-group-size probes at a time. Several checkpoints (--path A B ...) are overlaid.

  fusion-information-probe --path ckpt/checkpoint_best.pt --data DATA_BIN \\
      --train-split train --train-sentences 10000 --valid-split valid --split test --out results/probe
"""
import argparse
import ast
import os

import torch

from ..analysis import information_batches as data
from ..analysis import information_probe as probe
from ..analysis.common import add_checkpoint_args, add_sentences_arg, load_model
from ..outputs import locked, write_outputs
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-information-probe", description=description_of(__doc__))
    add_checkpoint_args(p, several_paths=True, path_help="Checkpoint files (.pt); several are overlaid in one plot.",
                        data_help="Binarized data directory (default: the checkpoint's).")
    p.add_argument("--labels", default=None, help="Comma-separated plot labels, one per --path (default: file names).")
    p.add_argument("--train-split", default="train", help="Split the probes are trained on (default: %(default)s).")
    p.add_argument("--train-sentences", type=int, default=10000, help="Random sample of the training split (default: %(default)s; 0 = all).")
    p.add_argument("--valid-split", default="valid", help="Held-out split for early stopping (default: %(default)s).")
    p.add_argument("--valid-sentences", type=int, default=500, help="Random sample of the held-out split (default: %(default)s; 0 = all).")
    p.add_argument("--split", default="test", help="Split the reported PPL is measured on (default: %(default)s).")
    add_sentences_arg(p, "Measure on a random sample of N sentences of --split (default: all).")
    p.add_argument("--max-tokens", type=int, default=2000, help="Tokens per batch (default: %(default)s).")
    p.add_argument("--modules", default=",".join(probe.MODULES), help="Comma-separated modules to probe (default: %(default)s).")
    p.add_argument("--layers", default=None, help="Comma-separated decoder layers to probe, 1-based (default: all).")
    p.add_argument("--sides", default=",".join(probe.SIDES), help="Sequences to recover: source,target (default: both).")
    p.add_argument("--probe-group-size", type=int, default=8,
                   help="Probes trained at once; each group re-runs the frozen model (default: %(default)s, "
                        "about 4 GB of probe and Adam state at base size with a 37K vocabulary).")
    p.add_argument("--no-baseline", action="store_true", help="Skip the zero-representation baseline probes.")
    p.add_argument("--lr", type=float, default=5e-4, help="Peak learning rate of Adam (default: %(default)s).")
    p.add_argument("--warmup-steps", type=int, default=200, help="Linear warm-up, then inverse-sqrt decay (default: %(default)s).")
    p.add_argument("--max-epochs", type=int, default=10, help="Passes over the training sample at most (default: %(default)s).")
    p.add_argument("--max-steps", type=int, default=None, help="Training steps per group at most.")
    p.add_argument("--eval-interval", type=int, default=200, help="Steps between held-out evaluations (default: %(default)s).")
    p.add_argument("--patience", type=int, default=3, help="Evaluations without improvement before a probe stops (default: %(default)s).")
    p.add_argument("--probe-dropout", type=float, default=0.1, help="Dropout of the probes (default: %(default)s).")
    p.add_argument("--seed", type=int, default=1, help="Seed of the samples and of the probes' training (default: %(default)s).")
    return p


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
    labels = args.labels.split(",") if args.labels else [os.path.basename(p) for p in args.path]
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


def cli_main():
    main(locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
