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

.PHONY: serve test test-loaded browser install install-test bench measure clean image image-test image-clean lerobot test-lerobot

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# installs are stamped: pip runs again only when pyproject.toml changed (or after `make clean`)
install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

$(VENV)/.installed: pyproject.toml | $(BIN)/python  # what the service needs: server, simulated arm, compiled limits
	@echo "installing fdcontrol[server,mujoco,fast] into $(VENV) (the first time takes a few minutes) …"
	$(BIN)/pip install -q -e '.[server,mujoco,fast]'
	@echo "compiling the loop's numba kernels into their cache (once: about a minute) …"
	$(BIN)/python -m fdcontrol.kernels
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	@echo "installing fdcontrol with every extra and the test tools into $(VENV) (the first time takes about 5 minutes) …"
	$(BIN)/pip install -q -e '.[all,test]'
	@echo "compiling the loop's numba kernels into their cache (once: about a minute) …"
	$(BIN)/python -m fdcontrol.kernels
	touch $@ $(VENV)/.installed

# the dashboard's browser tests need Debian's chromium: installed where this runs as root with apt-get,
# else one line says so (the tests then skip, and pytest's summary says in one line that they did not run)
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium for the dashboard's browser tests (apt-get) …"; apt-get update -qq >/dev/null 2>&1; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || true; fi; \
	  command -v chromium >/dev/null 2>&1 || echo "no chromium here (needs root and apt-get): the dashboard's browser tests will skip"; \
	fi

serve: install
	@echo "the fdcontrol command: $(BIN)/fdcontrol (or run '. $(BIN)/activate' to put it on PATH); another port: make serve PORT=8001"
	$(BIN)/fdcontrol serve --host $(HOST) --port $(PORT)

# progress as a count ([ 120/1050]); PYTEST_ARGS adds pytest options, e.g. the quick subset of the inner loop:
# make test PYTEST_ARGS='-m "not slow"' (no service, simulator or browser processes: about 3 minutes)
test: install-test browser
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -o console_output_style=count $(PYTEST_ARGS)

# what CI runs: the same suite with two CPU-bound processes beside it (a loaded 2-core machine);
# the time bounds in the tests must hold there too. The hogs are ended however pytest ends.
test-loaded: install-test browser
	$(BIN)/ruff check .
	sh -c 'while :; do :; done' & h1=$$!; sh -c 'while :; do :; done' & h2=$$!; \
	  $(BIN)/python -m pytest -q -o console_output_style=count $(PYTEST_ARGS); rc=$$?; kill $$h1 $$h2; exit $$rc

# LeRobot (lerobot-record, lerobot-replay, a policy) with this project's plugins, in a venv of its own
# (.venv-lerobot: LeRobot pins torch, packaging and setuptools apart from the main test tools): `make lerobot`
# installs fdcontrol[lerobot] and every plugin in plugins/ editable (first time: the torch download, see
# README); `make test-lerobot` runs tests/lerobot there
LR_VENV := .venv-lerobot
PLUGINS := $(wildcard plugins/*/pyproject.toml)
$(LR_VENV)/.installed: pyproject.toml $(PLUGINS)
	test -x $(LR_VENV)/bin/python || $(PYTHON) -m venv $(LR_VENV)
	$(LR_VENV)/bin/python -m pip install -q --no-cache-dir -e '.[lerobot]' 'pytest>=8,<10' $(foreach p,$(PLUGINS),-e $(dir $(p)))
	touch $@

lerobot: $(LR_VENV)/.installed

test-lerobot: lerobot
	$(LR_VENV)/bin/python -m pytest -q -o console_output_style=count tests/lerobot $(PYTEST_ARGS)

bench: install-test  # the benchmarks use the experiments, the drivers and the test fixtures
	$(BIN)/python benchmarks/bench_mappings.py

# the README's "Measured here" numbers: runs the speed benchmarks (minutes), rewrites the section and
# docs/measured.json; e.g. `make measure MEASURE_ARGS="--only ws"` or `MEASURE_ARGS=--quick`
measure: install-test
	$(BIN)/python scripts/measure.py $(MEASURE_ARGS)

# mutation testing (mutmut) of the safety-critical modules, each with the tests that cover it: kill rate
# per module and the surviving mutants (long: tens of minutes; not part of make test), e.g.
# `make mutation MUTATION_ARGS="--only supervisor,auth"`; docs/testing.md lists the equivalent mutants
mutation: install-test
	$(BIN)/python scripts/mutation.py $(MUTATION_ARGS)

image:
	$(HOST_PYTHON) scripts/container.py image --tag $(IMAGE) --base $(BASE) --extras $(EXTRAS)

image-test: image
	$(HOST_PYTHON) scripts/container.py test --tag $(IMAGE)

# removes the image and the untagged images earlier builds left (about 1.2 GB each); the base stays
image-clean:
	$(HOST_PYTHON) scripts/container.py clean --tag $(IMAGE)

clean:
	rm -rf $(VENV) $(LR_VENV) build *.egg-info
