"""GET/PATCH /config and GET /params: the loop's parameters, each declared once by its part
(fdcontrol.params; the table in fdcontrol.loop.parameters, the settings model in server/settings.py).

A change is checked against each parameter's run-time policy (``live``, ``tighten``, ``holding``,
``stopped``, ``startup``) here, for a precise answer, and again in the loop process against the
loop itself (server/runtime.py, the same function): 409 when the loop's phase does not allow it
(stopped / holding at standstill / moving), 422 when the value never may be (a safety bound
loosened beyond its startup value, a limit removed). Nothing executable or file-system shaped
comes from the network: driver, driver options and frames are ``startup``.
"""

from __future__ import annotations

import difflib
from typing import Any, Optional

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from fdcontrol.model.robot import SHIPPED
from fdcontrol.params import POLICY_TEXT, change_errors, error_message
from fdcontrol.server.errors import CONFLICT, ERRORS, clip
from fdcontrol.server.routers.deps import live, phase, worker
from fdcontrol.server.settings import PARAMS, ControlParams, Settings

router = APIRouter(tags=["config"])

ConfigPatch = create_model(  # every parameter, optional and strict, for PATCH /config (unknown names: below)
    "ConfigPatch", __config__=ConfigDict(extra="allow", strict=True),
    **{k: (Optional[f.annotation], None) for k, f in ControlParams.model_fields.items()},  # noqa: UP045
)


class ParamInfo(BaseModel):
    name: str
    kind: str = Field(description="float, int, bool, str, choice, vector, names or spec")
    default: Any
    unit: str
    description: str
    policy: str = Field(description="when it may change at run time: live, tighten, holding, stopped, startup")
    owner: str = Field(description="the part that declares it")
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    size: int | None = None
    choices: list[str] | None = None
    nullable: bool | None = None


class ParamList(BaseModel):
    params: list[ParamInfo]
    policies: dict[str, str] = Field(description="what each run-time policy allows")


def unknown_parameter(name: str) -> str:
    """The refusal of a name no part declares: the closest declared one and every valid name, never the
    name itself (error replies do not echo the input)."""
    close = difflib.get_close_matches(name, list(PARAMS), 1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown parameter{hint}; valid: {', '.join(sorted(PARAMS))}"


def startup_params(request: Request) -> dict[str, Any]:
    """The parameters the service started with: the bounds of ``tighten`` parameters."""
    return request.app.state.settings.model_dump(include=set(PARAMS))


@router.get("/params", response_model=ParamList)
def list_params() -> dict[str, Any]:
    """Every parameter with its kind, default, bounds, unit, description and run-time policy; the
    service's own process options (network, access, supervision) are ``startup``."""
    own = [{"name": k, "kind": "service", "default": f.get_default(call_default_factory=True) if
            not isinstance(f.default, BaseModel) else None, "unit": "", "description": f.description or "",
            "policy": "startup", "owner": "service"}
           for k, f in Settings.model_fields.items() if k not in PARAMS]
    for o in own:  # secrets are never listed with a value
        if o["name"] in ("token",):
            o["default"] = None
    return {"params": [p.describe() for p in PARAMS.values()] + own, "policies": POLICY_TEXT}


@router.get("/config", response_model=ControlParams)
def get_config(request: Request) -> dict[str, Any]:
    return worker(request).params


@router.patch("/config", response_model=ControlParams, responses={**ERRORS, **CONFLICT})
def patch_config(patch: ConfigPatch, request: Request) -> Any:  # type: ignore[valid-type]
    """Change parameters under their run-time policies (GET /params): ``holding`` ones (what the sensor
    or the law means) only while the arm is held at standstill, ``stopped`` ones with the loop stopped,
    ``startup`` ones never; ``tighten`` ones toward safer values only. All problems are reported at once."""
    extra = patch.model_extra or {}  # type: ignore[attr-defined]
    if extra:  # a misspelled name is an error that lists the valid ones, never silently dropped (nor echoed)
        return JSONResponse(status_code=422, content={"detail": [{"loc": ["body", "(unknown field)"], "msg": clip(
            unknown_parameter(str(k)))} for k in list(extra)[:20]]})
    changes = patch.model_dump(exclude_unset=True)  # type: ignore[attr-defined]
    current = worker(request).params
    errors: list[dict[str, Any]] = []
    startup = startup_params(request)
    robot = changes.get("robot")
    named = robot is not None and robot != startup["robot"] and robot not in SHIPPED  # no file paths from the network
    if named:  # one message (the settings' own would add that a file may be given: not over the network)
        errors.append({"loc": ["body", "robot"], "msg": f"unknown robot {robot!r}: over the API the robot is "
                       f"{startup['robot']!r} (the one the service started with) or a shipped one: "
                       f"{', '.join(SHIPPED)}; a robot description file is given at startup (--robot PATH, or "
                       "robot: in the config file)"})
    try:  # the same model the loop process validates with: the same refusals, the same messages
        new = ControlParams.model_validate({**current, **changes}).model_dump(include=set(changes))
    except ValidationError as exc:
        errors += [{"loc": ["body", *map(str, e["loc"])], "msg": clip(error_message(e["msg"]))}
                   for e in exc.errors()[:20] if not (named and tuple(e["loc"]) == ("robot",))]
        new = changes
    conflicts, refusals = change_errors(PARAMS, new, current, startup, phase(request),
                                        at_rest=not any(worker(request).state()[0].qd_ref))
    errors += [{"loc": ["body", k], "msg": m} for k, m in refusals]
    if errors:
        return JSONResponse(status_code=422, content={"detail": errors})
    if conflicts:
        return JSONResponse(status_code=409, content={"detail": clip("; ".join(m for _, m in conflicts))})
    return live(request).update(changes)
