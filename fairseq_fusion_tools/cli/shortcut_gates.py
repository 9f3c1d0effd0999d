"""fusion-shortcut-gates: activation statistics of the lexical shortcut gates r^K, r^V per
layer and per sub-word frequency bin, for one or more checkpoints (Emelin et al. 2019,
Eq. 9-10; A.3, last paragraph).

  fusion-shortcut-gates --path ckpt/checkpoint1.pt ckpt/checkpoint_last.pt --data data-bin \\
      --split test --out results/shortcut_gates

Writes OUT.json (every checkpoint), OUT.LABEL.json per checkpoint (LABEL: the file name
without .pt, prefixed by its position when two names are the same) and OUT.png (checkpoints
overlaid).
"""
import argparse
import ast
import os

from ..analysis import lexical_gates as gates
from ..analysis.common import add_common_args, load_model, technique_of
from ..outputs import locked, write_outputs
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-shortcut-gates", description=description_of(__doc__))
    add_common_args(p, split="test", several_paths=True)
    p.add_argument("--bins", type=int, default=10, help="Frequency bins (A.3: 10).")
    return p


def labels(paths):
    names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    return [n if names.count(n) == 1 else f"{i}-{n}" for i, n in enumerate(names)]


def main(args):
    results, entries = {}, []
    for path, label in zip(args.path, labels(args.path)):
        model, task, cfg = load_model(path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
        with technique_of(path, "fusion-shortcut-gates"):
            result = gates.gate_statistics(model, task, args.split, args.max_tokens, args.sentences, args.bins)
        del model
        print(f"| {path}")
        for name, s in result.items():
            print(f"| {name:32s} mean {s['mean']:.3f} std {s['std']:.3f} >0.5: {s['share_above_0.5']:.3f}")
        entry = {"checkpoint": path, "label": label, "arch": cfg.model.arch, "split": args.split, "gates": result}
        write_outputs(f"{args.out}.{label}", entry)
        results[label] = result
        entries.append(entry)
    data = {"split": args.split, "checkpoints": entries}
    write_outputs(args.out, data, gates.plot(results, f"of {', '.join(args.path)} ({args.split})"))
    return data


def cli_main():
    main(locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
