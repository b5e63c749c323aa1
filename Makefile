# Two entry points, each works alone from a fresh clone:
#   make serve   — create .venv if missing, install, run the service on the simulated robot
#   make test    — create .venv if missing, install with every extra and the test tools, lint, run pytest
#   make image   — build the container image (docker where a daemon runs, else podman)
#   make image-test — build it, then check it as deployed (scripts/container.py)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

# the container: IMAGE is the tag, BASE the base image (made locally with debootstrap when the
# default cannot be pulled), EXTRAS the package extras installed in it
IMAGE ?= localhost/fdcontrol:latest
BASE ?= docker.io/library/python:3.11-slim
EXTRAS ?= server,mujoco,ros2,fast
HOST_PYTHON ?= python3

.PHONY: serve test test-loaded install install-test bench measure clean image image-test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# installs are stamped: pip runs again only when pyproject.toml changed (or after `make clean`)
install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

$(VENV)/.installed: pyproject.toml | $(BIN)/python  # what the service needs: server, simulated arm, compiled limits
	$(BIN)/pip install -e '.[server,mujoco,fast]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[all,test]'
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

bench: install-test  # the benchmarks use the experiments, the drivers and the test fixtures
	$(BIN)/python benchmarks/bench_mappings.py

# the README's "Measured here" numbers: runs the speed benchmarks (minutes), rewrites the section and
# docs/measured.json; e.g. `make measure MEASURE_ARGS="--only ws"` or `MEASURE_ARGS=--quick`
measure: install-test
	$(BIN)/python scripts/measure.py $(MEASURE_ARGS)

image:
	$(HOST_PYTHON) scripts/container.py image --tag $(IMAGE) --base $(BASE) --extras $(EXTRAS)

image-test: image
	$(HOST_PYTHON) scripts/container.py test --tag $(IMAGE)

clean:
	rm -rf $(VENV) build *.egg-info
