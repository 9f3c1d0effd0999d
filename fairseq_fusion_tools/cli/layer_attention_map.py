"""fusion-layer-attention-map: heatmap of the layer attention of each decoder layer over the
encoder layers (Liu et al. 2021, Fig. 1), weights averaged over the dimensions.

  fusion-layer-attention-map --path ckpt/checkpoint_best.pt --out results/layer_attention
"""
import argparse

from .. import outputs
from ..analysis import layer_attention_map
from ..analysis.common import add_checkpoint_args
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-layer-attention-map", description=description_of(__doc__))
    add_checkpoint_args(p, weights_only=True, path_help="Checkpoint (.pt) of a model with --layer-attention fine or "
                        "coarse.")
    return p


def cli_main():
    layer_attention_map.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
