# Every target sets itself up: a fresh clone needs only Python 3.11 and pip.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck bench bench-trace bench-defrag clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/gangplace demo

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy --strict shared/gangplace/engine
	MYPYPATH=shared $(BIN)/mypy --strict descheduler
	MYPYPATH=shared $(BIN)/mypy --strict webhook

bench: $(STAMP)
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/descheduler.py

bench-trace: $(STAMP)
	$(BIN)/python bench/trace.py

bench-defrag: $(STAMP)
	nice $(BIN)/python bench/defrag_replay.py

clean:
	rm -rf $(VENV) build *.egg-info
