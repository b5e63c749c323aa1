"""The JSON a benchmark writes with ``--json PATH``: its numbers, its exact command and the machine.

Imported by the benchmark scripts as a sibling module (a script's own folder is first on
``sys.path``). ``scripts/measure.py`` collects these files into ``docs/measured.json`` and renders
the README's measured section from them.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

SCHEMA = 1


def _cpuinfo() -> dict:
    """CPU model, nominal clock (MHz) and whether a hypervisor is present, from /proc/cpuinfo (Linux)."""
    out: dict = {"model": platform.processor() or platform.machine(), "mhz": None, "hypervisor": None}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name":
            out["model"] = value
        elif key == "cpu MHz" and out["mhz"] is None:
            out["mhz"] = float(value)
        elif key == "flags" and out["hypervisor"] is None:
            out["hypervisor"] = "hypervisor" in value.split()
    return out


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict:
    """Facts that change numbers: CPUs usable by this process, CPU model, OS, Python and library versions."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {"cpu_count": os.cpu_count(), "cpus_usable": usable, **_cpuinfo(), "platform": platform.platform(),
            "python": platform.python_version(), "python_implementation": platform.python_implementation(),
            "pinocchio": _version("pin"), "numpy": _version("numpy"), "loadavg": load}


def fifo_threads(pid: int) -> int:
    """How many threads of process ``pid`` run under SCHED_FIFO (0 where it cannot be read)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return 0
    n = 0
    for tid in tids:
        try:
            n += os.sched_getscheduler(tid) == os.SCHED_FIFO
        except (AttributeError, OSError):  # not Linux, or the thread ended meanwhile
            pass
    return n


def clean(x):
    """``x`` with numpy scalars as Python numbers and NaN/∞ as None (JSON has neither)."""
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [clean(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, str):  # numpy scalar
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_json(path: str | None, bench: str, results: dict) -> None:
    """Write ``results`` of benchmark ``bench`` with its command line and the machine to ``path`` (if given)."""
    if not path:
        return
    payload = {"schema": SCHEMA, "bench": bench, "argv": list(sys.argv), "executable": sys.executable,
               "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
               "results": clean(results)}
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n")
    tmp.replace(p)  # whole or nothing: a reader never sees half a file
