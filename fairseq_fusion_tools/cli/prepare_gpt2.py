"""fusion-prepare-gpt2: raw text -> GPT-2 byte-level BPE (fairseq's own ``gpt2`` encoder) -> fairseq-preprocess.

For summarization as Liu et al. 2021 (A.1, Table 4: CNN/DM vocabulary 50,264 = fairseq's GPT-2
``dict.txt`` plus its 4 special symbols): each line is encoded with fairseq's
``gpt2_bpe_utils.get_encoder(encoder.json, vocab.bpe)`` into token ids, as fairseq's
``examples/roberta/multiprocessing_bpe_encoder.py`` does, and binarized with ``--srcdict
dict.txt --joined-dictionary``. ``--truncate-source N`` keeps the first N words of each source
(See et al. 2017 and Ott et al. 2019: 400). The encoder files are copied to ``DESTDIR/gpt2/``, so
``fairseq-generate --bpe gpt2 --gpt2-encoder-json DESTDIR/gpt2/encoder.json --gpt2-vocab-bpe
DESTDIR/gpt2/vocab.bpe`` decodes the output (``D-`` lines); ``tok/SPLIT.raw.TGT`` keeps the raw
references. As fusion-prepare-text, the folder is built beside DESTDIR and renamed into place when complete,
and a DESTDIR that is not empty is refused unless ``--overwrite``.
"""
import argparse

from ..prepare import prepare_gpt2
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-prepare-gpt2", description=description_of(__doc__))
    p.add_argument("--source-lang", "-s", required=True, help="File suffix of the sources (e.g. source).")
    p.add_argument("--target-lang", "-t", required=True, help="File suffix of the targets (e.g. target).")
    p.add_argument("--trainpref", required=True, help="Training files prefix: PREFIX.SRC and PREFIX.TGT.")
    p.add_argument("--validpref", required=True, help="Validation files prefix: PREFIX.SRC and PREFIX.TGT.")
    p.add_argument("--testpref", default=None, help="Comma-separated prefixes of test sets.")
    p.add_argument("--gpt2-dir", required=True, help=f"Folder with fairseq's GPT-2 BPE files: {', '.join(prepare_gpt2.GPT2_FILES)}.")
    p.add_argument("--truncate-source", type=int, default=None, metavar="N", help="Keep the first N words of each source.")
    p.add_argument("--max-lines", type=int, default=None, help="Use only the first N lines of each split.")
    p.add_argument("--destdir", required=True, help="Folder of the BPE text and the binarized data (new or empty).")
    p.add_argument("--overwrite", action="store_true",
                   help="Replace a --destdir that holds files (only once the new folder is complete): only a folder "
                   "fusion-prepare-gpt2 made and that holds nothing else, no input of this command and no running "
                   "training.")
    p.add_argument("--workers", type=int, default=1, help="Processes of fairseq-preprocess (default: %(default)s).")
    return p


def cli_main():
    prepare_gpt2.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
