# The two quick-start commands: `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.stamp

.PHONY: demo test lint setup system-deps clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Python dependencies, reinstalled when pyproject.toml changes.
$(STAMP)-base: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# The train extra: TensorFlow first, then Horovod built from source against it (Gloo only, no
# MPI/PyTorch/MXNet); pip keeps the built wheel in its cache, so later runs take seconds.
HOROVOD_BUILD := HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 \
	HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=GLOO
$(STAMP)-train: $(STAMP)-base
	$(BIN)/pip install -q 'tensorflow==2.15.1' 'kubernetes-validate>=1.31'
	$(HOROVOD_BUILD) $(BIN)/pip install -q --no-build-isolation 'horovod==0.28.1'
	$(BIN)/pip check
	touch $@

# The torch extra for the PyTorch path's tests. PyPI's Linux builds bring CUDA's libraries (about
# 2.9 GB of wheels; docs/pytorch.md has the measured cost), installed one at a time without pip's
# cache to keep the peak disk low; where PyTorch's own index is reachable,
# `make TORCH_INDEX=https://download.pytorch.org/whl/cpu` installs the CPU build (about 200 MB) instead.
TORCH_INDEX ?=
$(STAMP)-torch: $(STAMP)-base
	PIP_INDEX_OPTIONS='$(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))' \
		scripts/install-torch $(VENV) 'torch>=2.2' 'torchvision>=0.17'
	touch $@

system-deps:
	scripts/install-system-deps

setup: system-deps $(STAMP)-base

demo: setup $(STAMP)-train
	scripts/demo

test: setup $(STAMP)-train $(STAMP)-torch
	scripts/test

lint: setup
	$(BIN)/ruff check .
	PATH="$(CURDIR)/$(BIN):$$PATH" scripts/lint-playbooks .
	$(BIN)/python scripts/typecheck

clean:
	rm -rf $(VENV) gpuready-runs gpuready-lab
