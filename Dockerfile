# fdcontrol service next to a robot driver. Build and check: `make image`, `make image-test`
# (docker where a daemon runs, else podman; see the README's "Container" section).
# Run (simulated arm): docker run --rm -p 8000:8000 -e FDCONTROL_TOKEN="$(openssl rand -hex 24)" fdcontrol
#   (or mount a file and set FDCONTROL_TOKEN_FILE). Binding 0.0.0.0 without a token refuses to start.
# Real arm: mount a YAML config and point FDCONTROL_CONFIG at it (see compose.yaml).
#
# BASE: any image with python3 >= 3.11 and its venv module (python:3.11-slim, or Debian bookworm
# made locally by `make image` with debootstrap where no registry is reachable).
# EXTRAS: the package extras installed (pip install ".[EXTRAS]").
ARG BASE=docker.io/library/python:3.11-slim

FROM ${BASE} AS build
# the label lets `make image` remove this stage's image, which podman keeps after the build (about 1.2 GB);
# the final image does not carry it (it starts from BASE), nor do images built FROM it
LABEL org.fdcontrol.stage=build
ARG EXTRAS=server,mujoco,ros2,fast
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY fdcontrol ./fdcontrol
COPY server ./server
COPY urdf ./urdf
# The build machine's pip configuration and certificate bundle come in as build secrets (never
# stored in a layer); empty secrets mean plain PyPI with the base image's certificates.
RUN --mount=type=secret,id=pip.conf --mount=type=secret,id=ca.crt \
    set -eu; \
    if [ -s /run/secrets/pip.conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip.conf; fi; \
    if [ -s /run/secrets/ca.crt ]; then export PIP_CERT=/run/secrets/ca.crt; fi; \
    /opt/venv/bin/pip install ".[${EXTRAS}]"; \
    /opt/venv/bin/pip uninstall -y -q pip setuptools wheel

# the final image: the base, the virtual environment and a user — no pip, compilers or tests
FROM ${BASE}
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 FDCONTROL_HOST=0.0.0.0 FDCONTROL_PORT=8000
# run-time libraries the wheels expect from the system (pinocchio: OpenMP's libgomp)
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libgomp1 \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
COPY --from=build /opt/venv /opt/venv
# the loop's numba kernels (the compiled limits, solvers, …) are compiled here, once, into the installed
# package's numba cache (the service's first start would otherwise compile them: a minute or more);
# /var/lib/fdcontrol is the working directory (recordings/ goes there: mount a volume to keep them)
RUN python -m fdcontrol.kernels \
    && useradd --create-home --uid 10001 fdcontrol \
    && install -d -o fdcontrol -g fdcontrol /var/lib/fdcontrol

USER fdcontrol
WORKDIR /var/lib/fdcontrol
EXPOSE 8000
# /health answers 503 when the loop process is dead or stuck: urlopen raises, the check fails
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import os, pathlib, urllib.request as u; f = os.environ.get('FDCONTROL_TOKEN_FILE'); t = os.environ.get('FDCONTROL_TOKEN') or (pathlib.Path(f).read_text().split()[0] if f else ''); u.urlopen(u.Request('http://127.0.0.1:%s/health' % os.environ.get('FDCONTROL_PORT', '8000'), headers={'Authorization': 'Bearer ' + t} if t else {}), timeout=2)"
# SIGTERM: uvicorn stops serving, the loop stops (zero velocity to the driver) and its shared memory is freed
STOPSIGNAL SIGTERM
CMD ["fdcontrol", "serve"]
