"""fusion-parse-spans's run: each sentence's parse tree turned into the phrase spans of its BPE'd tokens, checked
against the binarized sizes.
"""
import os
import sys

from .. import atomic_files
from fairseq_fusion.modules.phrase_parse_tree import ParseError, phrase_lengths
from fairseq_fusion.tasks.phrase_spans import ngram_spans
from fairseq_fusion.tasks.translation_with_phrases import format_spans, span_path
from fairseq_fusion_tools.user_files import fail


def binarized_sizes(data, split, src, tgt):
    """Sizes (with </s>) of the binarized source sentences, or None if the split is not binarized."""
    prefix = os.path.join(data, f"{split}.{src}-{tgt}.{src}")
    if not os.path.exists(prefix + ".idx"):
        return None
    from fairseq.data import data_utils

    dataset = data_utils.load_indexed_dataset(prefix, None)
    return [int(n) for n in dataset.sizes]  # copied while the memory map is open


def compute_spans(tree_lines, bpe_lines, parse_path, max_errors=10, rounding="ceil", fallback="error"):
    """(spans, errors, fallbacks): the phrase lengths of every line, 'FILE line N: ...' errors, and the
    same messages for the lines given n-gram spans (``fallback="ngram"``)."""
    spans, errors, fallbacks = [], [], []
    if len(tree_lines) != len(bpe_lines):
        errors.append(f"{parse_path}: {len(tree_lines)} trees but the BPE text has {len(bpe_lines)} lines")
    for i, (tree, bpe) in enumerate(zip(tree_lines, bpe_lines), start=1):
        try:
            spans.append(phrase_lengths(tree, bpe, rounding))
        except ParseError as e:
            if fallback == "ngram":
                fallbacks.append(f"{parse_path} line {i}: {e}")
                spans.append(ngram_spans(len(bpe.split()), rounding))
                continue
            errors.append(f"{parse_path} line {i}: {e}")
            if len(errors) >= max_errors:
                break
    return spans, errors, fallbacks


def main(args):
    if not os.path.isdir(args.data):
        fail(f"fusion-parse-spans: --data {args.data}: {'a file' if os.path.exists(args.data) else 'no such folder'}; "
             "expected the folder of the binarized data (fusion-prepare-text --destdir)")
    bpe_path = args.bpe or os.path.join(args.data, "tok", f"{args.split}.bpe.{args.source_lang}")
    for path, flag in ((args.parse, "--parse"), (bpe_path, "--bpe")):
        if not os.path.exists(path):
            fail(f"fusion-parse-spans: {flag} {path}: no such file")
    with open(args.parse, encoding="utf-8") as f:
        trees = [line.rstrip("\n") for line in f]
    with open(bpe_path, encoding="utf-8") as f:
        bpe = [line.rstrip("\n") for line in f]
    spans, errors, fallbacks = compute_spans(trees, bpe, args.parse, args.max_errors, args.phrase_size_rounding,
                                             args.fallback)
    if fallbacks:
        shown = "\n".join(fallbacks[: args.max_errors]) + (f"\n... ({len(fallbacks) - args.max_errors} more)"
                                                           if len(fallbacks) > args.max_errors else "")
        print(f"| {len(fallbacks)} of {len(bpe)} lines have no usable tree and get n-gram spans:\n{shown}", file=sys.stderr)
        if len(fallbacks) > args.max_fallback * max(len(bpe), 1):
            errors.append(f"{args.parse}: {len(fallbacks)} of {len(bpe)} lines without a usable tree, more than "
                          f"--max-fallback {args.max_fallback}: trees of another file or tokenization?")
    sizes = binarized_sizes(args.data, args.split, args.source_lang, args.target_lang)
    if sizes is not None and not errors:
        if len(sizes) != len(spans):
            errors.append(f"{bpe_path}: {len(spans)} lines but the binarized {args.split} source has {len(sizes)}")
        for i, (lengths, size) in enumerate(zip(spans, sizes), start=1):
            if sum(lengths) != size - 1 and len(errors) < args.max_errors:
                errors.append(f"{bpe_path} line {i}: {sum(lengths)} sub-words but binarized sentence {i} has {size - 1}")
    if errors:
        print("\n".join(errors), file=sys.stderr)  # the details above the one line
        fail(f"fusion-parse-spans: --parse {args.parse}: no span file written ({len(errors)} problems above)")
    out = args.output or span_path(args.data, args.split, args.source_lang, args.target_lang)
    atomic_files.write_lines(out, [format_spans(lengths) for lengths in spans])
    n_phrases = sum(len(s) for s in spans)
    n_tokens = sum(sum(s) for s in spans)
    print(f"| wrote {out}: {len(spans)} sentences, {n_phrases} phrases, {n_tokens / max(n_phrases, 1):.2f} sub-words per phrase"
          + (f", {len(fallbacks)} sentences with n-gram spans (no usable tree)" if fallbacks else ""))
