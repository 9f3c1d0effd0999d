"""fusion-score-m2: precision, recall and F0.5 of grammatical error corrections with the MaxMatch (M2) scorer.

The official NUS scorer's algorithm (Dahlmeier & Ng 2012; ``scoring/m2.py``), the metric of Liu et
al. 2021 on CoNLL-2014. The corrections are a ``fairseq-generate`` log (``--hyp-format generate``:
the ``H-`` lines with BPE removed, in sentence-id order) or one sentence per line (``text``), tokenized
as the gold file's ``S`` lines. Writes OUT.json (P, R, F and the edit counts).
"""
import argparse

from .. import outputs
from ..scoring import score_m2 as scorer
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-score-m2", description=description_of(__doc__))
    p.add_argument("--hyp", required=True, help="System corrections.")
    p.add_argument("--hyp-format", choices=["generate", "text"], default="generate",
                   help="Format of --hyp: a fairseq-generate log or one sentence a line (default: %(default)s).")
    p.add_argument("--gold", required=True, help="The gold edits (M2 format, e.g. CoNLL-2014's official-2014.combined.m2).")
    p.add_argument("--out", required=True, help="Output prefix: OUT.json.")
    p.add_argument("--beta", type=float, default=0.5, help="F_beta (default 0.5, the shared task's).")
    p.add_argument("--max-unchanged-words", type=int, default=2,
                   help="Most unchanged tokens inside one edit (the official scorer's default 2).")
    p.add_argument("--ignore-whitespace-casing", action="store_true",
                   help="Leave out system edits that only change case or spacing (the official option).")
    return p


def cli_main():
    scorer.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
