#!/usr/bin/env bash
# The GPU run in one command, on a machine without network: installs the wheels scripts/gpu_carry.sh left in .whl
# (into /tmp/fusion-site, beside the machine's own torch), then
#   bash scripts/gpu_run.sh [fusion-gpu-speed flags]   fusion-gpu-speed on work/gpu_check/data-bin (default: every
#                                                      stage, --budget-minutes 9.5); report in ${OUT:-work/gpu_speed}/speed.*
#   bash scripts/gpu_run.sh converged [fusion-compare flags]
#                                                      the README's converged table: recipes/compare/multi30k.sh with
#                                                      CURVE (8000) JOBS (12) --fp16 on compare_converged/data-bin,
#                                                      into README.md; resumable (run it again); results copied to OUT
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
MODE=speed
if [ "${1:-}" = "converged" ]; then MODE=converged; shift; fi
DATA_BIN=work/gpu_check/data-bin
[ "$MODE" = converged ] && DATA_BIN=compare_converged/data-bin
if [ ! -d .whl ] || [ ! -e "$DATA_BIN/prepare.json" ]; then
  echo "scripts/gpu_run.sh: .whl or $DATA_BIN is missing: run bash scripts/gpu_carry.sh on a machine with network first" >&2
  exit 2
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/fusion-site .whl/*.whl
export PYTHONPATH=/tmp/fusion-site:$REPO${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT_DIR=${OUT:-work/gpu_speed}
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT_DIR/nvidia-smi.txt" 2>&1 || true
if [ "$MODE" = converged ]; then
  # the recipe calls fusion-* commands: shims that run this checkout's modules (fairseq's own are in /tmp/fusion-site/bin)
  SHIMS=/tmp/fusion-shims
  mkdir -p "$SHIMS"
  for f in fairseq_fusion_tools/cli/[!_]*.py; do
    m=$(basename "$f" .py)
    printf '#!/bin/sh\nexec python3 -m fairseq_fusion_tools.cli.%s "$@"\n' "$m" > "$SHIMS/fusion-${m//_/-}"
    chmod +x "$SHIMS/fusion-${m//_/-}"
  done
  export PATH=$SHIMS:/tmp/fusion-site/bin:$PATH
  status=0
  WORK=compare_converged CURVE=${CURVE:-8000} JOBS=${JOBS:-12} EXTRA="--fp16" README=1 MARKER="CONVERGED RESULTS TABLE" \
    bash recipes/compare/multi30k.sh "$@" 2>&1 | tee "$OUT_DIR/converged.log" || status=$?
  cp compare_converged/results.json compare_converged/results.md compare_converged/results.png \
    compare_converged/budget/budget.json README.md "$OUT_DIR/" 2>/dev/null || true
  exit $status
fi
python3 -m fairseq_fusion_tools.cli.gpu_speed --out "$OUT_DIR/speed" "$@" 2>&1 | tee "$OUT_DIR/speed.log"
