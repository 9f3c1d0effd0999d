"""fusion-parse-trees: constituency parse trees of tokenized text, for the +Parse phrase models.

Reads tokenized text (one sentence per line, words separated by spaces, as fusion-prepare-text
writes DATA/tok/{split}.{src}) and writes one bracketed tree per line with exactly those words, the
input that fusion-parse-spans (and --phrase-trees) accepts. The parser is stanza's constituency
parser with pre-tokenized input (``pip install stanza``, then ``stanza.download(LANG)``, or
``--model-dir``), so its tokenizer never splits or merges words. A line the parser cannot handle
(or that is empty) is written as an empty line, counted and reported; fusion-parse-spans gives such
lines n-gram spans (``--fallback ngram``) and reports them again.
"""
import argparse

from ..prepare import parse_trees
from ._tools import description_of
from fairseq_fusion.tasks.phrase_spans import PARSERS


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-parse-trees", description=description_of(__doc__))
    p.add_argument("--input", required=True, help="Tokenized text, one sentence per line.")
    p.add_argument("--output", required=True, help="Parse trees, one per input line (empty where parsing failed).")
    p.add_argument("--lang", required=True, help="Language of the parser model (e.g. en, de, zh).")
    p.add_argument("--parser", choices=sorted(PARSERS), default="stanza", help="The constituency parser (default: %(default)s).")
    p.add_argument("--model-dir", default=None, help="The parser's model folder (default: its own download folder).")
    p.add_argument("--batch-size", type=int, default=64, help="Sentences per parser call.")
    return p


def cli_main():
    parse_trees.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
