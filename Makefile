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

system-deps:
	scripts/install-system-deps

setup: system-deps $(STAMP)-base

demo: setup
	scripts/demo

test: setup
	scripts/test

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check core provision validate workloads tests benchmarks
	cd playbooks && ../$(BIN)/ansible-lint --profile production --offline .

clean:
	rm -rf $(VENV) gpuready-runs gpuready-lab
