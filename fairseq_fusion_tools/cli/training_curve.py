"""fusion-training-curve: validation curves (BLEU, loss, perplexity) from fairseq-train logs.

Reads the logs fairseq-train writes (``--log-format simple`` or ``json``, e.g. the recipes'
``WORK/checkpoints/RUN/train.log``) line by line, so memory does not grow with the log, and plots
each metric of the validation lines against the update count, one curve per log (Emelin et al.
Fig. 5: validation BLEU during training; ``train.sh --eval-bleu`` logs it). Writes OUT.json
(every validation point of every log) and OUT.png; ``--internals`` adds one OUT.internals.LABEL.png per log of
the ``fusion/`` figures that ``--fusion-log-internals`` logs (docs/training.md).
"""
import argparse

from .. import outputs
from ..scoring import training_curve
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-training-curve", description=description_of(__doc__))
    p.add_argument("logs", nargs="+", metavar="LOG[=LABEL]",
                   help="Logs of fairseq-train (e.g. WORK/checkpoints/RUN/train.log); LABEL names the curve (default: the "
                        "log's folder).")
    p.add_argument("--labels", default=None,
                   help="Comma-separated curve labels, one per log, instead of LOG=LABEL (default: the logs' folders).")
    p.add_argument("--subset", default="valid", help="The validation subset to plot (default: valid).")
    p.add_argument("--internals", action="store_true",
                   help="Also draw the fusion/ figures of --fusion-log-internals (training intervals and validations): "
                        "OUT.internals.LABEL.png per log, their points in OUT.json.")
    p.add_argument("--out", required=True, help="Output prefix: OUT.json, OUT.png.")
    return p


def cli_main():
    training_curve.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
