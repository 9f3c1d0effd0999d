"""fusion-convert-checkpoint: turn a fairseq checkpoint into one of a ``fusion_transformer`` arch.

``--arch fusion_transformer`` (the default) re-labels a fairseq ``transformer`` checkpoint:
the model is rebuilt as ``fusion_transformer`` and the weights load strictly, unchanged.
With an arch that adds parameters (e.g. an aggregation arch, Dou et al. 2018 §4.1 "initialized
with a trained vanilla model"), ``--init-new-parameters`` keeps the new ones freshly
initialized and loads every other one strictly by name and shape; it lists both sets.
The output is a complete checkpoint for fairseq-generate, or for ``fairseq-train
--restore-file OUT --reset-optimizer --reset-dataloader --reset-meters`` (the optimizer
state kept from the input does not fit a model with new parameters).
"""
import argparse

from ..checkpoints import convert_checkpoint
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-convert-checkpoint", description=description_of(__doc__))
    p.add_argument("--input", required=True, help="A fairseq checkpoint (.pt) of transformer or fusion_transformer.")
    p.add_argument("--output", required=True, help="File to write the converted checkpoint to.")
    p.add_argument("--arch", default="fusion_transformer", help="Target architecture (default: %(default)s).")
    p.add_argument("--model-overrides", default="{}", help="Python dict of model args to set, e.g. \"{'encoder_layers': 6}\".")
    p.add_argument("--data", default=None, help="Binarized data directory (default: the checkpoint's).")
    p.add_argument("--init-new-parameters", action="store_true", help="Allow parameters the input lacks (fresh init).")
    p.add_argument("--seed", type=int, default=1, help="Seed for the fresh parameters.")
    return p


def cli_main():
    convert_checkpoint.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
