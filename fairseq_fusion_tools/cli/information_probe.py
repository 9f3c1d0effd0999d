"""fusion-information-probe: how much source / target information each decoder module holds
(Yang et al. 2020, §3.1, Eq. 1, Fig. 3 and Fig. 8).

Trains one-layer Transformer-decoder probes on the frozen model's TEM, SEM, IFM (and IFM's
Add&Norm I, FFN, Add&Norm II) outputs of every decoder layer to regenerate the source or the
target sentence, plus a baseline probe per side reading zeros (the side's language model),
and reports each probe's recovery perplexity on a test split. Probes train on a random
sample of a training split with early stopping on a held-out split, in groups of
--probe-group-size probes at a time. Several checkpoints (--path A B ...) are overlaid.

  fusion-information-probe --path ckpt/checkpoint_best.pt --data DATA_BIN \\
      --train-split train --train-sentences 10000 --valid-split valid --split test --out results/probe
"""
import argparse

from .. import outputs
from ..analysis import information_probe as probe
from ..analysis import information_probe_command as command
from ..analysis.common import add_checkpoint_args, add_sentences_arg
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-information-probe", description=description_of(__doc__))
    add_checkpoint_args(p, several_paths=True, path_help="Checkpoint files (.pt); several are overlaid in one plot.",
                        data_help="Binarized data directory (default: the checkpoint's).")
    p.add_argument("--labels", default=None, help="Comma-separated plot labels, one per --path (default: file names).")
    p.add_argument("--train-split", default="train", help="Split the probes are trained on (default: %(default)s).")
    p.add_argument("--train-sentences", type=int, default=10000, help="Random sample of the training split (default: %(default)s; 0 = all).")
    p.add_argument("--valid-split", default="valid", help="Held-out split for early stopping (default: %(default)s).")
    p.add_argument("--valid-sentences", type=int, default=500, help="Random sample of the held-out split (default: %(default)s; 0 = all).")
    p.add_argument("--split", default="test", help="Split the reported PPL is measured on (default: %(default)s).")
    add_sentences_arg(p, "Measure on a random sample of N sentences of --split (default: all).")
    p.add_argument("--max-tokens", type=int, default=2000, help="Tokens per batch (default: %(default)s).")
    p.add_argument("--modules", default=",".join(probe.MODULES), help="Comma-separated modules to probe (default: %(default)s).")
    p.add_argument("--layers", default=None, help="Comma-separated decoder layers to probe, 1-based (default: all).")
    p.add_argument("--sides", default=",".join(probe.SIDES), help="Sequences to recover: source,target (default: both).")
    p.add_argument("--probe-group-size", type=int, default=8,
                   help="Probes trained at once; each group re-runs the frozen model (default: %(default)s, "
                        "about 4 GB of probe and Adam state at base size with a 37K vocabulary).")
    p.add_argument("--no-baseline", action="store_true", help="Skip the zero-representation baseline probes.")
    p.add_argument("--lr", type=float, default=5e-4, help="Peak learning rate of Adam (default: %(default)s).")
    p.add_argument("--warmup-steps", type=int, default=200, help="Linear warm-up, then inverse-sqrt decay (default: %(default)s).")
    p.add_argument("--max-epochs", type=int, default=10, help="Passes over the training sample at most (default: %(default)s).")
    p.add_argument("--max-steps", type=int, default=None, help="Training steps per group at most.")
    p.add_argument("--eval-interval", type=int, default=200, help="Steps between held-out evaluations (default: %(default)s).")
    p.add_argument("--patience", type=int, default=3, help="Evaluations without improvement before a probe stops (default: %(default)s).")
    p.add_argument("--probe-dropout", type=float, default=0.1, help="Dropout of the probes (default: %(default)s).")
    p.add_argument("--seed", type=int, default=1, help="Seed of the samples and of the probes' training (default: %(default)s).")
    return p


def cli_main():
    command.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
