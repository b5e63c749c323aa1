"""The simulated world's operations as the loop process runs them (server/loop_process.py handler "sim");
the HTTP side is server/routers/sim.py. No web framework here: the loop process imports this."""

from __future__ import annotations

from typing import Any

from fdcontrol.drivers.base import SimulatedWorld


def sim_call(driver: Any, op: str, *args: Any) -> Any:
    """Runs in the loop process (server/loop_process.py handler "sim")."""
    if not isinstance(driver, SimulatedWorld):
        return {"error": f"the {type(driver).__name__} driver has no simulated environment"}
    if op == "environment":
        return driver.environment()
    if op == "push":
        driver.set_push(args[0])
        return driver.environment()
    raise ValueError(f"unknown simulation operation {op!r}")


__all__ = ["sim_call"]
