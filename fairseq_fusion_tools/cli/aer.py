"""fusion-aer: alignment error rate (Och & Ney 2003) of an alignment file against gold.

  fusion-aer --gold ../shared/data/alignment/deen/deen.talp \\
      --hyp ../shared/data/alignment/deen/system_outputs/giza.test.deen.grow-diagonal-final.talp
Prints AER, precision, recall (percent) and the number of distinct hypothesis links.
"""
import argparse
import json
import os

from ..analysis import alignment
from ..analysis import alignment_stream as stream
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-aer", description=description_of(__doc__))
    p.add_argument("--gold", required=True, help="Gold alignment: 'i-j' sure and 'ipj' possible links, source index first.")
    p.add_argument("--hyp", required=True, help="Hypothesis alignment: Pharaoh 'i-j' links, source index first.")
    p.add_argument("--gold-zero-indexed", action="store_true", help="Gold indices start at 0 (default: 1).")
    p.add_argument("--hyp-one-indexed", action="store_true", help="Hypothesis indices start at 1 (default: 0).")
    p.add_argument("--reverse-hyp", action="store_true", help="Hypothesis links are 'target-source'.")
    p.add_argument("--json", action="store_true", help="Print JSON.")
    return p


def count_lines(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def main(args):
    for f, flag in ((args.gold, "--gold"), (args.hyp, "--hyp")):
        if not os.path.exists(f):
            fail(f"fusion-aer: {flag} {f}: no such file")
    n_hyp, n_gold = count_lines(args.hyp), count_lines(args.gold)
    if n_hyp != n_gold:
        fail(f"fusion-aer: --hyp {args.hyp} has {n_hyp} lines but --gold {args.gold} has {n_gold}")
    # both files are read line by line: memory does not grow with the corpus
    gold = stream.iter_links(args.gold, one_indexed=not args.gold_zero_indexed)
    hyps = (sure for sure, _ in stream.iter_links(args.hyp, one_indexed=args.hyp_one_indexed))
    if args.reverse_hyp:
        hyps = (alignment.reverse_links(h) for h in hyps)
    stats = stream.AlignmentStats(1)
    try:
        for hyp, g in zip(hyps, gold):
            stats.add([hyp], 0, g)
    except ValueError as e:
        fail(f"fusion-aer: {e}")
    r = {k: v for k, v in stats.layers(with_gold=True)[0].items() if k in ("aer", "precision", "recall", "links")}
    if args.json:
        print(json.dumps(r))
    else:
        print(f"AER {100 * r['aer']:.2f} P {100 * r['precision']:.2f} R {100 * r['recall']:.2f} links {r['links']}")
    return r


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
