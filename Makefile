# Quick start: `make run` opens the dashboard on a demo repository; `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed

.PHONY: setup run test test-fast test-agents test-slow test-lowest wheel-check docs lint typecheck pytest bench snapshots screenshots clean

# uv installs the same packages as pip in a fraction of the time (bench/first_run.py measures both; figures in
# the README's Quick start). It comes from the package index into the venv, so nothing needs installing first.
# INSTALLER=pip uses pip alone.
INSTALLER ?= uv
# The venv comes without pip when uv installs: ensurepip was the slowest step of a new user's first `make run`
# (6.1 s of CPU at load 8, against 0.4 s without; bench/first_run.py). uv then comes from the interpreter's own pip
# (`pip --python`, pip >= 22.3), else from a pip put into the venv after all.
ifeq ($(INSTALLER),pip)
VENV_FLAGS :=
else
VENV_FLAGS := --without-pip
endif
# hatchling's editable install puts the source tree on sys.path with a one-line .pth, as an installed package is
# found (no import hook loading pathlib, re and urllib.parse in `site` on every start of every command).
EDITABLE := -e
# A venv made without pip gets one where pip is needed after all (uv could not be installed, or cannot reach the
# index).
ENSURE_PIP := { $(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --upgrade >/dev/null; }
PIP := $(BIN)/python -m pip --disable-pip-version-check
PIP_INSTALL := $(PIP) install --quiet $(EDITABLE)
# The dev tools are PEP 735 dependency groups (pyproject.toml): uv and pip >= 25.1 read `--group`. The venv's own
# pip may be older (Python 3.11's ensurepip brings 23.x): it is upgraded first, only where groups are installed.
PIP_FOR_GROUPS := $(PIP) install --quiet 'pip>=25.1'
ifeq ($(INSTALLER),pip)
INSTALLER_BIN := $(BIN)/python
INSTALL = $(PIP_INSTALL) $(1)
INSTALL_GROUPS = $(PIP_FOR_GROUPS) && $(PIP_INSTALL) $(1)
else
INSTALLER_BIN := $(BIN)/uv
# Falls back to pip when uv could not be installed or cannot reach the index (uv ignores pip's own config).
INSTALL = { [ -x $(BIN)/uv ] && $(BIN)/uv pip install --quiet --python $(BIN)/python $(EDITABLE) $(1); } \
	|| { $(ENSURE_PIP) && $(PIP_INSTALL) $(1); }
INSTALL_GROUPS = { [ -x $(BIN)/uv ] && $(BIN)/uv pip install --quiet --python $(BIN)/python $(EDITABLE) $(1); } \
	|| { $(ENSURE_PIP) && $(PIP_FOR_GROUPS) && $(PIP_INSTALL) $(1); }
endif

$(BIN)/python:
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)

$(BIN)/uv: | $(BIN)/python
	$(PYTHON) -m pip --python $(BIN)/python install --quiet --disable-pip-version-check uv 2>/dev/null \
		|| { $(ENSURE_PIP) && $(BIN)/python -m pip install --quiet --disable-pip-version-check uv; } \
		|| echo "uv unavailable: installing with pip"

# `make run` needs only the package; the checks (`make setup`, `make test`) add the dev group (tests, lint, docs).
$(RUN_STAMP): pyproject.toml | $(INSTALLER_BIN)
	$(call INSTALL,.)
	touch $@

$(TEST_STAMP): pyproject.toml | $(INSTALLER_BIN)
	$(call INSTALL_GROUPS,. --group dev)
	touch $@ $(RUN_STAMP)

setup: $(TEST_STAMP)

run: $(RUN_STAMP)
	$(BIN)/daintree demo

lint: setup
	$(BIN)/ruff check daintree_tui tests bench docs/hooks

typecheck: setup
	$(BIN)/mypy

# The suite starts Python hundreds of times (MCP servers, the CLI as a child, agents, the dashboard's workers):
# bytecode cached under the venv spares each the compiling of what it imports (an MCP server starts in 0.9 s of
# CPU, not 1.4 s), also where PYTHONDONTWRITEBYTECODE is set to keep source trees clean; this keeps them clean.
PYTEST := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache $(BIN)/pytest -q -p no:cacheprovider

