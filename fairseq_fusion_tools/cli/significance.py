"""fusion-significance: paired significance of systems against a baseline (sacreBLEU's paired bootstrap, Koehn 2004;
approximate randomization; or the sign test of Collins et al. 2005, which Dou et al. 2018 use).

All files are line-aligned detokenized text (or tokenized with ``--tokenized``). Prints BLEU,
the 95% confidence interval and the p-value of each system against the baseline; writes OUT.json.
"""
import argparse

from .. import outputs
from ..scoring import significance
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-significance", description=description_of(__doc__))
    p.add_argument("--ref", required=True, help="Reference translations.")
    p.add_argument("--baseline", required=True, metavar="NAME=FILE", help="The baseline system.")
    p.add_argument("--sys", required=True, nargs="+", metavar="NAME=FILE", help="Systems to test against the baseline.")
    p.add_argument("--test", choices=["bs", "ar", "sign"], default="bs",
                   help="The test: bs, paired bootstrap resampling (default); ar, approximate randomization; sign, Collins et al. "
                   "(2005)'s sign test over sentences (Dou et al. 2018).")
    p.add_argument("--n-samples", type=int, default=0, help="Resamples (0: sacreBLEU's default, 1000 for bs, 10000 for ar).")
    p.add_argument("--tokenized", action="store_true", help="BLEU on the tokens as they are (no 13a tokenization).")
    p.add_argument("--out", default=None, help="Output prefix: OUT.json.")
    return p


def cli_main():
    significance.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
