"""fusion-aer: alignment error rate (Och & Ney 2003) of an alignment file against gold.

  fusion-aer --gold ../shared/data/alignment/deen/deen.talp \\
      --hyp ../shared/data/alignment/deen/system_outputs/giza.test.deen.grow-diagonal-final.talp
Prints AER, precision, recall (percent) and the number of distinct hypothesis links.
"""
import argparse

from ..scoring import aer
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-aer", description=description_of(__doc__))
    p.add_argument("--gold", required=True, help="Gold alignment: 'i-j' sure and 'ipj' possible links, source index first.")
    p.add_argument("--hyp", required=True, help="Hypothesis alignment: Pharaoh 'i-j' links, source index first.")
    p.add_argument("--gold-zero-indexed", action="store_true", help="Gold indices start at 0 (default: 1).")
    p.add_argument("--hyp-one-indexed", action="store_true", help="Hypothesis indices start at 1 (default: 0).")
    p.add_argument("--reverse-hyp", action="store_true", help="Hypothesis links are 'target-source'.")
    p.add_argument("--json", action="store_true", help="Print JSON.")
    return p


def cli_main():
    aer.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
