"""fusion-score-rouge: ROUGE-1/2/L of summaries as ROUGE-1.5.5.pl ``-c 95 -r 1000 -n 2 -a -m`` prints them (Liu et al. 2021, CNN/DM).

The summaries are a ``fairseq-generate`` log (``--hyp-format generate``: the detokenized ``D-`` lines
when generation decoded a BPE such as GPT-2's, else the ``H-`` lines with BPE removed) or one
summary per line (``text``). References: one summary per line, its sentences separated by ``<q>``
(See et al.'s format). Hypothesis sentences are split after ., ! or ? followed by a space, for
ROUGE-L's summary-level LCS (``scoring/rouge.py``, a port of the Perl script: its Porter stemmer,
WordNet exceptions and bootstrap average). Writes OUT.json (F, P, R of each, x100).
"""
import argparse

from .. import outputs
from ..scoring import score_rouge as scorer
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-score-rouge", description=description_of(__doc__))
    p.add_argument("--hyp", required=True, help="System summaries.")
    p.add_argument("--hyp-format", choices=["generate", "text"], default="generate",
                   help="Format of --hyp: a fairseq-generate log or one summary a line (default: %(default)s).")
    p.add_argument("--ref", required=True, help="Reference summaries, one a line, sentences separated by <q>.")
    p.add_argument("--out", required=True, help="Output prefix: OUT.json.")
    return p


def cli_main():
    scorer.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
