"""fusion-bleu-by-length: BLEU of several systems per source-length bucket (Dou et al. 2018 Fig. 4, Xu et al. 2020 Fig. 3).

Systems are given as NAME=FILE (detokenized text, or fairseq-generate logs with
``--hyp-format generate``). Writes OUT.json and a line plot OUT.png.
"""
import argparse
import os

from ..analysis import common, evaluation
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-bleu-by-length", description=description_of(__doc__))
    p.add_argument("--src", required=True, help="Source sentences (length = whitespace-separated words).")
    p.add_argument("--ref", required=True, help="Reference translations (raw text unless --tokenized).")
    p.add_argument("--sys", required=True, nargs="+", metavar="NAME=FILE", help="Systems to compare.")
    p.add_argument("--hyp-format", choices=["detok", "tok", "generate"], default="detok",
                   help="Format of the system files; tok/generate are detokenized with --target-lang.")
    p.add_argument("--target-lang", "-t", default=None, help="Target language (needed for tok/generate).")
    p.add_argument("--buckets", default=",".join(map(str, evaluation.DEFAULT_BUCKETS)),
                   help="Comma-separated upper bounds of the length buckets (default: %(default)s: 1-15, 16-30, 31-45 and over 45 "
                        "words).")
    p.add_argument("--tokenized", action="store_true", help="Files are tokenized: BLEU on the tokens as they are.")
    p.add_argument("--title", default=None, help="Title of the plot (default: one naming the --ref file).")
    p.add_argument("--out", required=True, help="Output prefix: OUT.json, OUT.png.")
    return p


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
    common.write_outputs(args.out, result, evaluation.plot_bleu_by_length(
        result, args.title or f"BLEU by source length against {os.path.basename(args.ref)}"))
    return result


def cli_main():
    main(common.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
