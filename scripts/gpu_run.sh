#!/usr/bin/env bash
# The GPU run in one command, on a machine without network: installs the wheels scripts/gpu_carry.sh left in .whl
# (into /tmp/fusion-site, beside the machine's own torch), then fusion-gpu-speed with the prepared
# work/gpu_check/data-bin; arguments are fusion-gpu-speed's (default: every stage, --budget-minutes 9.5).
#   bash scripts/gpu_run.sh [--stages profile,overhead,benchmark] [--budget-minutes M] [--out PREFIX]
# The report: ${OUT:-work/gpu_speed}/speed.json, .md and .log unless --out is given.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
if [ ! -d .whl ] || [ ! -e work/gpu_check/data-bin/prepare.json ]; then
  echo "scripts/gpu_run.sh: .whl or work/gpu_check/data-bin is missing: run bash scripts/gpu_carry.sh on a machine with network first" >&2
  exit 2
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/fusion-site .whl/*.whl
export PYTHONPATH=/tmp/fusion-site:$REPO${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT_DIR=${OUT:-work/gpu_speed}
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT_DIR/nvidia-smi.txt" 2>&1 || true
set -o pipefail
python3 -m fairseq_fusion_tools.cli.gpu_speed --out "$OUT_DIR/speed" "$@" 2>&1 | tee "$OUT_DIR/speed.log"
