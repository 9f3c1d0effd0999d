"""fusion-prepare-gpt2's run: text encoded with GPT-2's BPE (fairseq's encoder files), sources cut to N words,
binarized with GPT-2's dictionary.
"""
import json
import os
import shutil

from ..progress import progress
from .binarize import binarize
from .destination import build_in_place
from .text_steps import read_lines, write_lines
from fairseq_fusion_tools.user_files import fail


GPT2_FILES = ("encoder.json", "vocab.bpe", "dict.txt")


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
