"""fusion-shortcut-gates: activation statistics of the lexical shortcut gates r^K, r^V per
layer (Emelin et al. 2019, Eq. 9-10; A.3, last paragraph).

  fusion-shortcut-gates --path ckpt/checkpoint_last.pt --data /tmp/m30k --split test \\
      --out results/shortcut_gates
"""
import argparse
import ast

from ..analysis import lexical_gates as gates
from ..analysis.common import add_common_args, load_model, write_outputs


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-shortcut-gates", description=__doc__.split("\n")[0])
    return add_common_args(p, split="test")


def main(args):
    model, task, cfg = load_model(args.path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    try:
        result = gates.gate_statistics(model, task, args.split, args.max_tokens, args.max_sentences)
    except ValueError as e:
        raise SystemExit(f"fusion-shortcut-gates: --path {args.path}: {e}")
    for name, s in result.items():
        print(f"| {name:32s} mean {s['mean']:.3f} std {s['std']:.3f} >0.5: {s['share_above_0.5']:.3f}")
    data = {"checkpoint": args.path, "arch": cfg.model.arch, "split": args.split, "gates": result}
    write_outputs(args.out, data, gates.plot(result, f"({cfg.model.arch}, {args.split})"))
    return data


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
