# The two commands of the README: `make run` and `make test`. Everything they
# need is installed here, into .venv, from PyPI: the dev tools and the
# embedded PostgreSQL (the `embedded` extra), which lets both run on a machine
# without a PostgreSQL server.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup run test lint typecheck chaos bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,embedded]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/jobwarden demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest -q -p no:cacheprovider

# The receiver benchmark drives load with wrk (Debian's package); installed
# here when possible, else the benchmark says it is missing.
bench: setup
	@command -v wrk >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get install -y -qq wrk >/dev/null; } \
		|| echo "note: install wrk (apt-get install wrk) for the receiver benchmark"
	$(BIN)/python -m bench

chaos: setup
	$(BIN)/python -m bench.chaos
	$(BIN)/python -m bench.crashpoints

clean:
	rm -rf $(VENV) .pgdata .mypy_cache .ruff_cache
