# fdcontrol service next to a robot driver. Build: docker build -t fdcontrol .
# Run (simulated arm): docker run --rm -p 8000:8000 -e FDCONTROL_TOKEN="$(openssl rand -hex 24)" fdcontrol
#   (or mount a file and set FDCONTROL_TOKEN_FILE). Binding 0.0.0.0 without a token refuses to start.
# Real arm: mount a YAML config and point FDCONTROL_CONFIG at it (see compose.yaml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    FDCONTROL_HOST=0.0.0.0 FDCONTROL_PORT=8000

WORKDIR /opt/fdcontrol
COPY pyproject.toml README.md ./
COPY fdcontrol ./fdcontrol
COPY server ./server
COPY urdf ./urdf
# the compiled safety limits are compiled here, once, into the installed package's numba cache
RUN pip install . && python -c "import fdcontrol.limits.compiled" && useradd --create-home --uid 10001 fdcontrol

USER fdcontrol
EXPOSE 8000
# /health answers 503 when the loop process is dead or stuck: urlopen raises, the check fails
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import os, pathlib, urllib.request as u; f = os.environ.get('FDCONTROL_TOKEN_FILE'); t = os.environ.get('FDCONTROL_TOKEN') or (pathlib.Path(f).read_text().split()[0] if f else ''); u.urlopen(u.Request('http://127.0.0.1:%s/health' % os.environ.get('FDCONTROL_PORT', '8000'), headers={'Authorization': 'Bearer ' + t} if t else {}), timeout=2)"
CMD ["fdcontrol", "serve"]
