# gpu-control-plane developer entry points. Everything installs into ignored folders:
# .venv/ (Python, pinned by requirements/constraints.txt) and ~/.cache/gpu-control-plane (the
# tools built from the Go modules committed under hack/tools/, keyed by what was built).
# Every target names what it needs, so `make test` and `make demo` work on a fresh machine.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_WORKERS ?= 2

TOOLS := bash hack/tools/build.sh
# The folder of the built tools, for pytest and the scripts (evaluated when a recipe runs).
TOOLS_ENV = GPU_CP_BIN_DIR="$$($(TOOLS) --print-dir --cached-only)"
# The test targets install every tool and host package their tests use, so there a missing one is a
# failure, not a skip (testutil.tools.require_tool; by hand, pytest skips the test instead).
TEST_ENV = $(TOOLS_ENV) GPU_CP_REQUIRE_TOOLS=1
# The benchmarks are the package test/bench/ (`python -m bench`) and import testutil: both under test/.
BENCH = $(TOOLS_ENV) PYTHONPATH=test $(BIN)/python -m bench
# The soak is the package test/soak/ (`python -m soak`), run like the benchmarks (docs/reliability.md).
SOAK = $(TOOLS_ENV) PYTHONPATH=test $(BIN)/python -m soak
SOAK_MINUTES ?= 30
SOAK_RATE ?= 60

.PHONY: help install tools tools-check tools-update deps-update host-packages generate verify-generated \
	lint typecheck test test-unit test-integration test-integration-oldest test-integration-all test-e2e test-hardware demo bench bench-smoke soak soak-smoke clean image image-archive \
	tools-older-kubernetes

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml requirements/constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet pip==26.3
	# compat mode: a path entry instead of an import finder, so packages added later import too
	$(BIN)/pip install --quiet -c requirements/constraints.txt --config-settings editable_mode=compat \
		-e '.[dev]' -e test/fixtures/example_backend
	touch $(STAMP)

install: $(STAMP) ## Create the virtualenv with pinned dependencies

tools: ## Build (or reuse) etcd, kube-apiserver/-scheduler/-controller-manager, kubectl, kubelet, helm, containerd, cdi-validate, promtool, prometheus, kube-rbac-proxy, nvidia-cdi-hook, devicemetadata, kueue; the Prometheus Operator's and Kueue's CRDs
	$(TOOLS)

# The oldest Kubernetes release we support, whose control plane the DRA integration tests also run
# against (docs/kubernetes-versions.md); its apiserver, scheduler and controller manager only.
OLDEST_KUBERNETES := 1.34

tools-older-kubernetes: ## Build (or reuse) the Kubernetes 1.34 control plane the DRA integration tests also run against
	$(TOOLS) kubernetes-$(OLDEST_KUBERNETES)

tools-check: tools ## CI's check of the set-up path: go.sum verified and tidy, every tool linked afresh
	$(TOOLS) --check
	tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; $(TOOLS) --bin-dir "$$tmp"

tools-update: ## Move one tool to another version: make tools-update TOOL=kubernetes VERSION=v1.37.2
	bash hack/tools/update.sh "$(TOOL)" "$(VERSION)"

host-packages: ## Install the Debian packages real nodes need (runc, CNI plugins, busybox-static); root or sudo
	bash hack/host-packages.sh

IMAGE ?= gpu-control-plane:dev
CONTAINER_TOOL ?= $(shell command -v podman || command -v docker || command -v buildah)
CACHE_DIR = $${GPU_CP_CACHE_DIR:-$${XDG_CACHE_HOME:-$$HOME/.cache}/gpu-control-plane}

image: ## Build the image from the Containerfile where a registry is reachable (IMAGE=..., CONTAINER_TOOL=...)
	@test -n "$(CONTAINER_TOOL)" || { echo "no podman, docker or buildah: use make image-archive" >&2; exit 1; }
	$(CONTAINER_TOOL) build -f Containerfile -t $(IMAGE) .

image-archive: $(STAMP) tools host-packages ## The same image without a registry (debootstrap + PyPI) as dist/gpu-control-plane-image.tar; root
	$(TOOLS_ENV) $(BIN)/python hack/image_archive.py --cache-dir "$(CACHE_DIR)"

deps-update: $(STAMP) ## Re-pin the Python dependencies (requirements/constraints.txt) to what pyproject allows now
	bash hack/update-constraints.sh

generate: $(STAMP) ## Regenerate derived files (CRDs from the API models, the kubelet plugin's protobuf modules)
	$(BIN)/python hack/generate_crds.py
	$(BIN)/python hack/generate_protos.py

verify-generated: $(STAMP)
	$(BIN)/python hack/generate_crds.py --check
	$(BIN)/python hack/generate_protos.py --check

