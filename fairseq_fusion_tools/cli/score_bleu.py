"""fusion-score-bleu: detokenized sacreBLEU (with signature) and tokenized BLEU of a translation.

The hypothesis is a ``fairseq-generate`` log (``--hyp-format generate``, BPE removed; the log's own ``BLEU4 = ...``
line, fairseq's score of subword units, is named as not the result), Moses-
tokenized text (``tok``: detokenized here) or plain text (``detok``). The reference is raw text.
Tokenized BLEU re-tokenizes both sides with the Moses tokenizer and splits compounds (de, fr)
or Chinese characters (zh), as the papers did (see ``fairseq_fusion_tools.scoring.evaluation``).
"""
import argparse

from .. import outputs
from ..scoring import score_bleu as scorer
from ._tools import description_of


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


def cli_main():
    scorer.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
