#!/usr/bin/env bash
# Installs fairseq into the venv, unless one that imports is there already (>= 0.12: kept).
# - a fairseq that is installed but fails to import: the reason is printed and nothing is replaced;
# - else ve-fairseq 0.12.3 where it has a wheel for this Python and platform (cp311/cp312, Linux x86-64), with
#   --no-deps (it declares torchaudio, which would pull another torch) plus its runtime dependencies;
# - else fairseq-fixed 0.12.3.1 (fairseq's main branch) built from its sdist against the installed torch
#   (--no-build-isolation, as scripts/test_compat.sh builds it; compiling its extensions takes about 10 minutes).
set -euo pipefail
PY=${PY:-python}
PIPQ=${PIPQ:-}
CHECK='
import importlib.util, re, sys
if importlib.util.find_spec("fairseq") is None:
    sys.exit(3)
import fairseq
print(fairseq.__version__, fairseq.__file__)
sys.exit(0 if tuple(int(x) for x in re.findall(r"\d+", fairseq.__version__)[:2]) >= (0, 12) else 4)
'
status=0
found=$("$PY" -c "$CHECK" 2>&1) || status=$?
case $status in
  0) echo "fairseq already importable: $found"; exit 0 ;;
  3) ;;  # none installed
  4) echo "install_fairseq: fairseq $found is older than 0.12, which the plugin needs; upgrade it yourself, or use another VENV" >&2; exit 1 ;;
  *) echo "install_fairseq: a fairseq is installed but does not import; it is kept as it is. The error: $(echo "$found" | tail -n 1)" >&2
     echo "install_fairseq: fix that install, or remove it (pip uninstall fairseq) and run make install again" >&2; exit 1 ;;
esac
DEPS=(hydra-core omegaconf bitarray "sacrebleu>=2.0,<3" regex cython numpy tqdm cffi packaging scikit-learn)
"$PY" -m pip install $PIPQ "${DEPS[@]}"
pip_err=$(mktemp)
if "$PY" -m pip install $PIPQ --no-deps --only-binary=:all: "ve-fairseq==0.12.3" 2>"$pip_err"; then
  rm -f "$pip_err"; exit 0
fi
# pip's own ERROR lines for a wheel that does not exist here would read as a failure: one line of ours instead
echo "install_fairseq: no ve-fairseq 0.12.3 wheel for $("$PY" -c 'import platform, sys; print(f"Python {sys.version.split()[0]} on {sys.platform} {platform.machine()}")') (pip: $(grep -v '^WARNING' "$pip_err" | tail -n 1)); building fairseq-fixed 0.12.3.1 from its sdist (about 10 minutes)"
rm -f "$pip_err"
"$PY" -m pip install $PIPQ setuptools wheel
"$PY" -m pip install $PIPQ --no-deps --no-build-isolation "fairseq-fixed==0.12.3.1"
