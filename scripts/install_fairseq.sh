#!/usr/bin/env bash
# Installs fairseq into the venv unless a fairseq >= 0.12.3 is already importable.
# ve-fairseq 0.12.3 is a cp311 wheel of fairseq's main branch; it declares torchaudio,
# which would pull another torch, so it goes in with --no-deps plus its runtime deps.
set -euo pipefail
PY=${PY:-python}
if "$PY" - <<'PYEOF' 2>/dev/null
import fairseq
from packaging.version import Version
raise SystemExit(0 if Version(fairseq.__version__.split("+")[0]) >= Version("0.12.3") else 1)
PYEOF
then
  echo "fairseq already importable: $("$PY" -c 'import fairseq; print(fairseq.__version__, fairseq.__file__)')"
  exit 0
fi
"$PY" -m pip install ${PIPQ:-} --no-deps "ve-fairseq==0.12.3"
"$PY" -m pip install ${PIPQ:-} hydra-core omegaconf bitarray sacrebleu regex cython numpy tqdm cffi packaging scikit-learn
