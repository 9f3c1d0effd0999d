"""fusion-shortcut-gates's run: the gate statistics of each checkpoint, the figure."""
import ast
import os

from . import lexical_gates as gates
from .common import load_model, technique_of, with_updates
from ..outputs import write_outputs


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
        results[with_updates(label, path)] = result  # the legend: label and update count
        entries.append(entry)
    data = {"split": args.split, "checkpoints": entries}
    write_outputs(args.out, data, gates.plot(results, f"of {', '.join(args.path)} ({args.split})"))
    return data
