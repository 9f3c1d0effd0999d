# fairseq-fusion: `make demo` (main job on real data) and `make test`.
# Everything installs into .venv inside the repository.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_VERSION ?= 2.13.0
# the data folder: DATA=DIR, else FUSION_DATA, ../shared/data beside the repository or the cache, where make data
# (fusion-fetch-data) fetches the files when none exists; DATA= and ../shared/data are only read
DATA ?=
FETCH = PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(if $(DATA),FUSION_DATA=$(abspath $(DATA)) )python -m fairseq_fusion_tools.cli.fetch_data
ARCH ?= fusion_transformer
STAMP := $(VENV)/.installed
# --no-compile: pip byte-compiles each package alone on one core; compileall does them all at once on every core
PIPQ ?= -q --disable-pip-version-check --no-compile

.PHONY: install data test test-compat demo bench bench-memory clean

install: $(STAMP) $(if $(FASTBPE),install-fastbpe)

# SYSTEM_SITE_PACKAGES=1: the venv sees the system's packages, so your own torch/fairseq are kept
$(STAMP): Makefile pyproject.toml scripts/install_fairseq.sh scripts/pip_check.sh
	test -x $(PY) || $(PYTHON) -m venv $(if $(SYSTEM_SITE_PACKAGES),--system-site-packages) $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install $(PIPQ) "torch==$(TORCH_VERSION)"
	PY=$(PY) PIPQ="$(PIPQ)" bash scripts/install_fairseq.sh
	# the package with its declared dependencies (pyproject.toml; torch and fairseq are installed above), without pip's
	# conflict report (it flags fairseq's torchaudio, left out on purpose); scripts/pip_check.sh prints any other one
	$(PIP) install $(PIPQ) --no-warn-conflicts -e ".[zh,rouge,test]"
	PY=$(PY) bash scripts/pip_check.sh
	# wandb for the W&B test (tests/test_internals_wandb.py), beside the venv, not in it: fairseq imports wandb in
	# every process where it is importable (0.5 s of each fairseq command's start); the test puts it on its own path
	$(PIP) install $(PIPQ) --no-warn-conflicts --upgrade --target $(VENV)/wandb-test "wandb>=0.20"
	$(PY) -m compileall -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" > /dev/null 2>&1 || true
	$(PY) -c "import torch, fairseq, fairseq_fusion; print('torch', torch.__version__, 'fairseq', fairseq.__version__)"
	touch $(STAMP)

# FASTBPE=1 (make install FASTBPE=1): fastBPE too, for fusion-prepare-text --bpe-tool fastbpe; a C++ build whose
# setup.py imports cython without declaring it. Outside the stamp, so an installed .venv can add it later
.PHONY: install-fastbpe
install-fastbpe: $(STAMP)
	$(PY) -c "import fastBPE" 2>/dev/null || \
		{ $(PIP) install $(PIPQ) cython && $(PIP) install $(PIPQ) --no-build-isolation fastBPE==0.1.0; }

# pytest-xdist workers: the machine's cores, at most 4 (each worker loads fairseq and trains small models; a third
# worker on 2 cores measured no faster: 16 min 3 s against 15 min 49 s). worksteal: an idle worker takes tests
# queued for a busy one, so a few long tests do not make the tail of the run
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, len(os.sched_getaffinity(0))))")

# the data the demo and the tests read: its folder on stdout, fetched into the cache (checksums checked) where none exists
data: install
	$(FETCH)

test: install
	data=$$($(FETCH)) && FUSION_DATA=$$data $(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist worksteal tests

# the headline archs' contract tests and the CLI round trip on an older stack (Python 3.10, torch 2.1, fairseq 0.12.2's
# omegaconf/hydra pins) in .venv-compat, built on first use (docs/installation.md: Tested stacks); .venv is not touched
test-compat:
	DATA=$(if $(DATA),$(abspath $(DATA)),$(abspath ../shared/data)) bash scripts/test_compat.sh

demo: install
	data=$$($(FETCH)) && DATA=$$data FUSION_DATA=$$data ARCH=$(ARCH) PATH=$(CURDIR)/$(VENV)/bin:$$PATH bash examples/demo.sh

bench: install
	data=$$($(FETCH)) && DATA=$$data FUSION_DATA=$$data PATH=$(CURDIR)/$(VENV)/bin:$$PATH bash recipes/benchmark/run.sh

# peak memory of one train step at base size, --max-tokens 4096, every fusion_transformer arch and transformer
bench-memory: install
	data=$$($(FETCH)) && DATA=$$data FUSION_DATA=$$data PATH=$(CURDIR)/$(VENV)/bin:$$PATH ARCHS=all SIZE=base \
		OUT=recipes/benchmark/memory_base.json bash recipes/benchmark/run.sh --memory-only --max-tokens 4096

# the GPU acceptance run (docs/gpu.md): every arch in fp32/fp16/bf16, DDP with 2+ GPUs, the base-size benchmark, about
# 10 minutes on one GPU; report in work/gpu_check/report.{json,md}. Without CUDA: one line, exit 0
.PHONY: gpu-check
gpu-check: install
	data=$$($(FETCH)) && FUSION_DATA=$$data PATH=$(CURDIR)/$(VENV)/bin:$$PATH fusion-gpu-check

# the GPU speed run (docs/gpu.md: Speed on the GPU): profile, overhead and the base-size benchmark, about 10 minutes on one
# GPU; report in work/gpu_speed/report.{json,md}. Without CUDA: one line, exit 0
.PHONY: gpu-speed
gpu-speed: install
	data=$$($(FETCH)) && FUSION_DATA=$$data PATH=$(CURDIR)/$(VENV)/bin:$$PATH fusion-gpu-speed

clean:
	rm -rf $(VENV) .venv-compat demo_work *.egg-info
