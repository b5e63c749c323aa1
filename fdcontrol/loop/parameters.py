"""Every parameter of the loop and its parts, collected from their declarations (fdcontrol.params).

Each part declares its own parameters next to its code (``PARAMS``): the robot model, the
driver, the mapping and each registered mapping (plugins included), the integrator, the
solver, the loop, the control law, the sensor model, the safety limits, the posture task and
the link loads; a registered law, limit or integrator class may declare more. This module only
collects them, in that order, into one table keyed by name: the service's settings, API
schemas, parameter listing, CLI flags and the recorded configuration are built from it.
"""

from __future__ import annotations

from fdcontrol.control import gains, inputs, law, link_loads, posture, sensing, tool_inertia, trajectory, workspace
from fdcontrol.control.laws import LAWS
from fdcontrol.drivers import registry as drivers
from fdcontrol.limits import LIMITS, safety
from fdcontrol.loop import integrators, solvers
from fdcontrol.mappings import MAPPINGS, mapping_names, mapping_params
from fdcontrol.mappings import PARAMS as MAPPING
from fdcontrol.model import robot
from fdcontrol.params import Param


def declared() -> dict[str, Param]:
    """name → declaration of every parameter, registries read now (plugins included).

    Two parts may share a parameter only by sharing its declaration (the same record)."""
    groups: list[tuple[Param, ...]] = [robot.PARAMS, drivers.PARAMS, MAPPING]
    groups += [mapping_params(n) for n in mapping_names()]
    groups += [integrators.PARAMS, solvers.PARAMS, inputs.PARAMS, law.PARAMS, sensing.PARAMS, safety.PARAMS,
               posture.PARAMS, link_loads.PARAMS, workspace.PARAMS, trajectory.PARAMS, gains.PARAMS,
               tool_inertia.PARAMS]
    for registry in (LAWS, LIMITS, integrators.INTEGRATORS, MAPPINGS):
        if registry is not MAPPINGS:
            groups += [tuple(getattr(registry.get(n), "PARAMS", ())) for n in registry.names()]
    table: dict[str, Param] = {}
    for group in groups:
        for p in group:
            seen = table.setdefault(p.name, p)
            if seen is not p and seen != p:
                raise ValueError(f"parameter {p.name!r} is declared twice ({seen.owner}, {p.owner}) "
                                 "with different fields")
    return table


def defaults() -> dict[str, object]:
    """Every parameter's default (copies: lists may be changed by the caller)."""
    return {k: (list(p.default) if isinstance(p.default, list) else p.default) for k, p in declared().items()}


__all__ = ["declared", "defaults"]
