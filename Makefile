# lambdalake — every command creates what it needs and is safe to run twice.
#   make demo    bring up the platform and run its main job
#   make test    run the test suite (starts the real components it needs)
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
LAMBDALAKE := $(BIN)/lambdalake
CHROMIUM := /usr/bin/chromium
FAKETIME := /usr/bin/faketime
DAYS ?= 30
export NO_MKDOCS_2_WARNING := 1   # mkdocs-material's banner about its successor, on every build

.PHONY: setup up down status demo report lint docs test test-unit test-clock-ahead chaos bench bench-nexmark lock try-py312 clean

# the dev lock (the runtime pins plus the dev extra's), hash-checked, then the checkout itself
$(INSTALLED): requirements-dev.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (set PYTHON=...)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes -r requirements-dev.txt
	$(BIN)/pip install --quiet --no-deps -e .
	@touch $@

$(CHROMIUM):           # Debian's chromium, for the test that renders the Airflow plugin page
	@test "$$(id -u)" = 0 || { echo "need Debian's chromium: apt-get install chromium (as root)"; exit 1; }
	apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium

$(FAKETIME):           # Debian's faketime (libfaketime) and a C compiler, for `make test-clock-ahead`
	@test "$$(id -u)" = 0 || { echo "need Debian's faketime: apt-get install faketime (as root)"; exit 1; }
	apt-get update -qq && apt-get install -y -qq --no-install-recommends faketime gcc libc6-dev

setup: $(INSTALLED)   ## venv, JVM jars from Maven Central, state dirs
	$(LAMBDALAKE) setup

up: setup             ## start the stack (object store if configured, PostgreSQL, Kafka, schema registry, Spark Connect, ingest, speed layer, query API, Airflow, its watchdog); wait until healthy
	$(LAMBDALAKE) up

down:                 ## stop exactly what `make up` started
	@test -x $(LAMBDALAKE) && $(LAMBDALAKE) down || echo "nothing to stop (no venv)"

status:
	$(LAMBDALAKE) status

demo: up              ## the platform's main job, run through Airflow
	$(LAMBDALAKE) demo

report:               ## data-quality summary on the terminal; HTML report with GX Data Docs
	$(LAMBDALAKE) report

lint: $(INSTALLED)    ## ruff, strict mypy on include/, the import layers and the declared dependencies (pyproject.toml), the docs site
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/deptry .
	$(BIN)/mkdocs build --strict --site-dir site

docs: $(INSTALLED)    ## regenerate the pages derived from code, then build the docs site into site/
	$(LAMBDALAKE) docs
	$(BIN)/python -m docsgen.reference
	$(BIN)/mkdocs build --strict --site-dir site

test: setup $(CHROMIUM) lint  ## lint, then the whole suite: unit tests, then integration tests on real processes
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-unit: $(INSTALLED)
	$(BIN)/python -m pytest tests/unit tests/repo $(PYTEST_ARGS)

# every process of the run (pytest and the stack it starts: JVMs, PostgreSQL, Airflow) sees
# its wall clock DAYS ahead through libfaketime; monotonic clocks stay real, and
# tests/support/clock_ahead.c mends the waits libfaketime 0.9.10 breaks in that mode
CLOCK_AHEAD := .state/clock-ahead/clock_ahead.so
$(CLOCK_AHEAD): tests/support/clock_ahead.c
	@mkdir -p $(@D)
	cc -shared -fPIC -O2 -Wall -o $@ $< -ldl -lpthread

test-clock-ahead: setup $(CHROMIUM) $(FAKETIME) $(CLOCK_AHEAD)  ## the unit and repo tiers and the tests that produce through Kafka, DAYS (30) from now
	LD_PRELOAD="$(abspath $(CLOCK_AHEAD)) $$(dpkg -L libfaketime | grep '/libfaketimeMT.so.1$$')" \
	  FAKETIME="+$(DAYS)d" FAKETIME_DONT_FAKE_MONOTONIC=1 $(BIN)/python -m pytest \
	  tests/unit tests/repo $$($(BIN)/python -m tests.support.dated_traffic) $(PYTEST_ARGS)

chaos: setup          ## only the fault-injection tests (kills, broker outage, full disk, lost nodes)
	$(BIN)/python -m pytest tests/integration tests/e2e -m chaos $(PYTEST_ARGS)

bench: setup          ## benchmarks, quick profile (PROFILE=full: all of them at full size)
	$(BIN)/python -m bench.run --profile $(or $(PROFILE),quick)

bench-nexmark: setup  ## the Nexmark benchmark alone (each layer per query beside bare Spark; PROFILE=full: 1M events)
	$(BIN)/python -m bench.run --profile $(or $(PROFILE),quick) --only nexmark

# uv's resolver (docs/decisions.md), for $(PYTHON) on Linux; each lock keeps the pins it has
UV_VERSION := 0.13.9
LOCK_VENV := /tmp/lambdalake-lock
COMPILE := $(LOCK_VENV)/bin/uv pip compile pyproject.toml --quiet --generate-hashes \
  --python $(PYTHON) --python-platform linux --custom-compile-command "make lock" $(if $(UPGRADE),--upgrade)

lock:                 ## pyproject.toml's dependencies into the hashed pins of requirements.txt (runtime) and requirements-dev.txt (plus the dev extra), keeping current pins (UPGRADE=1: re-resolve all)
	@test -x $(LOCK_VENV)/bin/uv && $(LOCK_VENV)/bin/uv --version | grep -q " $(UV_VERSION) " || \
	  { rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/pip install --quiet uv==$(UV_VERSION); }
	$(COMPILE) -o requirements.txt
	$(COMPILE) --extra dev -c requirements.txt -o requirements-dev.txt

# Python 3.12, tried: the dev lock and the project (non-editable) in a fresh venv, then the unit
# tier from outside the checkout. Not part of `make test` or CI's run (its budget): run it by hand.
PYTHON312 ?= python3.12
PY312_VENV := /tmp/lambdalake-py312
try-py312:            ## Python 3.12: a fresh venv from the dev lock, the project installed (not editable), the unit tier
	rm -rf $(PY312_VENV) && $(PYTHON312) -m venv $(PY312_VENV)
	$(PY312_VENV)/bin/pip install --quiet --upgrade pip
	$(PY312_VENV)/bin/pip install --quiet --require-hashes -r requirements-dev.txt
	$(PY312_VENV)/bin/pip install --quiet --no-deps --ignore-requires-python .
	cd /tmp && LAMBDALAKE_PROJECT_DIR=$(CURDIR) $(PY312_VENV)/bin/python -m pytest -p no:cacheprovider \
	  --rootdir $(CURDIR) -c $(CURDIR)/pyproject.toml $(CURDIR)/tests/unit $(PYTEST_ARGS)

clean:                ## stop, then remove all local state (Kafka logs, lake, Airflow DB); keep the venv
	@test -x $(LAMBDALAKE) && $(LAMBDALAKE) clean || rm -rf .state
