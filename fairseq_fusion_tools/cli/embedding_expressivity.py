"""fusion-embedding-expressivity: normalized log singular values of embedding matrices (Liu et al.
2021, Fig. 3-4): the whole matrix, a random half of its dimensions and, for fine-grained layer
attention models, the more- and less-attended halves ordered by the top decoder layer's weights
on the embedding layer. Several checkpoints can be compared (Fig. 4: vanilla vs SurfaceFusion).

  fusion-embedding-expressivity --path fgla/checkpoint_best.pt --compare vanilla/checkpoint_best.pt \\
      --labels FGLA,Vanilla --out results/expressivity
"""
import argparse

from .. import outputs
from ..analysis import embedding_expressivity
from ..analysis.common import add_checkpoint_args
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-embedding-expressivity", description=description_of(__doc__))
    add_checkpoint_args(p, weights_only=True)
    p.add_argument("--compare", nargs="*", default=[], help="More checkpoints to plot alongside.")
    p.add_argument("--labels", default=None, help="Comma-separated names of --path and --compare (default: file paths).")
    p.add_argument("--embedding", default="encoder", choices=["encoder", "decoder", "output"],
                   help="Which matrix (default: the source embeddings; tied models share one).")
    p.add_argument("--seed", type=int, default=1, help="Seed of the random half of dimensions.")
    return p


def cli_main():
    embedding_expressivity.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
