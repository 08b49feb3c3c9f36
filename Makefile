# ksched developer entry points. `make demo` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup demo test unit lint controlplane kwok node testdeps podman bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: setup  ## schedule the bundled example cluster in memory, live
	$(BIN)/ksched run

controlplane:  ## build kube-apiserver, etcd, kube-scheduler, kube-controller-manager from Go modules, and the previous minor's kube-scheduler (cached)
	bash hack/build-controlplane.sh
	bash hack/build-prev-scheduler.sh

kwok:  ## build the kwok controller (sigs.k8s.io/kwok) and copy its default stages, for `ksched dev-cluster up --nodes` (cached)
	bash hack/build-kwok.sh

node: controlplane  ## kubelet (same version, from Go modules), containerd + runc (apt), crictl, pause and kube-scheduler images (cached)
	bash hack/install-node.sh

testdeps:  ## system packages the tests use for real components (prometheus, chromium)
	bash hack/install-test-deps.sh

podman:  ## podman's Docker-compatible socket and a local Python base image, for the `ksched build` tests
	bash hack/install-podman.sh

lint: setup  ## ruff everywhere; mypy --strict on the plugin API, the seed plugins and the kube client package ([tool.mypy] in pyproject.toml)
	$(BIN)/ruff check .
	$(BIN)/mypy

test: setup controlplane kwok node testdeps podman lint  ## the whole suite: unit, end-to-end and integration (real kube-apiserver)
	$(BIN)/pytest -q

unit: setup
	$(BIN)/pytest -q tests/unit tests/e2e

bench: setup
	$(BIN)/python bench/simulate_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
