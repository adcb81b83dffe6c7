# Quick start: `make run` opens the dashboard on a demo repository; `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-slow lint typecheck pytest bench snapshots screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# setuptools warns on every editable install that a same-named folder could shadow the package: it is this one.
	PYTHONWARNINGS=ignore::UserWarning $(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/daintree demo

lint: setup
	$(BIN)/ruff check daintree_tui tests bench

typecheck: setup
	$(BIN)/mypy

pytest: setup
	$(BIN)/pytest -q -p no:cacheprovider -m "not slow"

test-slow: setup
	$(BIN)/pytest -q -p no:cacheprovider -m slow

test: lint typecheck pytest

bench: setup
	$(BIN)/python -m bench

screenshots: setup
	$(BIN)/python screenshots/make.py

snapshots: setup
	$(BIN)/pytest -q tests/test_snapshots.py --snapshot-update

clean:
	rm -rf $(VENV) build *.egg-info
