"""fusion-alignment-analysis: AER and cumulative coverage of each decoder layer's encoder
attention (Yang et al. 2020, §3.2, Eq. 2, Figs. 4-7) against gold word alignments.

Streams the sentence pairs in batches (memory does not grow with the corpus). Without
--gold it reports the cumulative coverage only (any 'source ||| target' file). Several
checkpoints (--path A B ...) are overlaid in one plot.

Example (a Multi30k En-De model on the RWTH De-En gold set; the direction is swapped
automatically from the file name and the model's languages):
  fusion-alignment-analysis --path ckpt/checkpoint_last.pt --data DATA_BIN \\
      --parallel ../shared/data/alignment/deen/test.de-en --gold ../shared/data/alignment/deen/deen.talp \\
      --out results/alignment
"""
import argparse
import ast
import itertools
import os

from ..analysis import alignment
from ..analysis import alignment_stream as stream
from ..analysis.common import add_checkpoint_args, add_sentences_arg, load_model
from ..outputs import locked, write_outputs
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-alignment-analysis", description=description_of(__doc__))
    add_checkpoint_args(p, several_paths=True, path_help="Checkpoint files (.pt); several are overlaid in one plot.")
    p.add_argument("--labels", default=None, help="Comma-separated plot labels, one per --path (default: file names).")
    p.add_argument("--parallel", required=True, help="Tokenized 'source ||| target' file, e.g. deen/test.de-en.")
    p.add_argument("--gold", default=None, help="Gold alignment: 1-indexed 'i-j' sure / 'ipj' possible, source index first "
                                                "(without it: coverage only).")
    p.add_argument("--bpe-codes", default=None, help="The subword-nmt codes the model was trained with (default: DATA/bpe.codes if it exists).")
    p.add_argument("--file-langs", default=None, help="Languages of --parallel as SRC-TGT (default: from its name, e.g. test.de-en).")
    direction = p.add_mutually_exclusive_group()
    direction.add_argument("--swap", dest="swap", action="store_true", default=None, help="Feed the file's target side to the model as source.")
    direction.add_argument("--no-swap", dest="swap", action="store_false", help="Feed the file's source side to the model as source.")
    case = p.add_mutually_exclusive_group()
    case.add_argument("--lowercase", dest="lowercase", action="store_true", default=None,
                      help="Lower-case both sides before BPE (default: a side is lower-cased only when the model's "
                           "dictionary for it has no capitals, i.e. the model was trained lower-cased).")
    case.add_argument("--no-lowercase", dest="lowercase", action="store_false", help="Never lower-case.")
    p.add_argument("--batch-size", type=int, default=32, help="Sentence pairs per forward pass (default: %(default)s).")
    add_sentences_arg(p, "Read only the first N sentence pairs of --parallel (default: all).")
    return p


def analyze_checkpoint(path, args):
    model, task, cfg = load_model(path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    file_langs = tuple(args.file_langs.split("-")) if args.file_langs else alignment.file_languages(args.parallel)
    swap = alignment.model_direction(task, file_langs, args.swap)
    codes = args.bpe_codes or os.path.join(cfg.task.data, "bpe.codes")
    if args.bpe_codes and not os.path.exists(codes):
        fail(f"fusion-alignment-analysis: --bpe-codes {codes}: no such file")
    bpe = alignment.load_bpe(codes if os.path.exists(codes) else None)
    if bpe is None:
        print(f"| no BPE codes at {codes}: words are looked up whole (pass --bpe-codes)")
    lower = stream.lowercase_sides(task, args.lowercase)
    pairs = itertools.islice(stream.iter_parallel(args.parallel), args.sentences)
    gold = itertools.islice(stream.iter_links(args.gold, one_indexed=True), args.sentences) if args.gold else None
    layers, n, unk = stream.analyze_stream(model, task, pairs, gold, bpe, swap, lower, args.batch_size)
    for r in layers:
        aer = f"AER {100 * r['aer']:.2f} P {100 * r['precision']:.2f} R {100 * r['recall']:.2f} " if "aer" in r else ""
        print(f"| layer {r['layer']}: {aer}C<=i {100 * r['cumulative_coverage']:.2f}")
    return {
        "checkpoint": path, "arch": cfg.model.arch, "sentences": n, "swap": swap,
        "lowercase": {"model_source": lower[0], "model_target": lower[1]},
        "bpe_codes": codes if bpe is not None else None, "unknown_subwords": unk, "layers": layers,
    }


def main(args):
    labels = args.labels.split(",") if args.labels else [os.path.basename(p) for p in args.path]
    if len(labels) != len(args.path):
        fail(f"fusion-alignment-analysis: --labels has {len(labels)} names but --path has {len(args.path)} checkpoints")
    for f, flag in [(args.parallel, "--parallel"), (args.gold, "--gold")] + [(p, "--path") for p in args.path]:
        if f is not None and not os.path.exists(f):
            fail(f"fusion-alignment-analysis: {flag} {f}: no such file")
    if os.path.isfile(args.parallel) and os.path.getsize(args.parallel) == 0:
        fail(f"fusion-alignment-analysis: --parallel {args.parallel}: empty file; expected 'source ||| target' lines")
    entries = []
    for path, label in zip(args.path, labels):
        try:
            entries.append({"label": label, **analyze_checkpoint(path, args)})
        except ValueError as e:
            fail(f"fusion-alignment-analysis: {e}")
    data = {"parallel": args.parallel, "gold": args.gold, "checkpoints": entries}
    title = (f"Encoder attention of {', '.join(args.path)} on {os.path.basename(args.parallel)} "
             f"({entries[0]['sentences']} sentences)")
    write_outputs(args.out, data, stream.plot(entries, title))
    return data


def cli_main():
    main(locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
