"""fusion-parse-spans: bracketed parse trees -> phrase-span file next to the binarized data.

Reads one parse tree per source line (of the tokenized text ``DATA/tok/{split}.{src}`` that
fusion-prepare-text writes), maps its words onto the BPE sub-words of
``DATA/tok/{split}.bpe.{src}``, extracts phrases with Algorithm 1 of Xu et al. (2020) and
writes ``DATA/{split}.{src}-{tgt}.{src}.phrases`` for ``--task translation_with_phrases``.
A malformed tree or one whose words do not match the BPE line is reported with its line
number; nothing is written then.
"""
import argparse
import os
import sys

from ..modules.phrase_parse_tree import ParseError, phrase_lengths
from ..modules.phrase_segmentation import ROUNDINGS
from ..tasks.translation_with_phrases import format_spans, span_path


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-parse-spans", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="binarized data directory (fusion-prepare-text --destdir)")
    p.add_argument("--split", required=True, help="split name, e.g. train, valid, test")
    p.add_argument("--source-lang", "-s", required=True)
    p.add_argument("--target-lang", "-t", required=True)
    p.add_argument("--parse", required=True, help="parse trees, one bracketed tree per source line")
    p.add_argument("--bpe", default=None, help="BPE source text of the split (default: DATA/tok/SPLIT.bpe.SRC)")
    p.add_argument("--output", default=None, help="span file (default: DATA/SPLIT.SRC-TGT.SRC.phrases)")
    p.add_argument("--phrase-size-rounding", choices=list(ROUNDINGS), default="ceil",
                   help="the phrase size limit n is footnote 2's seql / 6 rounded up (ceil, the authors' code) "
                   "or down (floor): as the model's --phrase-size-rounding")
    p.add_argument("--max-errors", type=int, default=10, help="report at most this many bad lines")
    return p


def binarized_sizes(data, split, src, tgt):
    """Sizes (with </s>) of the binarized source sentences, or None if the split is not binarized."""
    prefix = os.path.join(data, f"{split}.{src}-{tgt}.{src}")
    if not os.path.exists(prefix + ".idx"):
        return None
    from fairseq.data import data_utils

    dataset = data_utils.load_indexed_dataset(prefix, None)
    return [int(n) for n in dataset.sizes]  # copied while the memory map is open


def compute_spans(tree_lines, bpe_lines, parse_path, max_errors=10, rounding="ceil"):
    """(spans, errors): the phrase lengths of every line, and 'FILE line N: ...' messages."""
    spans, errors = [], []
    if len(tree_lines) != len(bpe_lines):
        errors.append(f"{parse_path}: {len(tree_lines)} trees but the BPE text has {len(bpe_lines)} lines")
    for i, (tree, bpe) in enumerate(zip(tree_lines, bpe_lines), start=1):
        try:
            spans.append(phrase_lengths(tree, bpe, rounding))
        except ParseError as e:
            errors.append(f"{parse_path} line {i}: {e}")
            if len(errors) >= max_errors:
                break
    return spans, errors


def main(args):
    bpe_path = args.bpe or os.path.join(args.data, "tok", f"{args.split}.bpe.{args.source_lang}")
    for path, flag in ((args.parse, "--parse"), (bpe_path, "--bpe")):
        if not os.path.exists(path):
            sys.exit(f"fusion-parse-spans: {flag} {path}: no such file")
    with open(args.parse, encoding="utf-8") as f:
        trees = [line.rstrip("\n") for line in f]
    with open(bpe_path, encoding="utf-8") as f:
        bpe = [line.rstrip("\n") for line in f]
    spans, errors = compute_spans(trees, bpe, args.parse, args.max_errors, args.phrase_size_rounding)
    sizes = binarized_sizes(args.data, args.split, args.source_lang, args.target_lang)
    if sizes is not None and not errors:
        if len(sizes) != len(spans):
            errors.append(f"{bpe_path}: {len(spans)} lines but the binarized {args.split} source has {len(sizes)}")
        for i, (lengths, size) in enumerate(zip(spans, sizes), start=1):
            if sum(lengths) != size - 1 and len(errors) < args.max_errors:
                errors.append(f"{bpe_path} line {i}: {sum(lengths)} sub-words but binarized sentence {i} has {size - 1}")
    if errors:
        sys.exit("fusion-parse-spans: no span file written:\n" + "\n".join(errors))
    out = args.output or span_path(args.data, args.split, args.source_lang, args.target_lang)
    with open(out, "w", encoding="utf-8") as f:
        for lengths in spans:
            f.write(format_spans(lengths) + "\n")
    n_phrases = sum(len(s) for s in spans)
    n_tokens = sum(sum(s) for s in spans)
    print(f"| wrote {out}: {len(spans)} sentences, {n_phrases} phrases, {n_tokens / max(n_phrases, 1):.2f} sub-words per phrase")


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
