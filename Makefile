# Every target sets itself up: a fresh clone needs only Python 3.11 and pip.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run demo test test-fast data lint typecheck bench bench-trace bench-defrag manifests clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	@echo "== 1/3  The engine: fragmentation and all-or-nothing gang placement on a sample cluster"
	@$(BIN)/gangplace demo
	@echo
	@echo "== 2/3  The admission webhook, served locally over TLS, answering captured AdmissionReviews"
	@$(BIN)/corral-webhook demo
	@echo
	@echo "== 3/3  The descheduler's plan for a fragmented cluster built from the Alibaba GPU trace"
	@$(BIN)/corral-descheduler plan

# The story on the in-memory cluster of the tests (kubectl corral demo --local, the
# cluster registered from the checkout by scripts/demo_local.py); on a cluster with
# corral and Volcano: kubectl corral demo (docs/install.md).
demo: $(STAMP)
	@$(BIN)/python -m scripts.demo_local

# Tests that need third-party data (the trace, other projects' CRDs) run when it is found
# ($CORRAL_DATA, else ../shared); without it they are left out and the run ends saying so.
test: $(STAMP)
	$(BIN)/python -m pytest

# The inner loop: everything but the tests marked slow or scenario (see pyproject.toml).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not scenario"

# The third-party data from its public sources, into $CORRAL_DATA (else ../shared).
data:
	$(PYTHON) -m scripts.get_data

# Strict typing everywhere; the engine alone as well, as CI has always checked it; the
# layers (import contracts in pyproject.toml: docs/architecture.md).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy --strict shared/gangplace/engine
	MYPYPATH=shared $(BIN)/mypy --strict -p gangplace -p descheduler -p webhook -p kubectl_corral
	$(BIN)/python -m scripts.gen_manifests --check
	$(BIN)/python -m scripts.gen_support_matrix --check

# The generated RBAC (from gangplace.kube.rbac), the installed descheduler config,
# the kubectl-corral viewer role, the command-line reference in docs/ and the support
# matrix (from what the tests play, tests/played.py). Kinds added in the configs:
# make manifests MANIFESTS_ARGS="--webhook-config F --descheduler-config F".
manifests: $(STAMP)
	$(BIN)/python -m scripts.gen_manifests $(MANIFESTS_ARGS)
	$(BIN)/python -m scripts.gen_support_matrix

bench: $(STAMP)
	$(BIN)/python -m bench.engine
	$(BIN)/python -m bench.descheduler

bench-trace: $(STAMP)
	$(BIN)/python -m bench.trace

bench-defrag: $(STAMP)
	nice $(BIN)/python -m bench.defrag_replay

clean:
	rm -rf $(VENV) build *.egg-info
