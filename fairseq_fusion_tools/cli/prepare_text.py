"""fusion-prepare-text: raw parallel text -> Moses tokens -> joint BPE -> fairseq-preprocess.

Reads ``PREFIX.LANG`` or ``PREFIX.LANG.gz`` for each split, tokenizes with sacremoses (or keeps the tokens: ``--tokenizer none``),
learns joint BPE on the training data of both languages (subword-nmt, or fastBPE for
applying the codes), and binarizes with ``fairseq-preprocess --joined-dictionary`` (or one dictionary
per language with ``--separate-dictionaries``, e.g. for Zh-En without shared embeddings).
Training pairs are cleaned (empty sides, over ``--max-len`` tokens, length ratio over
``--max-ratio``) as Moses' ``clean-corpus-n.perl`` does; valid and test sets are kept whole.
Optional, off by default: Moses truecasing (``--truecase``, a model per language trained on
the tokenized training data) and subword-nmt's vocabulary filter (``--bpe-vocab-threshold``:
only subwords seen that often in the language's BPE'd training text are produced, the rest
is split further), codes per language (``--separate-bpe``). ``DESTDIR/prepare.json`` records the
settings, so that new text can be preprocessed the same way (``TextPipeline``).
``--preprocessed`` binarizes data that its authors released already tokenized and BPE'd (Google's
WMT16 En-De, Lee et al.'s WMT16 En-Ro), keeping their codes (``--bpe-codes``) and the raw test
references (``--raw-testpref``).
The folder is built beside DESTDIR (``.DESTDIR.building-*``) and renamed into place when complete, so a
failure or Ctrl-C leaves no half-written folder; a DESTDIR that is not empty is refused unless
``--overwrite`` (the old folder is replaced only once the new one is complete, and only where this command made it
and it holds nothing else: ``DESTDIR/.fusion-made.json`` records what it wrote). ``--add-test`` stages its
files inside the folder and moves them into place at the end (none of the folder's files is rewritten).
"""
import argparse
import os

from ..prepare import prepare_text
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-prepare-text", description=description_of(__doc__))
    p.add_argument("--source-lang", "-s", required=True, help="Source language code, the suffix of the files (e.g. en).")
    p.add_argument("--target-lang", "-t", required=True, help="Target language code, the suffix of the files (e.g. de).")
    p.add_argument("--trainpref", default=None,
                   help="Prefix of the raw training files, PREFIX.SRC and PREFIX.TGT (.gz ok; required unless --add-test).")
    p.add_argument("--validpref", default=None,
                   help="Prefix of the raw validation files (required unless --add-test).")
    p.add_argument("--add-test", default=None, metavar="PREFIX[,PREFIX]",
                   help="Add test sets to an existing --destdir: they are processed with its tokenizer, truecaser, BPE "
                   "codes and dictionaries (nothing is re-learned) and binarized as the next free test, test1, test2, ....")
    p.add_argument("--testpref", default=None, help="Comma-separated prefixes of the raw test sets.")
    p.add_argument("--destdir", required=True, help="Output folder for the tokenized, BPE'd and binarized data (a new or "
                   "empty folder, unless --overwrite).")
    p.add_argument("--overwrite", action="store_true",
                   help="Replace a --destdir that is not empty (e.g. prepared before with other settings); the old "
                   "folder stays as it is until the new one is complete. Only a folder fusion-prepare-text made and "
                   "that holds nothing else, no input of this command and no running training is replaced.")
    p.add_argument("--bpe-merges", type=int, default=4000, help="Number of BPE merge operations (default: 4000).")
    p.add_argument("--bpe-tool", choices=["subword-nmt", "fastbpe"], default="subword-nmt",
                   help="The tool that applies the codes (they are always learned with subword-nmt); prepare.json "
                   "records it, and new text gets the same one (--bpe prepared, the hub). fastbpe needs the fastbpe "
                   "extra: pip install 'fairseq_fusion[fastbpe]', or make install FASTBPE=1.")
    p.add_argument("--max-lines", type=int, default=None, help="Use only the first N lines of each split.")
    p.add_argument("--max-len", type=int, default=250, help="Drop training pairs with a side longer than this many tokens.")
    p.add_argument("--max-ratio", type=float, default=9.0, help="Drop training pairs with a larger length ratio.")
    p.add_argument("--truecase", action="store_true",
                   help="Train a Moses truecaser per language on the tokenized training data and truecase every split.")
    p.add_argument("--bpe-vocab-threshold", type=int, default=None, metavar="N",
                   help="subword-nmt --vocabulary-threshold: produce only subwords seen >= N times in that "
                        "language's BPE'd training data (default: no filter).")
    p.add_argument("--normalize-punctuation", action="store_true",
                   help="Moses punctuation normalization and non-printing-character removal before tokenizing "
                   "(fairseq's WMT prepare scripts; the recipes turn it on for WMT data).")
    p.add_argument("--zh-segmenter", choices=["jieba", "none"], default="jieba",
                   help="Word segmentation of Chinese (zh) before tokenizing: jieba (default) or none for text that is "
                   "already segmented (unsegmented text is refused).")
    p.add_argument("--tokenizer", choices=["moses", "none"], default="moses",
                   help="The tokenizer: moses (default, sacremoses) or none, for text that is already tokenized and stays "
                   "so, e.g. the GEC corpora, whose M2 edit offsets count their tokens.")
    p.add_argument("--separate-dictionaries", action="store_true",
                   help="One dictionary per language (default: a joined dictionary, which --share-all-embeddings needs).")
    p.add_argument("--separate-bpe", action="store_true",
                   help="Learn BPE codes per language (bpe.codes.SRC, bpe.codes.TGT; default: joint codes, as the papers).")
    g = p.add_argument_group("already preprocessed data (e.g. Google's WMT16 En-De, Lee et al.'s WMT16 En-Ro)")
    g.add_argument("--preprocessed", action="store_true",
                   help="The --trainpref/--validpref/--testpref files are already tokenized and BPE'd: only binarize them.")
    g.add_argument("--bpe-codes", default=None, metavar="FILE",
                   help="With --preprocessed: the release's BPE codes (subword-nmt format), kept so that new text "
                   "(analyses, --add-test) is processed the same way (Moses tokens, these codes).")
    g.add_argument("--raw-testpref", default=None, metavar="PREFIX[,PREFIX]",
                   help="With --preprocessed: the untokenized text of the test sets (same order and lines), "
                   "the references sacreBLEU scores against.")
    g.add_argument("--nwords", type=int, default=None,
                   help="With --preprocessed: keep this many dictionary entries (fairseq-preprocess --nwordssrc/--nwordstgt).")
    p.add_argument("--workers", type=int, default=max(1, min(4, os.cpu_count() or 1)),
                   help="Processes for tokenizing and binarizing (default: up to 4, the CPU count); a file of "
                        "fewer than 50,000 lines is tokenized in one process, which is as quick there.")
    return p


def cli_main():
    prepare_text.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