# Six workers (pytest-xdist), each taking the next test as it frees (`worksteal`: no worker left with a queue of
# slow ones at the end), on the 2-core target machine: most tests wait on git, tmux, bwrap and sshd, and every
# test has its own repository, tmux socket and config, so they run side by side. With six the two cores are busy
# throughout (the machine's own count: 631 CPU-s busy, 38 idle over 336 s, tmux servers and sessions included);
# the suite's CPU, not its waits, is then the floor. Measured on a quiet machine, 1109 tests: 7m00s with three
# workers, 5m47s with five, 5m12s-5m56s with six; with two CPU-bound processes and another suite beside it, six
# passed whole (8m04s).
pytest: setup
	$(PYTEST) -m "not slow and not real_agents" -n 6 --dist worksteal

# The inner loop (its target is a minute; measured below): every test that needs none of tmux, sshd and bubblewrap (tests/conftest.py marks
# each test `tmux`, `sshd` or `bwrap` from its fixtures and skip conditions): the CLI, git, state files, config,
# the review and the terminal's core. It passes on a machine that has none of the three. The 8 stress tests
# (fuzzers, kill -9 at random points, racing processes) are left to `make test`: 66-71 s without them against
# 68-74 s with them, 471 tests on the quiet 2-core machine, where its 118 CPU-s make ~60 s the floor. Four
# workers: these tests wait on nothing timed (a terminal, a host), and four kept the two cores busier than
# three (63 s against 73 s at load 3.6-4.9, 465 tests). None of these tests compares a snapshot: the snapshot
# plugin is left out (it imports jinja2 and textual, 0.4 CPU-s in each of the five processes).
test-fast: setup
	$(PYTEST) -p no:textual-snapshot \
		-m "not slow and not real_agents and not tmux and not sshd and not bwrap and not stress" -n 4

# The real agent CLIs (claude, codex, gemini, opencode, aider) in the sandbox and outside, 20-50 s each: CI runs
# them after `make test` (.ci/run installs the CLIs); here they skip where a CLI is missing. One at a time: two
# codex sign-ins clash on its fixed localhost port.
test-agents: setup
	$(PYTEST) -m real_agents -p no:xdist

test-slow: setup
	$(PYTEST) -m slow

test: lint typecheck pytest

# The lower bounds in pyproject.toml are honest: the oldest release of every direct dependency they allow (uv's
# lowest-direct resolution, test tools included), in a venv of its own, through the tests that load each of them
# (textual and rich: the dashboard's start and dialogs; pyte and wcwidth: the terminal; mcp; pathspec: deps;
# shtab: completion; mkdocs: the docs build; textual-serve: serve). Needs uv: pip has no lowest resolution.
LOWEST := .venv-lowest
LOWEST_TESTS := tests/test_layers.py tests/test_config.py tests/test_store.py tests/test_tasks.py tests/test_rows.py \
	tests/test_dialogs.py tests/test_deps.py tests/test_terminal_core.py tests/test_dashboard_startup.py \
	tests/test_mcp.py tests/test_cli_surface.py tests/test_docs.py tests/test_serve.py
test-lowest: | $(BIN)/uv
	rm -rf $(LOWEST)
	$(BIN)/uv venv --quiet --python $(BIN)/python $(LOWEST)
	$(BIN)/uv pip install --quiet --python $(LOWEST)/bin/python --resolution lowest-direct $(EDITABLE) . --group test
	$(LOWEST)/bin/python -m pytest -q -p no:cacheprovider -n 2 $(LOWEST_TESTS)

# The wheel as a user installs it, in a fresh venv: `daintree --version`, `daintree demo --no-ui` (.ci/wheel-check).
wheel-check: | $(BIN)/uv
	.ci/wheel-check $(BIN)/uv $(BIN)/python

# The docs site (mkdocs-material) into site/, strict: a broken link or a page missing from the nav fails it. The
# CLI and configuration references are generated while it builds (docs/hooks/reference.py).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

bench: setup
	$(BIN)/python -m bench

screenshots: setup
	$(BIN)/python screenshots/make.py

snapshots: setup
	$(BIN)/pytest -q tests/test_snapshots.py --snapshot-update

clean:
	rm -rf $(VENV) $(LOWEST) build dist site *.egg-info
