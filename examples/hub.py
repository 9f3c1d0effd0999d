"""Translate from Python with a trained checkpoint (fairseq's hub interface): raw text in, raw text out.

    python examples/hub.py CHECKPOINT_DIR DATA_BIN "A dog runs through the grass."

CHECKPOINT_DIR holds checkpoint_last.pt (the README's quick start: checkpoints; examples/train_translate.sh: its
SAVE_DIR); DATA_BIN is the data folder it was trained on. As fairseq reads it, a DATA_BIN that starts with "." is
resolved against CHECKPOINT_DIR, any other relative path against the current directory (docs/usage.md). A folder made by fusion-prepare-text has prepare.json, which `bpe="prepared"` replays (Moses
tokens, truecasing, BPE) on the input and undoes on the output; another folder's text must come tokenized as its
training data was.
"""
import os
import sys

import fairseq_fusion  # noqa: F401  registers the plugin's models with fairseq (as --user-dir does)
from fairseq_fusion.errors import FusionError
from fairseq_fusion.models import FusionTransformerModel


def main(argv):
    if len(argv) != 3:
        sys.exit("fairseq-fusion: error: usage: python examples/hub.py CHECKPOINT_DIR DATA_BIN SENTENCE")
    checkpoint_dir, data_bin, sentence = argv
    prepared = {"bpe": "prepared"} if os.path.exists(os.path.join(data_bin, "prepare.json")) else {}
    try:
        mt = FusionTransformerModel.from_pretrained(checkpoint_dir, checkpoint_file="checkpoint_last.pt",
                                                    data_name_or_path=data_bin, **prepared)
        print(f"source: {sentence}")
        print(f"translation: {mt.translate(sentence, beam=5)}")
    except FusionError as e:  # a missing checkpoint, another vocabulary, ...: one line, no traceback
        sys.exit(str(e))


if __name__ == "__main__":
    main(sys.argv[1:])
