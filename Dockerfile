# fdcontrol service next to a robot driver. Build: docker build -t fdcontrol .
# Run (simulated arm): docker run --rm -p 8000:8000 fdcontrol
# Real arm: mount a YAML config and point FDCONTROL_CONFIG at it (see compose.yaml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    FDCONTROL_HOST=0.0.0.0 FDCONTROL_PORT=8000

WORKDIR /opt/fdcontrol
COPY pyproject.toml README.md ./
COPY fdcontrol ./fdcontrol
COPY server ./server
COPY urdf ./urdf
RUN pip install . && useradd --create-home --uid 10001 fdcontrol

USER fdcontrol
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('FDCONTROL_PORT', '8000'), timeout=2)"
CMD ["fdcontrol", "serve"]
