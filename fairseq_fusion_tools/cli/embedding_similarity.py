"""fusion-embedding-similarity: cosine similarity between the embeddings and every layer's
states, encoder and decoder (Emelin et al. 2019, §4.1, A.3, Fig. 6-7).

  fusion-embedding-similarity --path ckpt/checkpoint_last.pt --data /tmp/m30k --split test \\
      --out results/embedding_similarity
"""
import argparse
import ast

from ..analysis import lexical_similarity as sim
from ..analysis.common import add_common_args, load_model
from ..outputs import locked, write_outputs
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-embedding-similarity", description=description_of(__doc__))
    return add_common_args(p, split="test")


def main(args):
    model, task, cfg = load_model(args.path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    result = sim.stream_similarity(model, task, args.split, args.max_tokens, args.sentences)
    for side, r in result.items():
        for ref in sim.REFERENCES:
            print(f"| {side:7s} cos({ref}, layer 1..N): " + " ".join(f"{s:.3f}" for s in r[ref]))
    data = {"checkpoint": args.path, "arch": cfg.model.arch, "split": args.split, **result}
    write_outputs(args.out, data, sim.plot(result, f"of {args.path} ({cfg.model.arch}, {args.split})"))
    return data


def cli_main():
    main(locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
