# fairseq-fusion: `make demo` (main job on real data) and `make test`.
# Everything installs into .venv inside the repository.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_VERSION ?= 2.13.0
DATA ?= ../shared/data
ARCH ?= fusion_transformer
STAMP := $(VENV)/.installed

.PHONY: install test demo bench clean

install: $(STAMP)

$(STAMP): setup.py scripts/install_fairseq.sh $(wildcard fairseq_fusion/cli/*.py)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q "torch==$(TORCH_VERSION)"
	PY=$(PY) bash scripts/install_fairseq.sh
	$(PIP) install -q "torch==$(TORCH_VERSION)" sacrebleu sacremoses subword-nmt cython matplotlib pytest
	$(PY) -c "import fastBPE" 2>/dev/null || $(PIP) install -q --no-build-isolation fastBPE==0.1.0
	$(PIP) install -q --no-deps -e .
	$(PY) -c "import torch, fairseq, fairseq_fusion; print('torch', torch.__version__, 'fairseq', fairseq.__version__)"
	touch $(STAMP)

test: install
	$(VENV)/bin/pytest -q tests

demo: install
	DATA=$(DATA) ARCH=$(ARCH) PATH=$(CURDIR)/$(VENV)/bin:$$PATH bash examples/demo.sh

bench: install
	DATA=$(DATA) PATH=$(CURDIR)/$(VENV)/bin:$$PATH bash recipes/benchmark/run.sh

clean:
	rm -rf $(VENV) demo_work *.egg-info
