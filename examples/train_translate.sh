#!/usr/bin/env bash
# Train one architecture on your own data and translate its test set: the smallest whole run to copy.
#   bash examples/train_translate.sh DATA_BIN [ARCH]
# DATA_BIN: a binarized fairseq data folder (fusion-prepare-text or fairseq-preprocess output: dict.*.txt, train/valid/
# test *.bin/*.idx). ARCH: any `fusion-archs` name (default transformer_lexical_shortcuts_ff).
# UPDATES=N (default 400), SAVE_DIR (default checkpoints/ARCH), GEN_ARGS: more fairseq-generate flags.
# The model is small (d=128, 3+3 layers: the quick start's size) and trains on the CPU; on a GPU remove --cpu, add --fp16.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "fairseq-fusion: error: usage: bash examples/train_translate.sh DATA_BIN [ARCH] (--help: what they are)" >&2
  exit 2
fi
DATA_BIN=$1
ARCH=${2:-transformer_lexical_shortcuts_ff}
UPDATES=${UPDATES:-400}
SAVE_DIR=${SAVE_DIR:-checkpoints/$ARCH}
USER_DIR=$(fusion-user-dir)  # the installed plugin's folder, from any directory

# train: the paper's technique flags come with the arch; the size and optimization are set here
fairseq-train "$DATA_BIN" --user-dir "$USER_DIR" --arch "$ARCH" \
  --encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 128 --decoder-embed-dim 128 \
  --encoder-ffn-embed-dim 512 --decoder-ffn-embed-dim 512 --encoder-attention-heads 4 --decoder-attention-heads 4 \
  --optimizer adam --adam-betas '(0.9, 0.98)' --lr 2e-3 --lr-scheduler inverse_sqrt --warmup-updates 100 \
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-tokens 6000 --max-update "$UPDATES" \
  --save-dir "$SAVE_DIR" --no-epoch-checkpoints --cpu

# translate the test split with the last checkpoint; the last line is fairseq's BLEU on the subword units
# (for the score papers report, detokenize and use fusion-score-bleu, as the README's quick start does)
# shellcheck disable=SC2086  # GEN_ARGS is a list of flags
fairseq-generate "$DATA_BIN" --user-dir "$USER_DIR" --path "$SAVE_DIR/checkpoint_last.pt" --beam 5 --cpu \
  ${GEN_ARGS:-} > "$SAVE_DIR/generate-test.txt"
echo "translations: $SAVE_DIR/generate-test.txt"
tail -n 1 "$SAVE_DIR/generate-test.txt"
