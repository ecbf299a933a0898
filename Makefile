# Two commands matter: `make run` starts everything, `make test` checks everything but the
# long suites (schemathesis, fault drills), which `make test-all` adds, as CI does (.ci/run).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-all lint typecheck pytest pytest-long install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/infercost up

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The suite on pytest-xdist workers, each a session of its own (database, queue, API, worker,
# simulator; tests/conftest.py); a test file runs on one worker (its module fixtures built
# once) unless tests/conftest.py spreads it, longest first by the durations the last run kept
# in .pytest_cache. PYTEST_DIST picks xdist's scheduler (worksteal was slower here:
# docs/benchmarks.md, "The suite itself"). The long suites, schemathesis, the fault
# drills and the hosts in network namespaces (about 2 minutes; skipped without root), run as
# `pytest-long`.
PYTEST_WORKERS ?= 5
PYTEST_DIST ?= loadfile
LONG_SUITES := tests/schemathesis tests/faults tests/multihost

# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE): each
# worker would otherwise parse and rewrite every test module's assertions again, some 5 s of
# CPU a worker. `pytest` leaves out schemathesis's plugin, which only the long suites use.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest

pytest: $(STAMP)
	$(PYTEST) -p no:schemathesis -n $(PYTEST_WORKERS) --dist $(PYTEST_DIST) $(addprefix --ignore=,$(LONG_SUITES))

pytest-long: $(STAMP)
	$(PYTEST) -n 2 --dist loadfile $(LONG_SUITES)

test: lint typecheck pytest

# Everything CI runs (.ci/run): `make test`, then the long suites.
test-all: test pytest-long

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info
