"""fusion-aer's run: an alignment file against gold, read line by line."""
import json
import os

from . import alignment_links
from fairseq_fusion_tools.user_files import fail


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
    gold = alignment_links.iter_links(args.gold, one_indexed=not args.gold_zero_indexed)
    hyps = (sure for sure, _ in alignment_links.iter_links(args.hyp, one_indexed=args.hyp_one_indexed))
    if args.reverse_hyp:
        hyps = (alignment_links.reverse_links(h) for h in hyps)
    stats = alignment_links.AlignmentStats(1)
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
