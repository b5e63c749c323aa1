"""GET /options: the registered names of each family, for the dashboard's selects.

Read from the registries on every request, so a mapping, control law, limit, integrator or
driver registered anywhere (a plugin included) shows up without editing the dashboard. A limit
also says whether it is required (and why): the dashboard cannot offer to leave it out.
"""

from __future__ import annotations

from fastapi import APIRouter

from fdcontrol.control.laws import LAWS
from fdcontrol.drivers.registry import DRIVERS
from fdcontrol.limits import LIMITS
from fdcontrol.loop.integrators import INTEGRATORS
from fdcontrol.mappings import MAPPINGS, mapping_names
from fdcontrol.registry import Registry

router = APIRouter(tags=["options"])


def _family(registry: Registry, names: tuple[str, ...] | None = None) -> list[dict[str, str]]:
    return [{"name": n, "description": registry.describe(n)} for n in (names or registry.names())]


def _limits() -> list[dict[str, str]]:
    return [{**o, "required": LIMITS.get(o["name"]).required} for o in _family(LIMITS)]


@router.get("/options", summary="Registered mappings, control laws, limits, integrators and drivers")
def options() -> dict[str, list[dict[str, str]]]:
    return {"mapping": _family(MAPPINGS, mapping_names()), "mode": _family(LAWS), "limit": _limits(),
            "integrator": _family(INTEGRATORS), "driver": _family(DRIVERS)}
