# gpu-control-plane developer entry points. Everything installs into ignored folders:
# .venv/ (Python) and ~/.cache/gpu-control-plane (the control-plane binaries, keyed by version).
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_WORKERS ?= 2

.PHONY: help install control-plane generate verify-generated lint typecheck test test-unit \
	test-integration demo bench clean

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# compat mode: a path entry instead of an import finder, so packages added later import too
	$(BIN)/pip install --quiet --config-settings editable_mode=compat -e '.[dev]' -e test/fixtures/example_backend
	touch $(STAMP)

install: $(STAMP) ## Create the virtualenv with pinned dependencies

control-plane: ## Build (or reuse) etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, helm
	bash hack/build-control-plane.sh

generate: $(STAMP) ## Regenerate derived files (CRDs from the API models)
	$(BIN)/python hack/generate_crds.py

verify-generated: $(STAMP)
	$(BIN)/python hack/generate_crds.py --check

lint: $(STAMP) ## ruff lint and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP) ## mypy (strict on pkg/ and api/)
	$(BIN)/mypy pkg api hack

test-unit: $(STAMP)
	$(BIN)/pytest test/unit -q -n $(PYTEST_WORKERS)

test-integration: $(STAMP) control-plane
	$(BIN)/pytest test/integration -q -p no:randomly

test: lint typecheck verify-generated test-unit test-integration ## Lint, types, generated files, every test tier

demo: $(STAMP) control-plane ## Simulated GPU nodes on a local control plane, the GPU flow end to end (DEMO_ARGS=--keep-running)
	$(BIN)/python hack/demo.py $(DEMO_ARGS)

bench: $(STAMP) ## Benchmarks (print figures)
	$(BIN)/python test/bench/run.py

clean: ## Remove the virtualenv and local caches (not the control-plane binaries)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache test-artifacts
