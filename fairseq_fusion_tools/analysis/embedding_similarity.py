"""fusion-embedding-similarity's run: the similarity of each layer's states to the embeddings, streamed over a
split.
"""
import ast

from . import lexical_similarity as sim
from .common import load_model, with_updates
from ..outputs import write_outputs


def main(args):
    model, task, cfg = load_model(args.path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    result = sim.stream_similarity(model, task, args.split, args.max_tokens, args.sentences)
    for side, r in result.items():
        for ref in sim.REFERENCES:
            print(f"| {side:7s} cos({ref}, layer 1..N): " + " ".join(f"{s:.3f}" for s in r[ref]))
    data = {"checkpoint": args.path, "arch": cfg.model.arch, "split": args.split, **result}
    write_outputs(args.out, data, sim.plot(result, f"of {with_updates(args.path, args.path)} ({cfg.model.arch}, {args.split})"))
    return data
