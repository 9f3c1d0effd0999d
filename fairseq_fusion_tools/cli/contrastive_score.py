"""fusion-contrastive-score: accuracy of a model on contrastive test suites (LingEval97/DistilLingEval, ContraWSD, MuCoW).

Each SUITE is a line-aligned folder (src.SRC, tgt.correct.TGT, tgt.incorrect.TGT) or a JSON file
(LingEval97 / ContraWSD / MuCoW scoring format). Raw sentences are preprocessed as the model's
training data was (Moses tokens, truecasing and BPE from the data folder's prepare.json /
bpe.codes), then scored with the model (sum of log-probs, EOS included).

--protocol (see analysis/contrastive_protocols.py):
  lingeval97  each (reference, contrastive) pair counts in its own error type, with accuracy by
              distance (bins 0, 1..15, >15) and by frequency (rsennrich/lingeval97 evaluate.py)
  contrawsd   an item is right when its reference beats every variant; per ambig word:sense
              (ZurichNLP/ContraWSD evaluate.py)
  auto        (default) per suite: folders -> lingeval97; JSON -> contrawsd when its items have an
              "ambig word" (ContraWSD/MuCoW), lingeval97 when none has (LingEval97)
--category keeps only the named error types (lingeval97) / categories or ambiguous words (contrawsd).

Translation suites (ContraWSD WMT18, MuCoW translation) are checked by fusion-contrastive-translate.
Writes OUT.json (accuracies per protocol, every decision's scores) and OUT.png.
"""
import argparse

from .. import outputs
from ..analysis import common
from ..analysis import contrastive_protocols as protocols
from ..analysis import contrastive_score
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-contrastive-score", description=description_of(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    common.add_checkpoint_args(p, data_help="Data folder of fusion-prepare-text: dictionaries, bpe.codes (default: the "
                               "checkpoint's).", out_help="Output prefix: writes OUT.json and OUT.png.")
    p.add_argument("--suite", required=True, nargs="+", help="Line-aligned suite folders and/or LingEval97/ContraWSD .json files.")
    p.add_argument("--protocol", default="auto", choices=("auto",) + protocols.PROTOCOLS,
                   help="How scores become accuracies (default: auto, by suite format; see below).")
    p.add_argument("--category", nargs="+", default=None,
                   help="Score only these error types (lingeval97) / categories or ambiguous words (contrawsd).")
    p.add_argument("--input-format", choices=["raw", "bpe"], default="raw",
                   help="How the suites' text is given: raw text is preprocessed like the training data (default); bpe text "
                        "is already tokenized and BPE'd.")
    p.add_argument("--normalize", action="store_true", help="Compare mean log-probs per token instead of sums.")
    p.add_argument("--max-items", type=int, default=None, help="Score only the first N items of each suite.")
    p.add_argument("--max-tokens", type=int, default=4000, help="Tokens per batch.")
    p.add_argument("--phrase-trees", default=None, help="Parse-tree phrase models: parse trees of the suite's sources "
                   "(one bracketed tree per sentence, looked up by its words).")
    p.add_argument("--phrase-parser", choices=["none", "stanza"], default=None,
                   help="Parse-tree phrase models: parse the sources with this parser where --phrase-trees has no tree.")
    p.add_argument("--phrase-fallback", choices=["ngram", "error"], default=None,
                   help="Parse-tree phrase models: a source without a usable tree gets n-gram spans (default, counted "
                        "and reported) or is an error.")
    return p


def cli_main():
    contrastive_score.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
