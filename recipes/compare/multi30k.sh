#!/usr/bin/env bash
# One results table of the five papers' methods on Multi30k En-De (test_2016_flickr = test, test_2017_flickr = test1):
# fairseq's transformer, fusion_transformer, one headline arch per paper, Liu et al.'s coarse layer attention and one
# combination of three papers' techniques, each with the same settings, seeds and updates a stage, under its paper's
# protocol (Dou et al.: a second stage from the transformer, beside the transformer continued as long; the papers'
# checkpoint average or best validation loss) (fusion-compare; resumable: run it again after an interruption).
# The README's table is this script's output on the CPU machine (SIZE=small, make demo's model). On a GPU, the same
# command at a bigger size:
#   SIZE=base UPDATES=100000 EXTRA="--fp16" bash recipes/compare/multi30k.sh
# The README's converged table: the budget where the transformer's validation BLEU stops improving (CURVE=CAP
# updates at most), JOBS runs at once on one GPU, into the CONVERGED RESULTS TABLE markers:
#   WORK=compare_converged CURVE=8000 JOBS=12 EXTRA="--fp16" README=1 MARKER="CONVERGED RESULTS TABLE" bash recipes/compare/multi30k.sh
#   DATA=../shared/data WORK=compare_work SEEDS="1 2 3" UPDATES=400 SIZE=small README=1 bash recipes/compare/multi30k.sh [fusion-compare flags]
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  echo "recipes/compare/multi30k.sh: the README's results table (fusion-compare on Multi30k En-De)"
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  echo "Any further argument is a fusion-compare flag (fusion-compare --help), e.g. --dry-run."
  exit 0
fi
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
DATA=${DATA:-$(python -m fairseq_fusion_tools.cli.fetch_data)}  # make data: FUSION_DATA, ../shared/data or the cache
WORK=${WORK:-compare_work}
SEEDS=${SEEDS:-1 2 3}
UPDATES=${UPDATES:-400}
SIZE=${SIZE:-small}
BIN=$WORK/data-bin
if [ ! -e "$BIN/.done" ] && [ ! -e "$BIN/prepare.json" ]; then  # complete once there (renamed into place); make demo's preparation (4k joint BPE), with both test sets
  fusion-prepare-text -s en -t de --trainpref "$DATA/multi30k/train" --validpref "$DATA/multi30k/val" \
    --testpref "$DATA/multi30k/test_2016_flickr,$DATA/multi30k/test_2017_flickr" --destdir "$BIN" --bpe-merges 4000
  touch "$BIN/.done"
fi
# shellcheck disable=SC2086
if [ -n "${CURVE:-}" ]; then BUDGET=(--budget-from-curve "$CURVE"); else BUDGET=(--max-update "$UPDATES"); fi
exec fusion-compare "$BIN" --work "$WORK" --size "$SIZE" "${BUDGET[@]}" --seeds $SEEDS ${JOBS:+--jobs "$JOBS"} \
  --test-subsets test test1 --beam 5 \
  --system transformer \
  --system fusion_transformer \
  --system transformer_lexical_shortcuts_ff \
  --system transformer_hierarchical_aggregation \
  --system transformer_phrase \
  --system transformer_simplified_decoder \
  --system transformer_surface_fusion \
  --system transformer_coarse_layer_attention \
  --system "shortcuts+simplified+surface=transformer_simplified_decoder --lexical-shortcuts --lexical-shortcuts-feature-fusion --surface-fusion hard --surface-fusion-lambda 0.9 --surface-fusion-tau 1 --surface-fusion-detach --surface-fusion-embed-dropout" \
  ${README:+--readme README.md} ${MARKER:+--readme-marker "$MARKER"} ${EXTRA:+$EXTRA} "$@"
