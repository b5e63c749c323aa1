"""Optional dependencies, grouped into the package's extras.

``pip install fdcontrol`` gives the library (numpy, scipy, pin): the models, mappings, laws,
limits, the loop and ``fdcontrol analyze``. Everything else is an extra (pyproject.toml):

* ``server`` — the REST/WebSocket service, its client and recording (``fdcontrol serve``),
* ``mujoco`` — the simulated arm (the service's default robot),
* ``ros2`` — the ROS 2 driver (Cyclone DDS), ``ur`` — the UR driver (ur_rtde),
* ``record`` — MCAP recording and reading alone (also in ``server``),
* ``experiments`` — ``fdcontrol experiments`` and ``fdcontrol plot``,
* ``fast`` — the compiled default limits (numba; without it the same limits run as Python loops),
* ``foxglove`` — the live Foxglove server (``fdcontrol serve --foxglove PORT``, Foxglove's SDK),
* ``spacemouse`` — a 3-D mouse for ``fdcontrol teleop spacemouse`` (pyspacemouse),
* ``all`` — every one of them.

A part whose extra is missing raises :class:`MissingExtra` at import, one line naming the extra
to install.
"""

from __future__ import annotations

import importlib.util

#: extra → the modules it brings (import names), for messages and tests
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "uvicorn", "websockets", "pydantic", "pydantic_settings", "yaml", "httpx", "msgpack",
               "orjson", "mcap", "prometheus_client", "ruckig"),
    "mujoco": ("mujoco",),
    "ros2": ("cyclonedds",),
    "ur": ("rtde_control", "rtde_receive"),
    "record": ("mcap",),
    "experiments": ("matplotlib", "tqdm", "mpmath", "mcap"),
    "fast": ("numba",),
    "env": ("gymnasium",),
    "task": ("ruckig",),
    "franka": ("pylibfranka",),
    "foxglove": ("foxglove",),
    "spacemouse": ("pyspacemouse",),
    "lerobot": ("lerobot",),
}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""

    def __init__(self, extra: str, what: str, module: str | None = None) -> None:
        self.extra, self.what, self.module = extra, what, module
        needs = f" needs {module!r}, which is not installed" if module else " is not installed"
        super().__init__(f"{what}{needs}: pip install 'fdcontrol[{extra}]'", name=module)


def missing(extra: str, what: str, exc: ImportError) -> ImportError:
    """For an ``ImportError`` caught at an optional import (``raise missing(...) from exc``): the
    :class:`MissingExtra` when a module of ``extra`` is what is missing, else ``exc`` itself (a broken
    import elsewhere is not blamed on an extra)."""
    top = (exc.name or "").split(".")[0]
    if top and top not in EXTRAS[extra]:
        return exc
    return MissingExtra(extra, what, top or None)


def require(extra: str, what: str) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` can be imported (checked without
    importing them)."""
    for module in EXTRAS[extra]:
        if importlib.util.find_spec(module) is None:
            raise MissingExtra(extra, what, module)


def available(extra: str) -> bool:
    """Every module of ``extra`` is installed."""
    return all(importlib.util.find_spec(m) is not None for m in EXTRAS[extra])


__all__ = ["EXTRAS", "MissingExtra", "available", "missing", "require"]
