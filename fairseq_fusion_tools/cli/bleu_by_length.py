"""fusion-bleu-by-length: BLEU of several systems per source-length bucket (Dou et al. 2018 Fig. 4, Xu et al. 2020 Fig. 3).

Systems are given as NAME=FILE (detokenized text, or fairseq-generate logs with
``--hyp-format generate``). Writes OUT.json and a line plot OUT.png.
"""
import argparse

from .. import outputs
from ..scoring import bleu_by_length
from ..scoring import evaluation
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-bleu-by-length", description=description_of(__doc__))
    p.add_argument("--src", required=True, help="Source sentences (length = whitespace-separated words).")
    p.add_argument("--ref", required=True, help="Reference translations (raw text unless --tokenized).")
    p.add_argument("--sys", required=True, nargs="+", metavar="NAME=FILE", help="Systems to compare.")
    p.add_argument("--hyp-format", choices=["detok", "tok", "generate"], default="detok",
                   help="Format of the system files; tok/generate are detokenized with --target-lang.")
    p.add_argument("--target-lang", "-t", default=None, help="Target language (needed for tok/generate).")
    p.add_argument("--buckets", default=",".join(map(str, evaluation.DEFAULT_BUCKETS)),
                   help="Comma-separated upper bounds of the length buckets (default: %(default)s: 1-15, 16-30, 31-45 and over 45 "
                        "words).")
    p.add_argument("--tokenized", action="store_true", help="Files are tokenized: BLEU on the tokens as they are.")
    p.add_argument("--title", default=None, help="Title of the plot (default: one naming the --ref file).")
    p.add_argument("--out", required=True, help="Output prefix: OUT.json, OUT.png.")
    return p


def cli_main():
    bleu_by_length.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
