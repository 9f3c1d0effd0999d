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

from .. import outputs
from ..analysis import shortcut_gates
from ..analysis.common import add_common_args
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-shortcut-gates", description=description_of(__doc__))
    add_common_args(p, split="test", several_paths=True)
    p.add_argument("--bins", type=int, default=10, help="Frequency bins (A.3: 10).")
    return p


def cli_main():
    shortcut_gates.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
