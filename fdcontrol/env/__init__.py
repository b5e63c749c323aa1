"""The learning interface (optional extra ``env``: gymnasium): policies at 10–50 Hz on the compliant arm.

* :class:`ServiceEnv` — a ``gymnasium.Env`` over a running service (URL and token),
* :class:`SimEnv` — the same in-process on the MuJoCo arm, stepped in simulated time,
* :mod:`fdcontrol.env.spaces` — observation and action spaces (docs/learning.md).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ActionError", "ActionSpec", "ServiceEnv", "SimEnv"]


def __getattr__(name: str) -> Any:  # gymnasium is imported only when an env is used
    if name in ("ActionSpec", "ActionError"):
        from fdcontrol.env import spaces

        return getattr(spaces, name)
    if name == "ServiceEnv":
        from fdcontrol.env.service import ServiceEnv

        return ServiceEnv
    if name == "SimEnv":
        from fdcontrol.env.sim import SimEnv

        return SimEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
