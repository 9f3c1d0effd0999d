"""fusion-alignment-analysis: AER and cumulative coverage of each decoder layer's encoder
attention (Yang et al. 2020, §3.2, Eq. 2, Fig. 4) against gold word alignments.

Example (a Multi30k En-De model on the RWTH De-En gold set; the direction is swapped
automatically from the file name and the model's languages):
  fusion-alignment-analysis --path ckpt/checkpoint_last.pt --data /tmp/m30k \\
      --parallel ../shared/data/alignment/deen/test.de-en --gold ../shared/data/alignment/deen/deen.talp \\
      --out results/alignment
"""
import argparse
import ast
import os

from ..analysis import alignment
from ..analysis.common import load_model, write_outputs


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-alignment-analysis", description=__doc__.split("\n")[0])
    p.add_argument("--path", required=True, help="checkpoint file (.pt)")
    p.add_argument("--data", default=None, help="binarized data directory with the dictionaries (default: the checkpoint's)")
    p.add_argument("--parallel", required=True, help="tokenized 'source ||| target' file, e.g. deen/test.de-en")
    p.add_argument("--gold", required=True, help="gold alignment: 1-indexed 'i-j' sure / 'ipj' possible, source index first")
    p.add_argument("--bpe-codes", default=None, help="subword-nmt codes the model was trained with (default: DATA/bpe.codes if it exists)")
    p.add_argument("--file-langs", default=None, help="languages of --parallel as SRC-TGT (default: from its name, e.g. test.de-en)")
    direction = p.add_mutually_exclusive_group()
    direction.add_argument("--swap", dest="swap", action="store_true", default=None, help="feed the file's target side to the model as source")
    direction.add_argument("--no-swap", dest="swap", action="store_false", help="feed the file's source side to the model as source")
    p.add_argument("--max-sentences", type=int, default=None, help="use only the first N sentence pairs")
    p.add_argument("--out", required=True, help="output prefix: writes OUT.png and OUT.json")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--model-overrides", default="{}", help="python dict of model arg overrides")
    return p


def main(args):
    pairs = alignment.read_parallel(args.parallel)
    gold = alignment.read_links(args.gold, one_indexed=True)
    alignment.check_lengths(gold, pairs, args.gold)
    if args.max_sentences:
        pairs, gold = pairs[: args.max_sentences], gold[: args.max_sentences]
    model, task, cfg = load_model(args.path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    file_langs = tuple(args.file_langs.split("-")) if args.file_langs else alignment.file_languages(args.parallel)
    swap = alignment.model_direction(task, file_langs, args.swap)
    codes = args.bpe_codes or os.path.join(cfg.task.data, "bpe.codes")
    if args.bpe_codes and not os.path.exists(codes):
        raise FileNotFoundError(f"--bpe-codes {codes}: no such file")
    bpe = alignment.load_bpe(codes if os.path.exists(codes) else None)
    if bpe is None:
        print(f"| no BPE codes at {codes}: words are looked up whole (pass --bpe-codes)")
    per_layer, unk = alignment.align_corpus(model, task, pairs, bpe, swap)
    layers = alignment.analyze(per_layer, gold, pairs, swap)
    for r in layers:
        print(f"| layer {r['layer']}: AER {100 * r['aer']:.2f} P {100 * r['precision']:.2f} "
              f"R {100 * r['recall']:.2f} C<=i {100 * r['cumulative_coverage']:.2f}")
    data = {
        "checkpoint": args.path, "parallel": args.parallel, "gold": args.gold, "sentences": len(pairs),
        "swap": swap, "bpe_codes": codes if bpe is not None else None, "unknown_subwords": unk,
        "layers": layers,
    }
    title = f"{os.path.basename(args.path)} on {os.path.basename(args.parallel)} ({len(pairs)} sentences)"
    write_outputs(args.out, data, alignment.plot(layers, title))
    return data


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
