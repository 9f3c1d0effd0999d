"""fusion-bleu-by-length's run: the systems read, BLEU per source-length bucket, the figure."""
import os

from .. import outputs
from . import evaluation
from fairseq_fusion_tools.user_files import fail


def parse_systems(specs):
    systems = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            fail(f"--sys {spec!r}: expected NAME=FILE")
        if not os.path.exists(path):
            fail(f"--sys {spec}: no such file {path}")
        if name in systems:
            fail(f"--sys: system name {name!r} given twice")
        systems[name] = path
    return systems


def read_system(path, fmt, lang):
    if fmt == "detok":
        return evaluation.read_lines(path)
    if lang is None:
        fail(f"--hyp-format {fmt} needs --target-lang to detokenize")
    lines = evaluation.read_generate_output(path)["H"] if fmt == "generate" else evaluation.read_lines(path)
    return evaluation.detokenize(lines, lang)


def main(args):
    try:
        bounds = [int(b) for b in args.buckets.split(",")]
    except ValueError:
        fail(f"--buckets {args.buckets!r}: expected comma-separated integers such as 15,30,45")
    systems = {n: read_system(p, args.hyp_format, args.target_lang) for n, p in parse_systems(args.sys).items()}
    try:
        result = evaluation.bleu_by_length(evaluation.read_lines(args.src), evaluation.read_lines(args.ref), systems, bounds, args.tokenized)
    except ValueError as e:
        fail(f"fusion-bleu-by-length: {e}")
    for name, scores in result["bleu"].items():
        cells = "  ".join(f"{b}: {'-' if s is None else f'{s:.2f}'}" for b, s in zip(result["buckets"], scores))
        print(f"{name}\tall: {result['overall'][name]:.2f}  {cells}")
    outputs.write_outputs(args.out, result, evaluation.plot_bleu_by_length(
        result, args.title or f"BLEU by source length against {os.path.basename(args.ref)}"))
    return result
