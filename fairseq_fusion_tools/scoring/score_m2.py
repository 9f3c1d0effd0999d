"""fusion-score-m2's run: the hypotheses read (text or a fairseq-generate log) and scored against the M2 gold."""

from .. import outputs
from . import evaluation
from .m2 import M2FormatError, score_m2
from fairseq_fusion_tools.user_files import fail


def main(args):
    hyps = evaluation.read_hypotheses(args.hyp, args.hyp_format)
    try:
        r = score_m2(hyps, args.gold, beta=args.beta, max_unchanged_words=args.max_unchanged_words,
                     ignore_whitespace_casing=args.ignore_whitespace_casing, hyp_name=args.hyp)
    except (M2FormatError, ValueError, FileNotFoundError) as e:
        fail(f"fusion-score-m2: {e}")
    c = r["counts"]
    print(f"| M2: P {100 * r['precision']:.2f} R {100 * r['recall']:.2f} F{args.beta:g} {100 * r['f_beta']:.2f} "
          f"(correct {c['correct']}, proposed {c['proposed']}, gold {c['gold']}; {c['sentences']} sentences)")
    result = {"scorer": "M2 (nusnlp/m2scorer's algorithm)", "max_unchanged_words": args.max_unchanged_words,
              "ignore_whitespace_casing": args.ignore_whitespace_casing, **r}
    outputs.write_outputs(args.out, result)
    return result
