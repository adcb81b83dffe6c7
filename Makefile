# Quick start: `make run` opens the dashboard on a demo repository; `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-slow lint typecheck pytest bench snapshots screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# uv installs the same packages as pip in a fraction of the time (measured with bench/first_run.py, see the
# README's Quick start); it comes from the package index into the venv, so nothing else needs installing first.
# INSTALLER=pip uses pip alone.
INSTALLER ?= uv

$(STAMP): pyproject.toml | $(BIN)/python
ifeq ($(INSTALLER),pip)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
else
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[test]'
endif
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
