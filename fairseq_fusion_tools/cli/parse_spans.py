"""fusion-parse-spans: bracketed parse trees -> phrase-span file next to the binarized data.

Reads one parse tree per source line (of the tokenized text ``DATA/tok/{split}.{src}`` that
fusion-prepare-text writes), maps its words onto the BPE sub-words of
``DATA/tok/{split}.bpe.{src}``, extracts phrases with Algorithm 1 of Xu et al. (2020) and
writes ``DATA/{split}.{src}-{tgt}.{src}.phrases`` for ``--task translation_with_phrases``.
A line without a usable tree (empty: fusion-parse-trees could not parse it; malformed; its words
differ from the BPE line) gets n-gram spans (footnote 2's size), each reported with its line
number and counted; more than ``--max-fallback`` of the lines (a wrong file, another tokenization)
or ``--fallback error`` refuses the file: nothing is written then.
"""
import argparse

from ..prepare import parse_spans
from ._tools import description_of
from fairseq_fusion.modules.phrase_segmentation import ROUNDINGS


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-parse-spans", description=description_of(__doc__))
    p.add_argument("--data", required=True, help="Binarized data directory (fusion-prepare-text --destdir).")
    p.add_argument("--split", required=True, help="Split name, e.g. train, valid, test.")
    p.add_argument("--source-lang", "-s", required=True, help="Source language of the binarized data, e.g. en.")
    p.add_argument("--target-lang", "-t", required=True, help="Target language of the binarized data, e.g. de.")
    p.add_argument("--parse", required=True, help="Parse trees, one bracketed tree per source line.")
    p.add_argument("--bpe", default=None, help="BPE source text of the split (default: DATA/tok/SPLIT.bpe.SRC).")
    p.add_argument("--output", default=None, help="Span file (default: DATA/SPLIT.SRC-TGT.SRC.phrases).")
    p.add_argument("--phrase-size-rounding", choices=list(ROUNDINGS), default="ceil",
                   help="The phrase size limit n is footnote 2's seql / 6 rounded up (ceil, the authors' code) "
                   "or down (floor): as the model's --phrase-size-rounding.")
    p.add_argument("--max-errors", type=int, default=10, help="Report at most this many bad lines.")
    p.add_argument("--fallback", choices=["ngram", "error"], default="ngram",
                   help="A line without a usable tree: n-gram spans, reported and counted (default), or an error.")
    p.add_argument("--max-fallback", type=float, default=0.05,
                   help="Refuse the file when more than this fraction of its lines fall back to n-gram spans.")
    return p


def cli_main():
    parse_spans.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
