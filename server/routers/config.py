"""GET/PATCH /config: the loop's run-time settings (server/settings.py ``ControlParams``).

Driver, driver options and base/tip frames are startup configuration only (nothing
executable or file-system shaped from the network); the robot may switch among the startup
one and the shipped ones; safety bounds (``TIGHTEN_ONLY``) may be tightened at run time but
loosened only up to their startup values, and safety sets (``GROW_ONLY``: the composed limits)
may gain members but never lose one the service started with — removing a limit loosens.
"""

from __future__ import annotations

from typing import Any, Optional

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ConfigDict, ValidationError, create_model

from fdcontrol.model.robot import SHIPPED
from fdcontrol.server.errors import CONFLICT, ERRORS, clip
from fdcontrol.server.routers.deps import live, worker
from fdcontrol.server.settings import GROW_ONLY, STARTUP_ONLY, TIGHTEN_ONLY, ControlParams

router = APIRouter(tags=["config"])

ConfigPatch = create_model(  # the run-time ControlParams fields, optional and strict, for PATCH /config
    "ConfigPatch", __config__=ConfigDict(extra="forbid", strict=True),
    **{k: (Optional[f.annotation], None) for k, f in ControlParams.model_fields.items()  # noqa: UP045
       if k not in STARTUP_ONLY},
)


def startup_params(request: Request) -> ControlParams:
    """The loop settings the service started with: the bounds for tighten-only settings."""
    settings = request.app.state.settings
    return ControlParams.model_validate(settings.model_dump(include=set(ControlParams.model_fields)))


@router.get("/config", response_model=ControlParams)
def get_config(request: Request) -> dict[str, Any]:
    return worker(request).params


@router.patch("/config", response_model=ControlParams, responses={**ERRORS, **CONFLICT})
def patch_config(patch: ConfigPatch, request: Request) -> Any:  # type: ignore[valid-type]
    """Run-time settings. Driver, driver options and base/tip frames are startup-only; the robot
    may switch among the shipped ones; safety bounds may be tightened, loosened only up to startup;
    limits may be added, and only those added at run time removed."""
    changes = patch.model_dump(exclude_unset=True)  # type: ignore[attr-defined]
    errors = patch_errors(changes, startup_params(request))
    try:  # validate here for field-named 422s (all problems at once); the loop process validates again
        ControlParams.model_validate({**worker(request).params, **changes})
    except ValidationError as exc:
        errors += [{"loc": ["body", *map(str, e["loc"])], "msg": clip(e["msg"])} for e in exc.errors()[:20]]
    if errors:
        return JSONResponse(status_code=422, content={"detail": errors})
    return live(request).update(changes)


def patch_errors(changes: dict[str, Any], startup: ControlParams) -> list[dict[str, Any]]:
    """Selection among what was configured, and safety bounds no looser than at startup."""
    errors = []
    robot = changes.get("robot")
    if robot is not None and robot != startup.robot and robot not in SHIPPED:
        errors.append({"loc": ["body", "robot"], "msg": f"robot must be {startup.robot!r} (startup) or a "
                       f"shipped one: {', '.join(SHIPPED)}"})
    for k in sorted(TIGHTEN_ONLY & changes.keys()):
        v, bound = changes[k], getattr(startup, k)
        if v is not None and v > bound:
            errors.append({"loc": ["body", k], "msg": f"may be tightened at run time but not loosened "
                           f"beyond the startup value {bound}"})
    for k in sorted(GROW_ONLY & changes.keys()):
        v, kept = changes[k], getattr(startup, k)
        removed = [x for x in kept if v is not None and x not in v]
        if removed:
            errors.append({"loc": ["body", k], "msg": f"may not remove {', '.join(removed)} at run time (that "
                           f"loosens the safety limits): the service started with {', '.join(kept)}"})
    return errors
