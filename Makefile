# The two commands of the README: `make run` and `make test`. Everything they
# need is installed here, into .venv, from PyPI: the dev tools and the
# embedded PostgreSQL (the `embedded` extra), which lets both run on a machine
# without a PostgreSQL server.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup run test test-embedded lint typecheck chaos bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,embedded,otel]'
	touch $(STAMP)

# The console's browser test drives Debian's chromium through chromium-driver
# (browser downloads are not possible); installed here when missing and root.
setup: $(STAMP)
	@{ command -v chromium >/dev/null && command -v chromedriver >/dev/null; } \
		|| { [ "$$(id -u)" = 0 ] && { apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 \
			|| { apt-get update -qq >/dev/null && apt-get install -y -qq chromium chromium-driver >/dev/null; }; }; } \
		|| echo "note: install chromium and chromium-driver (apt-get install chromium chromium-driver) for the console's browser test"

run: setup
	$(BIN)/jobwarden demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest -q -p no:cacheprovider -n 4 --dist load --durations=25

# The whole suite on an embedded PostgreSQL, as on a machine without a server:
# no DATABASE_URL, and the probe of the local server moved to a port nothing
# listens on. Not part of CI (make test covers the embedded server's own tests).
test-embedded: lint typecheck
	env -u DATABASE_URL JW_LOCAL_PG_PORT=1 $(BIN)/pytest -q -p no:cacheprovider -n 2 --dist load

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