lint: $(STAMP) ## ruff lint and format check, and the layer contract (import-linter, pyproject.toml)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# pytest imports each conftest.py as a module named "conftest", so mypy checks them one per run
# (pyproject.toml's exclude keeps them out of the first run).
typecheck: $(STAMP) ## mypy, strict, on pkg/, api/, hack/ and test/
	$(BIN)/mypy pkg api hack test
	find test -name conftest.py -not -path 'test/fixtures/sysfs/*/*' | sort | \
		xargs -n1 $(BIN)/mypy --no-warn-unused-configs

test-unit: $(STAMP) tools host-packages  # chart tests render with helm; the hardware tier's chain runs runc and busybox
	$(TEST_ENV) $(BIN)/pytest test/unit -q -n $(PYTEST_WORKERS)

test-integration: $(STAMP) tools
	$(TEST_ENV) $(BIN)/pytest test/integration -q -p no:randomly

# The tests that depend on the server's DRA API (slice layout, the real scheduler's allocation,
# gpu-dra-controller, claim status, the chart's objects) again, against the oldest release.
test-integration-oldest: $(STAMP) tools tools-older-kubernetes
	$(TEST_ENV) GPU_CP_KUBERNETES_RELEASE=$(OLDEST_KUBERNETES) \
		GPU_CP_CONTROL_PLANE_BIN_DIR="$$($(TOOLS) --print-dir --cached-only kubernetes-$(OLDEST_KUBERNETES))" \
		$(BIN)/pytest test/integration -q -p no:randomly -m dra_api

test-e2e: $(STAMP) tools host-packages  # real nodes: needs root
	$(TEST_ENV) $(BIN)/pytest test/e2e -q -p no:randomly

test-hardware: ## The hardware tier on an NVIDIA GPU node, as root (HARDWARE_ARGS=--allow-card-changes: MIG, MPS, time slice)
	"$$(if [ -x $(BIN)/python ]; then echo $(BIN)/python; else echo $(PYTHON); fi)" \
		-m pytest test/hardware --confcutdir=test/hardware -q -p no:randomly $(HARDWARE_ARGS)

# Both integration passes. The older control plane builds (niced, about 7 minutes of CPU from empty
# Go caches) while the pinned release's tests run: those mostly wait on the API server, so the
# build costs a fresh `make test` little wall time. The build's log is printed if it fails.
test-integration-all: $(STAMP) tools
	bin="$$($(TOOLS) --print-dir --cached-only)"; log="$$(mktemp)"; trap 'rm -f "$$log"' EXIT; \
	nice -n 19 $(TOOLS) kubernetes-$(OLDEST_KUBERNETES) >"$$log" 2>&1 & build=$$!; \
	tests=0; GPU_CP_BIN_DIR="$$bin" GPU_CP_REQUIRE_TOOLS=1 $(BIN)/pytest test/integration -q -p no:randomly || tests=$$?; \
	wait "$$build" || { cat "$$log" >&2; echo "building Kubernetes $(OLDEST_KUBERNETES) failed" >&2; exit 1; }; \
	[[ "$$tests" == 0 ]] || exit "$$tests"
	$(MAKE) --no-print-directory test-integration-oldest

test: lint typecheck verify-generated tools-check test-unit test-integration-all test-e2e soak-smoke bench-smoke ## Lint, types, generated files, the set-up path, every test tier (DRA integration on 1.34 too), every fault of the soak once, every benchmark at a small size

demo: $(STAMP) tools host-packages ## Simulated GPU nodes on a local control plane, the GPU flow end to end (DEMO_ARGS=--keep-running)
	@# exec: make is the demo's parent, so a signal to make reaches it (pkg/devcluster/parentstop.py)
	exec env $(TOOLS_ENV) $(BIN)/python hack/demo.py $(DEMO_ARGS)

bench: $(STAMP) tools host-packages ## Benchmarks beside the alternatives (print four tables; BENCH_ARGS=--quick for a small size); real nodes: root
	$(BENCH) $(BENCH_ARGS)

bench-smoke: $(STAMP) tools host-packages ## Every benchmark at a small size (make test runs it so none rots unseen); real nodes: root
	$(BENCH) --quick

# exec: make is the soak's parent, so a signal to make reaches it and its cluster is cleaned up
# (pkg/devcluster/parentstop.py), as for the demo.
soak: $(STAMP) tools host-packages ## GPU Pods of every kind for SOAK_MINUTES at SOAK_RATE Pods/min while every fault strikes more than once (docs/reliability.md); real nodes: root
	exec env $(SOAK) --minutes $(SOAK_MINUTES) --rate $(SOAK_RATE)

soak-smoke: $(STAMP) tools host-packages ## The soak with every fault kind once, back to back (about 6 minutes; make test runs it); real nodes: root
	exec env $(SOAK) --smoke

clean: ## Remove the virtualenv and local caches (not the built tools)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache test-artifacts
