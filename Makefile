# The two quick-start commands: `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.stamp

.PHONY: demo test lint setup system-deps clean

# Each long step says what it does and how long it took (scripts/timed), instead of echoing its command line.
$(BIN)/python:
	@scripts/timed "creating the virtual environment $(VENV)" $(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install -q --upgrade pip

# Python dependencies, reinstalled when pyproject.toml changes.
$(STAMP)-base: pyproject.toml | $(BIN)/python
	@scripts/timed "installing gpuready and its Python dependencies into $(VENV) (first run: a minute or two)" \
		$(BIN)/pip install -q -e '.[dev]'
	@touch $@

# The train extra: TensorFlow first, then Horovod built from source against it (Gloo only, no
# MPI/PyTorch/MXNet); pip keeps the built wheel in its cache, so later runs take seconds.
HOROVOD_BUILD := HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 \
	HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=GLOO
$(STAMP)-train: $(STAMP)-base
	@scripts/timed "installing TensorFlow 2.15.1 for the training run (first run: a few minutes)" \
		$(BIN)/pip install -q 'tensorflow==2.15.1' 'kubernetes-validate>=1.31'
	@scripts/timed "building Horovod 0.28.1 from source against it (first run: about 9 minutes on 2 cores; later runs take seconds)" \
		env $(HOROVOD_BUILD) $(BIN)/pip install -q --no-build-isolation 'horovod==0.28.1'
	@$(BIN)/pip check
	@touch $@

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
	@scripts/timed "installing the system packages (scripts/install-system-deps; first run: several minutes)" \
		scripts/install-system-deps

setup: system-deps $(STAMP)-base

# The environments first (node, vSphere, Kubernetes: what most users come for), then the training
# dependencies, built only now, then the training run.
demo: setup
	@scripts/demo environments
	@$(MAKE) --no-print-directory $(STAMP)-train
	@scripts/demo training

test: setup $(STAMP)-train $(STAMP)-torch
	scripts/test

lint: setup
	$(BIN)/ruff check .
	PATH="$(CURDIR)/$(BIN):$$PATH" scripts/lint-playbooks .
	$(BIN)/python scripts/typecheck

clean:
	rm -rf $(VENV) gpuready-runs gpuready-lab
