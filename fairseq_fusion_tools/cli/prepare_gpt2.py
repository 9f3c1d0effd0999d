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
import json
import os
import shutil

from ..progress import progress
from .prepare_text import binarize, build_in_place, read_lines, write_lines
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail

GPT2_FILES = ("encoder.json", "vocab.bpe", "dict.txt")


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-prepare-gpt2", description=description_of(__doc__))
    p.add_argument("--source-lang", "-s", required=True, help="File suffix of the sources (e.g. source).")
    p.add_argument("--target-lang", "-t", required=True, help="File suffix of the targets (e.g. target).")
    p.add_argument("--trainpref", required=True, help="Training files prefix: PREFIX.SRC and PREFIX.TGT.")
    p.add_argument("--validpref", required=True, help="Validation files prefix: PREFIX.SRC and PREFIX.TGT.")
    p.add_argument("--testpref", default=None, help="Comma-separated prefixes of test sets.")
    p.add_argument("--gpt2-dir", required=True, help=f"Folder with fairseq's GPT-2 BPE files: {', '.join(GPT2_FILES)}.")
    p.add_argument("--truncate-source", type=int, default=None, metavar="N", help="Keep the first N words of each source.")
    p.add_argument("--max-lines", type=int, default=None, help="Use only the first N lines of each split.")
    p.add_argument("--destdir", required=True, help="Folder of the BPE text and the binarized data (new or empty).")
    p.add_argument("--overwrite", action="store_true",
                   help="Replace a --destdir that holds files (only once the new folder is complete).")
    p.add_argument("--workers", type=int, default=1, help="Processes of fairseq-preprocess (default: %(default)s).")
    return p


def encode_lines(lines, encoder, desc):
    return [" ".join(map(str, encoder.encode(line.strip()))) for line in progress(lines, desc=desc)]


def main(args):
    missing = [f for f in GPT2_FILES if not os.path.isfile(os.path.join(args.gpt2_dir, f))]
    if missing:
        fail(f"fusion-prepare-gpt2: --gpt2-dir {args.gpt2_dir} lacks {', '.join(missing)} "
                 f"(fairseq's GPT-2 BPE files: https://dl.fbaipublicfiles.com/fairseq/gpt2_bpe/)")
    if args.truncate_source is not None and args.truncate_source < 1:
        fail(f"fusion-prepare-gpt2: --truncate-source must be >= 1, got {args.truncate_source}")
    build_in_place(args, prepare)


def prepare(args):
    """Encode and binarize into ``args.destdir`` (a new folder)."""
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

    src, tgt = args.source_lang, args.target_lang
    os.makedirs(os.path.join(args.destdir, "tok"), exist_ok=True)
    gpt2 = os.path.join(args.destdir, "gpt2")
    os.makedirs(gpt2, exist_ok=True)
    for f in GPT2_FILES:
        shutil.copyfile(os.path.join(args.gpt2_dir, f), os.path.join(gpt2, f))
    encoder = get_encoder(os.path.join(gpt2, "encoder.json"), os.path.join(gpt2, "vocab.bpe"))
    splits = [("train", args.trainpref), ("valid", args.validpref)]
    if args.testpref:
        splits += [("test" if i == 0 else f"test{i}", p) for i, p in enumerate(args.testpref.split(","))]
    for split, prefix in splits:
        raw = {lang: read_lines(prefix, lang, args.max_lines) for lang in (src, tgt)}
        if len(raw[src]) != len(raw[tgt]):
            fail(f"fusion-prepare-gpt2: {prefix}.{src} has {len(raw[src])} lines but {prefix}.{tgt} has {len(raw[tgt])}")
        if args.truncate_source:
            raw[src] = [" ".join(line.split()[: args.truncate_source]) for line in raw[src]]
        for lang in (src, tgt):
            write_lines(os.path.join(args.destdir, "tok", f"{split}.raw.{lang}"), raw[lang])
            write_lines(os.path.join(args.destdir, "tok", f"{split}.bpe.{lang}"), encode_lines(raw[lang], encoder, f"gpt2 {split}.{lang}"))
    with open(os.path.join(args.destdir, "prepare.json"), "w") as f:
        json.dump({"source_lang": src, "target_lang": tgt, "bpe": "gpt2", "truncate_source": args.truncate_source,
                   "joined_dictionary": True}, f, indent=2)
    args.separate_dictionaries = False
    tok = os.path.join(args.destdir, "tok")
    binarize(args, os.path.join(tok, "train.bpe"), os.path.join(tok, "valid.bpe"),
             [os.path.join(tok, f"{s}.bpe") for s, _ in splits if s.startswith("test")],
             ["--srcdict", os.path.join(gpt2, "dict.txt")])


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()
