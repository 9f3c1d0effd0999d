#!/usr/bin/env bash
# Benchmark archs against fairseq's stock transformer on binarized Multi30k.
#   ARCHS=a,b,c|all SIZE=small|base|big (each arch 3 times, after its own transformer run) BIN=demo_work/data-bin OUT=recipes/benchmark/last_run.json bash recipes/benchmark/run.sh [extra fusion-benchmark flags]
# On CUDA, add --fp16. Prepares the data with the demo's settings when BIN is missing.
# Peak train-step memory only (make bench-memory): ARCHS=all SIZE=base bash recipes/benchmark/run.sh --memory-only --max-tokens 4096
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  echo "recipes/benchmark/run.sh: fusion-benchmark of archs against fairseq's transformer on binarized Multi30k"
  sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
  echo "DATA=DIR (default: the data folder of make data, fetched where none exists): BIN is prepared from DIR/multi30k."
  echo "Any further argument is a fusion-benchmark flag (fusion-benchmark --help)."
  exit 0
fi
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${DATA:-$(cd "$REPO" && python -m fairseq_fusion_tools.cli.fetch_data)}
BIN=${BIN:-$REPO/demo_work/data-bin}
SIZE=${SIZE:-small}
OUT=${OUT:-$REPO/recipes/benchmark/last_run.json}
# default: one model of each technique the papers name (ARCHS=all: every registered arch, much longer)
ARCHS=${ARCHS:-transformer_lexical_shortcuts_ff,transformer_hierarchical_aggregation,transformer_multilayer_attention,transformer_phrase,transformer_simplified_decoder,transformer_fine_grained_layer_attention,transformer_surface_fusion}
if [ ! -e "$BIN/.done" ] && [ ! -e "$BIN/prepare.json" ]; then  # fusion-prepare-text renames a complete folder into place
  fusion-prepare-text -s en -t de --trainpref "$DATA/multi30k/train" --validpref "$DATA/multi30k/val" \
    --testpref "$DATA/multi30k/test_2016_flickr" --destdir "$BIN" --bpe-merges 4000
  touch "$BIN/.done"
fi
# work per run (flags given after these win): small is `make bench`, 9 minutes on the project's 2-core VM; base is
# the documented setting, 20 minutes there (2026-11-24; docs/benchmarks.md's tables)
case "$SIZE" in
  small) WORK=(--warmup-updates 3 --updates 12 --decode-sentences 128) ;;
  base) WORK=(--max-tokens 1024 --warmup-updates 2 --updates 6 --decode-sentences 64) ;;
  *) WORK=() ;;
esac
fusion-benchmark --data "$BIN" --archs "$ARCHS" --size "$SIZE" --out "$OUT" "${WORK[@]}" "$@"
