"""fusion-score-bleu: detokenized sacreBLEU (with signature) and tokenized BLEU of a translation.

The hypothesis is a ``fairseq-generate`` log (``--hyp-format generate``, BPE removed; the log's own ``BLEU4 = ...``
line, fairseq's score of subword units, is named as not the result), Moses-
tokenized text (``tok``: detokenized here) or plain text (``detok``). The reference is raw text.
Tokenized BLEU re-tokenizes both sides with the Moses tokenizer and splits compounds (de, fr)
or Chinese characters (zh), as the papers did (see ``fairseq_fusion_tools.scoring.evaluation``).
"""
import argparse
import os

from .. import atomic_files
from ..analysis import common, evaluation, text_language
from ._tools import description_of
from fairseq_fusion.errors import warn
from fairseq_fusion_tools.user_files import fail


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-score-bleu", description=description_of(__doc__))
    p.add_argument("--hyp", required=True, help="Hypothesis file (.gz ok).")
    p.add_argument("--hyp-format", choices=["generate", "tok", "detok"], default="generate",
                   help="Format of --hyp: a fairseq-generate log, Moses-tokenized or detokenized text (default: %(default)s).")
    p.add_argument("--ref", required=True, help="Raw (untokenized) reference, one sentence a line (.gz ok).")
    p.add_argument("--target-lang", "-t", required=True, help="Language of hypothesis and reference (de, en, zh, ...).")
    p.add_argument("--detruecase", action="store_true", help="The hypothesis is truecased: detruecase before detokenizing.")
    p.add_argument("--split", choices=["auto", "compound", "chars", "none"], default="auto",
                   help="Tokenized BLEU post-processing (auto: compound for de/fr, chars for zh).")
    p.add_argument("--detok-only", action="store_true", help="Report only detokenized sacreBLEU.")
    p.add_argument("--sacrebleu-tokenize", default="auto",
                   help="The sacreBLEU tokenizer of the detokenized BLEU (auto: zh for zh, ja-mecab for ja, ko-mecab for ko, "
                   "else 13a, as sacrebleu -l picks).")
    p.add_argument("--out", default=None, help="Output prefix: writes OUT.json and the detokenized hypothesis OUT.detok.")
    return p


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


def cli_main():
    main(common.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
