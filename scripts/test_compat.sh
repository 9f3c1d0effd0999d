#!/usr/bin/env bash
# `make test-compat`: the plugin on an older stack than .venv's (docs/installation.md: Tested stacks). A second environment,
# COMPAT_VENV (default .venv-compat, git-ignored; reused while its recipe is unchanged), gets another Python,
# an older torch, fairseq-fixed built from its sdist and fairseq 0.12.2's own pins, omegaconf < 2.1 and
# hydra-core 1.0.x; then the contract suite runs on the headline archs, with the CLI round trip and the
# omegaconf/hydra checks. .venv is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."

COMPAT_VENV=${COMPAT_VENV:-.venv-compat}
COMPAT_PYTHON_VERSION=${COMPAT_PYTHON_VERSION:-3.10}
COMPAT_TORCH=${COMPAT_TORCH:-2.1.2}
COMPAT_FAIRSEQ=${COMPAT_FAIRSEQ:-fairseq-fixed==0.12.3.1}  # fairseq's main branch; 0.12.2's sdist lacks a C++ source
PIPQ=${PIPQ:--q --disable-pip-version-check}
DATA=${DATA:-../shared/data}
HEADLINE_ARCHS=(transformer_lexical_shortcuts_ff transformer_hierarchical_aggregation transformer_phrase
  transformer_simplified_decoder transformer_fine_grained_layer_attention transformer_surface_fusion)

die() { echo "test-compat: error: $*" >&2; exit 1; }

find_python() {
  if [ -n "${COMPAT_PYTHON:-}" ]; then echo "$COMPAT_PYTHON"; return; fi
  if "python$COMPAT_PYTHON_VERSION" -c "" 2>/dev/null; then command -v "python$COMPAT_PYTHON_VERSION"; return; fi
  local root
  root=$(pyenv root 2>/dev/null) || true
  for p in "${root:-$HOME/.pyenv}"/versions/"$COMPAT_PYTHON_VERSION".*/bin/python"$COMPAT_PYTHON_VERSION"; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
  die "no Python $COMPAT_PYTHON_VERSION found (tried python$COMPAT_PYTHON_VERSION and pyenv's versions); set COMPAT_PYTHON=/path/to/python"
}

# Everything pinned for every install: fairseq 0.12.2's setup.py pins hydra-core>=1.0.7,<1.1 and omegaconf<2.1;
# torch < 2.3 wheels are built against numpy 1.x.
RECIPE="python=$COMPAT_PYTHON_VERSION torch==$COMPAT_TORCH $COMPAT_FAIRSEQ omegaconf<2.1 hydra-core>=1.0.7,<1.1 numpy<2"
PY=$COMPAT_VENV/bin/python
STAMP=$COMPAT_VENV/.compat-recipe
start=$SECONDS

if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$RECIPE" ]; then
  PYTHON=$(find_python)
  echo "test-compat: building $COMPAT_VENV ($RECIPE) with $PYTHON"
  rm -rf "$COMPAT_VENV"
  # the venv keeps the pip its Python bundles: pip >= 24.1 refuses omegaconf 2.0's metadata (PyYAML>=5.1.*)
  "$PYTHON" -m venv "$COMPAT_VENV"
  CONSTRAINTS=$COMPAT_VENV/constraints.txt
  printf '%s\n' "torch==$COMPAT_TORCH" "numpy<2" "omegaconf<2.1" "hydra-core>=1.0.7,<1.1" > "$CONSTRAINTS"
  PIP=(nice -n 10 "$PY" -m pip install $PIPQ -c "$CONSTRAINTS")
  # PyPI's Linux torch wheels are CUDA builds (with nvidia-* libraries); they run on the CPU
  "${PIP[@]}" "torch==$COMPAT_TORCH" "numpy<2" setuptools wheel
  # fairseq's runtime dependencies (its own list, less torchaudio: it would pull another torch) with the old pins
  "${PIP[@]}" "omegaconf<2.1" "hydra-core>=1.0.7,<1.1" cffi cython regex "sacrebleu>=1.4.12" tqdm bitarray \
    scikit-learn packaging setuptools wheel
  # built here against this torch (--no-build-isolation: its build would otherwise fetch the newest torch)
  "${PIP[@]}" --no-deps --no-build-isolation "$COMPAT_FAIRSEQ"
  echo "$RECIPE" > "$STAMP"
  echo "test-compat: built in $((SECONDS - start)) s"
fi

# this checkout, with its declared runtime dependencies (the pins above hold); pip's conflict report would name
# fairseq's torchaudio, left out on purpose: scripts/pip_check.sh reports the rest (as make install)
nice -n 10 "$PY" -m pip install $PIPQ --no-warn-conflicts -c "$COMPAT_VENV/constraints.txt" -e ".[test]"
PY=$PY bash scripts/pip_check.sh
"$PY" -c "import sys, torch, fairseq, omegaconf, hydra, fairseq_fusion
print('test-compat: Python %s, torch %s, fairseq %s, omegaconf %s, hydra-core %s' % (sys.version.split()[0],
      torch.__version__, fairseq.__version__, omegaconf.__version__, hydra.__version__))"

ran=$SECONDS
export FUSION_DATA=${FUSION_DATA:-$(cd "$DATA" && pwd)}
PYTEST=("$COMPAT_VENV/bin/pytest" -q -p no:cacheprovider)
# the contract tests of exactly these archs (a -k substring would also pick their _big/_small/... variants)
ARCH_RE=$(IFS='|'; echo "${HEADLINE_ARCHS[*]}")
mapfile -t CONTRACTS < <("${PYTEST[@]}" --collect-only tests/test_contracts.py | grep -E "\[($ARCH_RE)(---[a-z-]+)?\]$")
[ "${#CONTRACTS[@]}" -ge "${#HEADLINE_ARCHS[@]}" ] || die "collected ${#CONTRACTS[@]} contract tests for ${HEADLINE_ARCHS[*]}"
# test_hydra: fairseq-hydra-train with the shipped configs under hydra 1.0; not its byte comparison of the YAML that
# recipes/common/settings.py writes (omegaconf 2.0 orders the keys otherwise)
"${PYTEST[@]}" "${CONTRACTS[@]}" tests/test_foundation.py::test_cli_round_trip_generate_bleu tests/test_compat.py \
  tests/test_hydra.py --deselect tests/test_hydra.py::test_shipped_yaml_is_the_recipe
echo "test-compat: tests ran in $((SECONDS - ran)) s; $((SECONDS - start)) s in all"
