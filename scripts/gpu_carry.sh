#!/usr/bin/env bash
# Prepares what a GPU machine without network needs for scripts/gpu_run.sh, on a machine with network:
#   .whl/                     the wheels the GPU image lacks, for its Python (PY_VERSION, default 3.12):
#                             ve-fairseq 0.12.3, omegaconf 2.3.0, hydra-core 1.3.2, antlr4 4.9.3 (built here: no
#                             wheel on PyPI), bitarray, sacremoses, subword-nmt
#   work/gpu_check/data-bin   Multi30k En-De prepared as make demo prepares it (DATA, default ../shared/data)
#   compare_converged/data-bin  the same with both test sets, as recipes/compare/multi30k.sh prepares it
# Copy both to the GPU machine beside the repository (or carry them), then run: bash scripts/gpu_run.sh
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
PY=${PY:-.venv/bin/python}
PY_VERSION=${PY_VERSION:-3.12}
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform any)
mkdir -p .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" --implementation cp \
  "${PLATFORMS[@]}" -d .whl ve-fairseq==0.12.3 omegaconf==2.3.0 hydra-core==1.3.2 bitarray sacremoses subword-nmt
"$PY" -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
DATA=${DATA:-$REPO/../shared/data}
if [ ! -e work/gpu_check/data-bin/prepare.json ]; then
  FUSION_DATA=$(cd "$DATA" && pwd) "$PY" -c "from fairseq_fusion_tools.gpu.check import prepare_data; prepare_data('work/gpu_check')"
fi
if [ ! -e compare_converged/data-bin/prepare.json ]; then
  PATH=$REPO/.venv/bin:$PATH DATA=$DATA WORK=compare_converged UPDATES=100 bash recipes/compare/multi30k.sh --dry-run > /dev/null
fi
echo "| ready: .whl ($(ls .whl | wc -l) wheels, $(du -sh .whl | cut -f1)) work/gpu_check/data-bin ($(du -sh work/gpu_check/data-bin | cut -f1)) and compare_converged/data-bin ($(du -sh compare_converged/data-bin | cut -f1))"
