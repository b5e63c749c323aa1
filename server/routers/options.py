"""GET /options: the registered names of each family, for the dashboard's selects.

Read from the registries on every request, so a mapping, control law, limit or driver
registered anywhere shows up without editing the dashboard.
"""

from __future__ import annotations

from fastapi import APIRouter

from fdcontrol.drivers.registry import DRIVERS
from fdcontrol.laws import LAWS
from fdcontrol.limits import LIMITS
from fdcontrol.mappings import MAPPING_NAMES, MAPPINGS
from fdcontrol.registry import Registry

router = APIRouter(tags=["options"])


def _family(registry: Registry, names: tuple[str, ...] | None = None) -> list[dict[str, str]]:
    return [{"name": n, "description": registry.describe(n)} for n in (names or registry.names())]


@router.get("/options", summary="Registered mappings, control laws, limits and drivers")
def options() -> dict[str, list[dict[str, str]]]:
    return {"mapping": _family(MAPPINGS, MAPPINGS.ordered(MAPPING_NAMES)), "mode": _family(LAWS),
            "limit": _family(LIMITS), "driver": _family(DRIVERS)}
