"""fusion-aer: alignment error rate (Och & Ney 2003) of an alignment file against gold.

  fusion-aer --gold ../shared/data/alignment/deen/deen.talp \\
      --hyp ../shared/data/alignment/deen/system_outputs/giza.test.deen.grow-diagonal-final.talp
Prints AER, precision, recall (percent) and the number of distinct hypothesis links.
"""
import argparse
import json

from ..analysis import alignment


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-aer", description=__doc__.split("\n")[0])
    p.add_argument("--gold", required=True, help="gold: 'i-j' sure / 'ipj' possible, source index first")
    p.add_argument("--hyp", required=True, help="hypothesis: Pharaoh 'i-j', source index first")
    p.add_argument("--gold-zero-indexed", action="store_true", help="gold indices start at 0 (default: 1)")
    p.add_argument("--hyp-one-indexed", action="store_true", help="hypothesis indices start at 1 (default: 0)")
    p.add_argument("--reverse-hyp", action="store_true", help="hypothesis links are 'target-source'")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


def main(args):
    gold = alignment.read_links(args.gold, one_indexed=not args.gold_zero_indexed)
    hyps = [sure for sure, _ in alignment.read_links(args.hyp, one_indexed=args.hyp_one_indexed)]
    if args.reverse_hyp:
        hyps = [alignment.reverse_links(h) for h in hyps]
    if len(hyps) != len(gold):
        raise SystemExit(f"fusion-aer: --hyp {args.hyp} has {len(hyps)} lines but --gold {args.gold} has {len(gold)}")
    r = alignment.alignment_error_rate(hyps, gold)
    if args.json:
        print(json.dumps(r))
    else:
        print(f"AER {100 * r['aer']:.2f} P {100 * r['precision']:.2f} R {100 * r['recall']:.2f} links {r['links']}")
    return r


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
