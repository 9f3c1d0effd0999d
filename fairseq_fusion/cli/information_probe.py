"""fusion-information-probe: how much source / target information each decoder module holds
(Yang et al. 2020, §3.1, Eq. 1, Fig. 3 and Fig. 8).

Trains one-layer Transformer-decoder probes on the frozen model's TEM, SEM, IFM (and IFM's
Add&Norm I, FFN, Add&Norm II) outputs of every decoder layer to regenerate the source or the
target sentence, then reports each probe's recovery perplexity on a held-out split.

  fusion-information-probe --path ckpt/checkpoint_last.pt --data /tmp/m30k \\
      --train-split train --train-batches 300 --split valid --out results/probe
"""
import argparse
import ast
import os

import torch

from ..analysis import information_probe as probe
from ..analysis.common import add_common_args, iterate_batches, load_model, write_outputs


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-information-probe", description=__doc__.split("\n")[0])
    add_common_args(p, split="valid")
    p.add_argument("--train-split", default="train", help="split the probes are trained on (default: %(default)s)")
    p.add_argument("--train-batches", type=int, default=300, help="probe training steps (shuffled batches, several epochs if needed)")
    p.add_argument("--modules", default=",".join(probe.MODULES), help="comma-separated modules to probe (default: %(default)s)")
    p.add_argument("--sides", default=",".join(probe.SIDES), help="sequences to recover: source,target (default: both)")
    p.add_argument("--lr", type=float, default=1e-3, help="probe learning rate (Adam)")
    p.add_argument("--probe-dropout", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    return p


def train_stream(task, args, model):
    """``--train-batches`` shuffled batches of the training split, over several epochs if needed."""
    seen, epoch = 0, 0
    while seen < args.train_batches:
        n = 0
        for sample in iterate_batches(task, args.train_split, args.max_tokens, None, model,
                                      desc=f"train probes (epoch {epoch + 1})", shuffle_seed=args.seed + epoch,
                                      max_batches=args.train_batches - seen):
            n += 1
            yield sample
        if n == 0:
            raise ValueError(f"--train-split {args.train_split}: no batches")
        seen += n
        epoch += 1


def main(args):
    torch.manual_seed(args.seed)
    modules = [m.strip() for m in args.modules.split(",") if m.strip()]
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    bad = [m for m in modules if m not in probe.MODULES] + [s for s in sides if s not in probe.SIDES]
    if bad:
        raise SystemExit(f"fusion-information-probe: unknown --modules/--sides {bad}; expected modules from {list(probe.MODULES)}, sides from {list(probe.SIDES)}")
    model, task, cfg = load_model(args.path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    for p in model.parameters():
        p.requires_grad_(False)
    eval_batches = iterate_batches(task, args.split, args.max_tokens, args.max_sentences, model, desc=f"evaluate on {args.split}")
    result, _ = probe.train_and_evaluate(
        model, task, train_stream(task, args, model), eval_batches,
        modules=modules, sides=sides, lr=args.lr, dropout=args.probe_dropout,
    )
    for side, by_module in result["ppl"].items():
        for module, ys in by_module.items():
            print(f"| {side:6s} {module:10s} PPL by layer: " + " ".join("-" if y is None else f"{y:.2f}" for y in ys))
    data = {"checkpoint": args.path, "arch": cfg.model.arch, "train_split": args.train_split, "split": args.split, **result}
    title = f"{os.path.basename(args.path)} ({cfg.model.arch}); probes: {result['train_batches']} batches of {args.train_split}, PPL on {args.split}"
    write_outputs(args.out, data, probe.plot(result, title))
    return data


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
