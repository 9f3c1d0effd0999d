#!/usr/bin/env bash
# The GPU run in one command, on a machine without network: installs the wheels scripts/gpu_carry.sh left in .whl
# (into /tmp/fusion-site, beside the machine's own torch), then
#   bash scripts/gpu_run.sh [fusion-gpu-speed flags]   fusion-gpu-speed on work/gpu_check/data-bin (default: every
#                                                      stage, --budget-minutes 9.5); report in ${OUT:-work/gpu_speed}/speed.*
#   bash scripts/gpu_run.sh converged [fusion-compare flags]
#                                                      the README's converged table: recipes/compare/multi30k.sh with
#                                                      CURVE (8000) JOBS (12) --fp16 on compare_converged/data-bin,
#                                                      into README.md; resumable (run it again); results copied to OUT.
#                                                      LIMIT=SECONDS stops it (SIGTERM) after that long. Then (and at
#                                                      the end) OUT/converged_state.tgz.part-* hold what to commit for
#                                                      the next machine (README: Results; resumable across machines)
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
  # JOBS small models share the GPU: one CPU thread each (16 cores), and CUDA's MPS daemon where it starts, so their
  # kernels run side by side instead of in time slices (MPS=0: without; checked with one CUDA op, else left off)
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  if [ "${MPS:-1}" = 1 ] && command -v nvidia-cuda-mps-control > /dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/fusion-mps CUDA_MPS_LOG_DIRECTORY=/tmp/fusion-mps
    mkdir -p /tmp/fusion-mps
    if nvidia-cuda-mps-control -d && timeout 120 python3 -c "import torch; torch.ones(1, device='cuda').sum().item()" 2> /dev/null; then
      echo "| MPS daemon started"
    else
      echo quit | nvidia-cuda-mps-control || true
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
      echo "| MPS did not start: the runs share the GPU in time slices"
    fi
  fi
  status=0
  ${LIMIT:+timeout -s TERM "$LIMIT"} env WORK=compare_converged CURVE=${CURVE:-8000} JOBS=${JOBS:-12} EXTRA="--fp16" README=1 MARKER="CONVERGED RESULTS TABLE" \
    bash recipes/compare/multi30k.sh "$@" 2>&1 | tee "$OUT_DIR/converged.log" || status=$?
  [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && { echo quit | nvidia-cuda-mps-control || true; }
  # the record to commit, for the next machine: finished runs without checkpoints (unfinished ones start again
  # there), and the baseline's last checkpoint without optimizer state while a second stage from it is unfinished
  STATE=/tmp/fusion-state
  rm -rf "$STATE" && mkdir -p "$STATE"
  tar -cf - --exclude=compare_converged/data-bin --exclude='*.pt' compare_converged README.md | tar -xf - -C "$STATE"
  for d in "$STATE"/compare_converged/runs/*/seed*/; do [ ! -d "$d" ] || [ -e "$d/train.json" ] || rm -r "$d"; done
  for d in compare_converged/runs/*/seed*/; do
    [ -e "$d/command.json" ] || continue
    stage_one=$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); print(next((a[i+1] for i,x in enumerate(a) if x in ("--finetune-from-model","--init-from-vanilla")), ""))' "$d/command.json")
    if [ -n "$stage_one" ] && [ ! -e "$d/train.json" ] && [ -e "${stage_one%/*}/train.json" ] && [ ! -e "$STATE/$stage_one" ]; then
      python3 -c 'import sys,torch; s=torch.load(sys.argv[1],map_location="cpu",weights_only=False); s.pop("last_optimizer_state",None); torch.save(s,sys.argv[2])' "$stage_one" "$STATE/$stage_one"
    fi
  done
  tar -czf - -C "$STATE" compare_converged README.md | split -b 15M - "$OUT_DIR/converged_state.tgz.part-"
  exit $status
fi
python3 -m fairseq_fusion_tools.cli.gpu_speed --out "$OUT_DIR/speed" "$@" 2>&1 | tee "$OUT_DIR/speed.log"
