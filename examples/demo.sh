#!/usr/bin/env bash
# make demo: Multi30k En-De, end to end on CPU, with any registered architecture.
#   DATA=DIR (default: what fusion-fetch-data resolves, make data)  ARCH=fusion_transformer  UPDATES=600  WORK=demo_work
# UPDATES fixes the training (the same BLEU on any machine, up to floating-point noise); TRAIN_MINUTES=N trains
# for N minutes instead (the result then follows the machine's speed).
# Moses tokenization (sacremoses) -> joint BPE (subword-nmt, 4k merges) -> fairseq-preprocess
# -> fairseq-train --user-dir fairseq_fusion (d=128, 3+3 layers) -> fairseq-generate (beam 5)
# on test_2016_flickr -> detokenize -> sacreBLEU with its signature.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
# the data folder (make data): FUSION_DATA, ../shared/data or the cache, where the files are fetched if none exists
DATA=${DATA:-$(fusion-fetch-data)}
ARCH=${ARCH:-fusion_transformer}
UPDATES=${UPDATES:-600}
TRAIN_MINUTES=${TRAIN_MINUTES:-}
WORK=${WORK:-$REPO/demo_work}
THREADS=${THREADS:-$(nproc)}
FILES="train val test_2016_flickr"
step() { echo; echo "=== [$(date +%H:%M:%S)] $*"; }
start=$(date +%s)

M30K=$DATA/multi30k
for f in $FILES; do for l in en de; do
  [ -e "$M30K/$f.$l.gz" ] || [ -e "$M30K/$f.$l" ] || { echo "demo: missing $M30K/$f.$l(.gz): expected the raw Multi30k task-1 files" >&2; exit 1; }
done; done

BIN=$WORK/data-bin
if [ ! -e "$BIN/.done" ]; then
  step "prepare: Moses tokenization, 4k joint BPE, binarization ($M30K)"
  rm -rf "$BIN"
  fusion-prepare-text -s en -t de --trainpref "$M30K/train" --validpref "$M30K/val" \
    --testpref "$M30K/test_2016_flickr" --destdir "$BIN" --bpe-merges 4000 --workers "$THREADS"
  touch "$BIN/.done"
else
  step "prepare: reusing $BIN"
fi

CRITERION=$(python -c "import fairseq_fusion; from fairseq_fusion import fusion_options; print(fusion_options.default_criterion('$ARCH'))")
CKPT=$WORK/checkpoints/$ARCH
rm -rf "$CKPT"
if [ -n "$TRAIN_MINUTES" ]; then
  BUDGET=(--stop-time-hours "$(python -c "print($TRAIN_MINUTES / 60)")" --max-epoch 100); FOR="$TRAIN_MINUTES minutes"
else
  BUDGET=(--max-update "$UPDATES"); FOR="$UPDATES updates"
fi
step "train $ARCH for $FOR on CPU (criterion $CRITERION)"
fairseq-train "$BIN" --user-dir "$REPO/fairseq_fusion" --arch "$ARCH" \
  --encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 128 --decoder-embed-dim 128 \
  --encoder-ffn-embed-dim 512 --decoder-ffn-embed-dim 512 --encoder-attention-heads 4 --decoder-attention-heads 4 \
  --share-all-embeddings --dropout 0.1 \
  --optimizer adam --adam-betas '(0.9, 0.98)' --lr 2e-3 --lr-scheduler inverse_sqrt --warmup-updates 100 --clip-norm 0.0 \
  --criterion "$CRITERION" --label-smoothing 0.1 --max-tokens 6000 \
  "${BUDGET[@]}" \
  --save-dir "$CKPT" --no-epoch-checkpoints --cpu --seed 1 \
  --log-format simple --log-interval 25 --num-workers 0
trained=$(date +%s)

step "translate test_2016_flickr with fairseq-generate (beam 5)"
OUT=$WORK/out/$ARCH
mkdir -p "$OUT"
fairseq-generate "$BIN" --user-dir "$REPO/fairseq_fusion" --path "$CKPT/checkpoint_last.pt" \
  --gen-subset test --beam 5 --batch-size 128 --required-batch-size-multiple 1 --max-len-a 1.5 --max-len-b 10 \
  --remove-bpe --cpu > "$OUT/generate.txt"
tail -n 1 "$OUT/generate.txt"
grep '^H-' "$OUT/generate.txt" | sort -t- -k2,2n | cut -f3 | sacremoses -l de detokenize > "$OUT/hyp.de"
REF=$BIN/tok/test.raw.de
[ "$(wc -l < "$OUT/hyp.de")" -eq "$(wc -l < "$REF")" ] || { echo "demo: $(wc -l < "$OUT/hyp.de") hypotheses for $(wc -l < "$REF") references" >&2; exit 1; }

step "sacreBLEU (detokenized) on test_2016_flickr"
sacrebleu "$REF" -i "$OUT/hyp.de" -m bleu -f text | tee "$OUT/sacrebleu.txt"
end=$(date +%s)
echo "demo: $ARCH, trained for $FOR, $(( (trained - start) / 60 )) min incl. preparation, total $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s; outputs in $OUT"
