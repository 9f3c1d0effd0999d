"""fusion-average-checkpoints: average the parameters of several fairseq checkpoints.

Our own version of fairseq's ``scripts/average_checkpoints.py`` (not shipped in the wheel),
with the same options. Checkpoints are read with torch's safe loader (``weights_only``),
trusting only the classes ``fairseq_fusion.compat.checkpoint_safety`` allow-lists. The output keeps
everything but ``model`` from the last input and holds the element-wise mean of the inputs'
parameters (accumulated in float64, stored in each parameter's dtype).
"""
import argparse

from ..checkpoints import average_checkpoints
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-average-checkpoints", description=description_of(__doc__))
    p.add_argument("--inputs", required=True, nargs="+", help="Checkpoint files, or one directory with --num-*-checkpoints.")
    p.add_argument("--output", required=True, help="File to write the averaged checkpoint to.")
    num = p.add_mutually_exclusive_group()
    num.add_argument("--num-update-checkpoints", type=int, help="Average the last N checkpoint_E_U.pt of the directory.")
    num.add_argument("--num-epoch-checkpoints", type=int, help="Average the last N checkpointE.pt of the directory.")
    p.add_argument("--checkpoint-upper-bound", type=int, help="Ignore checkpoints past this epoch/update.")
    return p


def cli_main():
    average_checkpoints.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
