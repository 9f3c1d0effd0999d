#!/usr/bin/env bash
# Benchmark archs against fairseq's stock transformer on binarized Multi30k.
#   ARCHS=a,b,c|all SIZE=small|base|big BIN=demo_work/data-bin OUT=recipes/benchmark/last_run.json bash recipes/benchmark/run.sh [extra fusion-benchmark flags]
# On CUDA, add --fp16. Prepares the data with the demo's settings when BIN is missing.
# Peak train-step memory only (make bench-memory): ARCHS=all SIZE=base bash recipes/benchmark/run.sh --memory-only --max-tokens 4096
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${DATA:-$REPO/../shared/data}
BIN=${BIN:-$REPO/demo_work/data-bin}
SIZE=${SIZE:-small}
OUT=${OUT:-$REPO/recipes/benchmark/last_run.json}
ARCHS=${ARCHS:-$(python -c "import fairseq_fusion; from fairseq.models import ARCH_MODEL_REGISTRY as R; from fairseq_fusion.models import FusionTransformerModel as F; print(','.join(sorted(a for a in R if R[a] is F and not a.endswith('_big'))))")}
if [ ! -e "$BIN/.done" ]; then
  fusion-prepare-text -s en -t de --trainpref "$DATA/multi30k/train" --validpref "$DATA/multi30k/val" \
    --testpref "$DATA/multi30k/test_2016_flickr" --destdir "$BIN" --bpe-merges 4000
  touch "$BIN/.done"
fi
fusion-benchmark --data "$BIN" --archs "$ARCHS" --size "$SIZE" --out "$OUT" "$@"
