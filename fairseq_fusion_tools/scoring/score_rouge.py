"""fusion-score-rouge's run: summaries split into sentences and scored with ROUGE-1.5.5's figures."""
import re

from .. import outputs
from . import evaluation
from .rouge import rouge_scores
from fairseq_fusion_tools.user_files import fail


SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(summary):
    """``<q>``-separated as it is; otherwise one sentence per ., ! or ? followed by a space."""
    return summary if "<q>" in summary else "<q>".join(SENTENCE_END.split(summary.strip()))


def main(args):
    hyps = evaluation.read_hypotheses(args.hyp, args.hyp_format)
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
    outputs.write_outputs(args.out, result)
    return result
