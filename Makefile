# Every target sets itself up: a fresh clone needs only Python 3.11 and pip.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck bench bench-trace manifests clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/gangplace demo

test: $(STAMP)
	$(BIN)/python -m pytest

# kubectl_corral's mypy line checks it and the RBAC attribution, not what they import.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy --strict shared/gangplace/engine
	MYPYPATH=shared $(BIN)/mypy --strict descheduler
	MYPYPATH=shared $(BIN)/mypy --strict webhook
	MYPYPATH=shared $(BIN)/mypy --strict --follow-imports=silent -p kubectl_corral -p gangplace.kube.rbac
	$(BIN)/python scripts/gen_manifests.py --check

# The generated RBAC (from gangplace.kube.rbac), the installed descheduler config and
# the kubectl-corral viewer role in docs/.
manifests: $(STAMP)
	$(BIN)/python scripts/gen_manifests.py

bench: $(STAMP)
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/descheduler.py

bench-trace: $(STAMP)
	$(BIN)/python bench/trace.py

clean:
	rm -rf $(VENV) build *.egg-info
