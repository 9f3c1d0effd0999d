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

from .. import outputs
from ..analysis import alignment_analysis
from ..analysis.common import add_checkpoint_args, add_sentences_arg
from ._tools import description_of


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


def cli_main():
    alignment_analysis.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
