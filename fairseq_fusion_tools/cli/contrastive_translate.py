"""fusion-contrastive-translate: translate a WSD translation test suite and check the translations (MuCoW, ContraWSD WMT18).

The suite's sources are translated with the model (fairseq's generator, fairseq-generate's options;
raw text preprocessed as the training data was, output BPE removed and Moses-detokenized), or
existing translations are read with --hyp (one detokenized line per source line; no model needed).
Translations are written to OUT.hyp, results to OUT.json and OUT.png.

MuCoW (folder with PAIR.{text,ref,key,domain}.txt[.gz]; --pair, default the model's languages):
  pos/neg/unk per line, coverage, precision, recallA (the papers' tables), recallB (the papers'
  definition), F1 per domain (in/out) and per ambiguous word (Helsinki-NLP/MuCoW evaluate.py).
  --lemmas: the lemmatized translations the authors search when the tokens match nothing.
ContraWSD WMT18 (folder with de-en.wsd.task.{de,en.detok,doc_ids.de}[.gz]):
  needs the sense key de-en.wsd.task.json (ZurichNLP/ContraWSD testsuite_wmt18/), in the folder or
  --key; the shared copy lacks it (over 4 MiB). Accuracy = translations with only the correct
  sense, per ambig word:sense and frequency bin; both/no sense found go to OUT.manual.json
  (ZurichNLP/ContraWSD testsuite_wmt18/evaluate.py). --sense-patterns: JSON {sense: regex}.
"""
import argparse

from .. import outputs
from ..analysis import common, contrastive_translate
from ..analysis import contrastive_translate_command as command
from ._tools import add_generation_args, description_of


def get_parser():
    p = argparse.ArgumentParser(prog=command.PROG, description=description_of(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--suite", required=True, help="A MuCoW translation folder or the ContraWSD WMT18 folder.")
    p.add_argument("--pair", default=None, help="MuCoW language pair, e.g. en-de (default: the model's SRC-TGT).")
    common.add_checkpoint_args(p, required=False, path_help="Checkpoint to translate with (.pt).",
                               data_help="Data folder of fusion-prepare-text (default: the checkpoint's).",
                               out_help="Output prefix: writes OUT.json, OUT.png and OUT.hyp.")
    p.add_argument("--hyp", default=None, help="Check these translations instead of translating (one line per source).")
    p.add_argument("--lemmas", default=None, help="MuCoW: lemmatized translations, line-aligned with the translations.")
    p.add_argument("--key", default=None, help=f"ContraWSD: the sense key {contrastive_translate.CONTRAWSD_KEY}.")
    p.add_argument("--sense-patterns", default=None, help="ContraWSD: JSON file {sense: regex} (default: the key's sense strings).")
    p.add_argument("--ignore-wmt", action="store_true", help="ContraWSD: leave out sentences from WMT dev/test sets.")
    p.add_argument("--input-format", choices=["raw", "bpe"], default="raw", help="How the suite's text is given: raw text is preprocessed like the "
                   "training data (default); bpe text is already tokenized and BPE'd.")
    p.add_argument("--max-items", type=int, default=None, help="Only the first N lines of the suite.")
    p.add_argument("--max-tokens", type=int, default=4000, help="Tokens per batch.")
    add_generation_args(p)
    return p


def cli_main():
    command.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()
