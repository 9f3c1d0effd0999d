"""fusion-lexical-probe: how much lexical content each encoder/decoder layer keeps (Emelin et
al. 2019, §4.1, Fig. 3-4; per sub-word frequency bin, A.3).

Trains a classifier per layer (512 hidden units, ReLU, dropout 0.5; A.1) on the frozen
model's states of --train-split to recover the sub-word at each position, and reports its
accuracy on --split, per layer and per frequency bin (10 equal-size bins of sub-word types).

  fusion-lexical-probe --path ckpt/checkpoint_last.pt --data /tmp/m30k \\
      --train-split valid --split test --out results/lexical_probe
"""
import argparse
import ast

from ..analysis import lexical_probe as probe
from ..analysis.common import add_common_args, load_model, write_outputs
from ..analysis.lexical_states import collect_states


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-lexical-probe", description=__doc__.split("\n")[0])
    add_common_args(p, split="test")
    p.add_argument("--train-split", default="valid", help="split the classifiers are trained on (default: %(default)s)")
    p.add_argument("--max-train-sentences", type=int, default=None, help="use at most this many training sentences")
    p.add_argument("--epochs", type=int, default=5, help="classifier training epochs (default: %(default)s)")
    p.add_argument("--lr", type=float, default=1e-3, help="classifier learning rate (Adam)")
    p.add_argument("--hidden", type=int, default=512, help="classifier hidden units (A.1: 512)")
    p.add_argument("--probe-dropout", type=float, default=0.5, help="classifier dropout (A.1: 0.5)")
    p.add_argument("--bins", type=int, default=10, help="frequency bins (A.3: 10)")
    p.add_argument("--seed", type=int, default=1)
    return p


def main(args):
    if args.train_split == args.split:
        raise SystemExit(f"fusion-lexical-probe: --train-split and --split are both {args.split!r}; the probe needs held-out data")
    model, task, cfg = load_model(args.path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    train = collect_states(model, task, args.train_split, args.max_tokens, args.max_train_sentences, desc=f"states {args.train_split}")
    test = collect_states(model, task, args.split, args.max_tokens, args.max_sentences, desc=f"states {args.split}")
    counts = task.source_dictionary.count
    result = probe.probe(train, test, len(task.target_dictionary), counts, task.source_dictionary.nspecial, n_bins=args.bins, epochs=args.epochs,
                         lr=args.lr, seed=args.seed, hidden=args.hidden, dropout=args.probe_dropout)
    for side, r in result.items():
        print(f"| {side:7s} accuracy by layer (emb, 1..N): " + " ".join(f"{a:.3f}" for a in r["accuracy"]))
    data = {"checkpoint": args.path, "arch": cfg.model.arch, "train_split": args.train_split, "split": args.split,
            "epochs": args.epochs, "hidden": args.hidden, "dropout": args.probe_dropout, **result}
    title = f"({cfg.model.arch}, {args.split})"
    write_outputs(args.out, data, probe.plot(result, title))
    return data


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
