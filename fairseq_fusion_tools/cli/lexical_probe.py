"""fusion-lexical-probe: how much lexical content each encoder/decoder layer keeps (Emelin et
al. 2019, §4.1, Fig. 3-4; per sub-word frequency bin and part of speech, A.3).

Trains a classifier per layer (512 hidden units, ReLU, dropout 0.5; A.1) on the frozen
model's states of a sample of --train-split to recover the sub-word at each position, with
early stopping on --valid-split, and reports its accuracy on --split, per layer, per
frequency bin (10 equal-size bins of sub-word types) and, with tag files, per part of
speech (NOUN / VERB / ADJ-ADV / OTHER). States go to float16 files in a temporary folder
next to --out (removed at the end); probes are trained --probe-group-size at a time.

  fusion-lexical-probe --path ckpt/checkpoint_last.pt --data data-bin \\
      --train-split train --max-train-sentences 100000 --valid-split valid --split test \\
      --source-pos-tags test.tags.en --target-pos-tags test.tags.de --out results/lexical_probe
"""
import argparse

from .. import outputs
from ..analysis import lexical_probe_command as command
from ..analysis.common import add_common_args
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-lexical-probe", description=description_of(__doc__))
    add_common_args(p, split="test")
    p.add_argument("--train-split", default="train", help="Split the probes are trained on (default: %(default)s).")
    p.add_argument("--max-train-sentences", type=int, default=100000,
                   help="Random sample of this many training sentences (default: %(default)s).")
    p.add_argument("--max-train-positions", type=int, default=1000000,
                   help="At most this many training positions per side (disk: 2 bytes x dim x layers each).")
    p.add_argument("--valid-split", default="valid", help="Held-out split for early stopping (default: %(default)s).")
    p.add_argument("--max-valid-sentences", type=int, default=None, help="Use at most this many early-stopping sentences.")
    p.add_argument("--max-epochs", type=int, default=20, help="Most training epochs per probe (default: %(default)s).")
    p.add_argument("--patience", type=int, default=3,
                   help="Stop a probe after this many epochs without a better held-out accuracy (default: %(default)s).")
    p.add_argument("--lr", type=float, default=1e-3, help="Probe learning rate (Adam; halved on each epoch without improvement).")
    p.add_argument("--warmup-updates", type=int, default=200, help="Linear learning-rate warm-up (default: %(default)s).")
    p.add_argument("--batch-size", type=int, default=512, help="Positions per probe update (default: %(default)s).")
    p.add_argument("--probe-group-size", type=int, default=4,
                   help="Probes trained at once; memory grows with it (default: %(default)s).")
    p.add_argument("--hidden", type=int, default=512, help="Classifier hidden units (A.1: 512).")
    p.add_argument("--probe-dropout", type=float, default=0.5, help="Classifier dropout (A.1: 0.5).")
    p.add_argument("--bins", type=int, default=10, help="Frequency bins (A.3: 10).")
    p.add_argument("--source-pos-tags", default=None, help="POS tags of --split's source side: one line per sentence, one tag per word.")
    p.add_argument("--target-pos-tags", default=None, help="POS tags of --split's target side (as --source-pos-tags).")
    p.add_argument("--bpe-dir", default=None, help="Folder with SPLIT.bpe.LANG for the tags (default: DATA/tok).")
    p.add_argument("--seed", type=int, default=1, help="Seed of the training sample and of the probes (default: %(default)s).")
    return p


def cli_main():
    command.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
