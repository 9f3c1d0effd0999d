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

from .. import atomic_files
from ..progress import progress as progress_bar
from fairseq_fusion.tasks.phrase_spans import PARSERS
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-parse-trees", description=description_of(__doc__))
    p.add_argument("--input", required=True, help="Tokenized text, one sentence per line.")
    p.add_argument("--output", required=True, help="Parse trees, one per input line (empty where parsing failed).")
    p.add_argument("--lang", required=True, help="Language of the parser model (e.g. en, de, zh).")
    p.add_argument("--parser", choices=sorted(PARSERS), default="stanza", help="The constituency parser (default: %(default)s).")
    p.add_argument("--model-dir", default=None, help="The parser's model folder (default: its own download folder).")
    p.add_argument("--batch-size", type=int, default=64, help="Sentences per parser call.")
    return p


def parse_file(parser, lines, batch_size=64, progress=True):
    """Trees of ``lines`` (None where the parser failed or the line is empty)."""
    trees = []
    for start in progress_bar(range(0, len(lines), batch_size), show=progress, desc="parsing", unit="batch"):
        batch = [line.split() for line in lines[start:start + batch_size]]
        todo = [i for i, words in enumerate(batch) if words]
        parsed = parser.parse([batch[i] for i in todo]) if todo else []
        out = [None] * len(batch)
        for i, tree in zip(todo, parsed):
            out[i] = tree
        trees.extend(out)
    return trees


def main(args, parser=None):
    with open(args.input, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    try:
        parser = parser or PARSERS[args.parser](args.lang, args.model_dir, args.batch_size)
    except (ImportError, RuntimeError) as e:
        fail(f"fusion-parse-trees: {e}")
    trees = parse_file(parser, lines, args.batch_size)
    failed = [i for i, t in enumerate(trees, start=1) if t is None]
    atomic_files.write_lines(args.output, [tree or "" for tree in trees])
    print(f"| wrote {args.output}: {len(trees)} lines, {len(trees) - len(failed)} parsed, {len(failed)} not parsed"
          + (f" (lines {', '.join(map(str, failed[:10]))}{' ...' if len(failed) > 10 else ''}: empty in the output; "
             "fusion-parse-spans --fallback ngram gives them n-gram spans)" if failed else ""))
    return trees


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
