"""fusion-score-bleu's run: the hypotheses and references read, their language checked, BLEU printed and written."""
import os

from .. import atomic_files
from . import evaluation, text_language
from fairseq_fusion.errors import warn
from fairseq_fusion_tools.user_files import fail


def warn_other_language(flag, path, lines, lang):
    """A warning when ``lines`` clearly read as another language than ``-t``: the tokenizer and the tokenized BLEU's
    post-processing (compound split, characters) are chosen by ``-t``."""
    found = text_language.guess(lines)
    if found is None or found[0] == lang:
        return
    other, shares = found
    warn(f"fusion-score-bleu: -t {lang}, but {flag} {path} reads as {other} ({100 * shares[other]:.0f}% of its words "
         f"or letters speak for {other}, {100 * shares.get(lang, 0):.0f}% for {lang}): it is scored as {lang} "
         f"(tokenized BLEU split: {evaluation.bleu_split(lang)}; {other}'s: {evaluation.bleu_split(other)}); "
         f"give -t {other} if that is its language")


def main(args):
    for flag, path in (("--hyp", args.hyp), ("--ref", args.ref)):
        if not os.path.exists(path):
            fail(f"fusion-score-bleu: {flag} {path}: no such file")
    if args.hyp_format == "generate":
        hyps = evaluation.read_generate_output(args.hyp)["H"]
    else:
        hyps = evaluation.read_lines(args.hyp)
    refs = evaluation.read_lines(args.ref)
    if not refs:
        fail(f"fusion-score-bleu: --ref {args.ref}: empty file; expected one reference sentence a line")
    if len(hyps) != len(refs):
        fail(f"fusion-score-bleu: --hyp {args.hyp} has {len(hyps)} sentences but --ref {args.ref} has {len(refs)}")
    detok = hyps if args.hyp_format == "detok" else evaluation.detokenize(hyps, args.target_lang, args.detruecase)
    for flag, path, lines in (("--hyp", args.hyp, detok), ("--ref", args.ref, refs)):
        warn_other_language(flag, path, lines, args.target_lang)
    try:
        result = evaluation.score(detok, refs, args.target_lang, args.detok_only, args.split, args.sacrebleu_tokenize)
    except ValueError as e:
        fail(f"fusion-score-bleu: {e}")
    result.update(hyp=args.hyp, ref=args.ref, sentences=len(refs))
    print(f"sacreBLEU (detokenized): {result['sacrebleu']['text']}")
    print(f"sacreBLEU signature: {result['sacrebleu']['signature']}")
    if "tokenized_bleu" in result:
        print(f"tokenized BLEU ({result['tokenized_bleu']['split']} split): {result['tokenized_bleu']['text']}")
    own = evaluation.generate_own_score(args.hyp) if args.hyp_format == "generate" else None
    if own is not None:  # the other number a newcomer sees: say which one is the result
        print(f"(the result is the sacreBLEU above; the last line of {args.hyp}, {own[0].split(',')[0]}, is "
              f"fairseq-generate's own score on {own[1]}: not comparable to published scores)")
    if args.out:
        atomic_files.write_lines(args.out + ".detok", detok)
        atomic_files.write_json(args.out + ".json", result)
        print(f"| wrote {args.out}.json and {args.out}.detok")
    return result
