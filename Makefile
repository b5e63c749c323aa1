# Two entry points, each works alone from a fresh clone:
#   make serve   — create .venv if missing, install, run the service on the simulated robot
#   make test    — create .venv if missing, install with the test and ur extras, lint, run pytest
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: serve test test-loaded install install-test bench measure clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# installs are stamped: pip runs again only when pyproject.toml changed (or after `make clean`)
install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[test,ur]'
	touch $@ $(VENV)/.installed

serve: install
	@echo "the fdcontrol command: $(BIN)/fdcontrol (or run '. $(BIN)/activate' to put it on PATH)"
	$(BIN)/fdcontrol serve --host $(HOST) --port $(PORT)

test: install-test
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

# what CI runs: the same suite with two CPU-bound processes beside it (a loaded 2-core machine);
# the time bounds in the tests must hold there too. The hogs are ended however pytest ends.
test-loaded: install-test
	$(BIN)/ruff check .
	sh -c 'while :; do :; done' & h1=$$!; sh -c 'while :; do :; done' & h2=$$!; \
	  $(BIN)/python -m pytest -q $(PYTEST_ARGS); rc=$$?; kill $$h1 $$h2; exit $$rc

bench: install
	$(BIN)/python benchmarks/bench_mappings.py

# the README's "Measured here" numbers: runs the speed benchmarks (minutes), rewrites the section and
# docs/measured.json; e.g. `make measure MEASURE_ARGS="--only ws"` or `MEASURE_ARGS=--quick`
measure: install
	$(BIN)/python scripts/measure.py $(MEASURE_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
