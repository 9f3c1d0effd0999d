"""fusion-score-rouge: ROUGE-1/2/L of summaries as ROUGE-1.5.5.pl ``-c 95 -r 1000 -n 2 -a -m`` prints them (Liu et al. 2021, CNN/DM).

The summaries are a ``fairseq-generate`` log (``--hyp-format generate``: the detokenized ``D-`` lines
when generation decoded a BPE such as GPT-2's, else the ``H-`` lines with BPE removed) or one
summary per line (``text``). References: one summary per line, its sentences separated by ``<q>``
(See et al.'s format). Hypothesis sentences are split after ., ! or ? followed by a space, for
ROUGE-L's summary-level LCS (``scoring/rouge.py``, a port of the Perl script: its Porter stemmer,
WordNet exceptions and bootstrap average). Writes OUT.json (F, P, R of each, x100).
"""
import argparse
import re

from ..analysis import common, evaluation
from ..scoring.rouge import rouge_scores
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(summary):
    """``<q>``-separated as it is; otherwise one sentence per ., ! or ? followed by a space."""
    return summary if "<q>" in summary else "<q>".join(SENTENCE_END.split(summary.strip()))


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-score-rouge", description=description_of(__doc__))
    p.add_argument("--hyp", required=True, help="System summaries.")
    p.add_argument("--hyp-format", choices=["generate", "text"], default="generate",
                   help="Format of --hyp: a fairseq-generate log or one summary a line (default: %(default)s).")
    p.add_argument("--ref", required=True, help="Reference summaries, one a line, sentences separated by <q>.")
    p.add_argument("--out", required=True, help="Output prefix: OUT.json.")
    return p


def main(args):
    if args.hyp_format == "generate":
        found = evaluation.read_generate_output(args.hyp)
        hyps = found["D"] or found["H"]
    else:
        hyps = evaluation.read_lines(args.hyp)
    refs = evaluation.read_lines(args.ref)
    if len(hyps) != len(refs):
        fail(f"fusion-score-rouge: {args.hyp} has {len(hyps)} summaries but {args.ref} has {len(refs)}")
    try:
        scores = rouge_scores([split_sentences(h) for h in hyps], refs)
    except ImportError as e:  # the rouge extra is not installed
        fail(f"fusion-score-rouge needs the rouge extra: pip install 'fairseq_fusion[rouge]' ({e})")
    for name, s in scores.items():
        print(f"| {name}: F {s['f']:.2f} P {s['p']:.2f} R {s['r']:.2f}")
    result = {"summaries": len(hyps), "scorer": "ROUGE-1.5.5.pl -c 95 -r 1000 -n 2 -a -m (Python port)", **scores}
    common.write_outputs(args.out, result)
    return result


def cli_main():
    main(common.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
