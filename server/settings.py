"""Service settings: one pydantic model, from defaults < YAML file < environment < CLI flags.

Environment variables are the field names upper-cased with the prefix ``FDCONTROL_``
(e.g. ``FDCONTROL_GAMMA=500``, ``FDCONTROL_STIFFNESS='[200,200,200,50,50,50]'``); ``null`` is None, as
in the YAML file (``FDCONTROL_WORKSPACE_BOX=null``: no workspace box);
``FDCONTROL_CONFIG`` names a YAML file with the same keys.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from fdcontrol.control.laws import LAWS
from fdcontrol.limits import LIMITS
from fdcontrol.limits.safety import check_limit_names
from fdcontrol.loop.build import franka_rules
from fdcontrol.loop.integrators import INTEGRATORS
from fdcontrol.loop.parameters import declared
from fdcontrol.mappings import mapping_names
from fdcontrol.model.robot import ModelError
from fdcontrol.model.virtual import GAMMA_STRAIGHT, check_gamma
from fdcontrol.params import Param, unknown_names

MIN_TOKEN = 16  # characters of an API token
TOKEN_HINT = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(24))'"

# the name types are built once, here, from the registries (reading one loads the installed
# plugins, entry points "fdcontrol.plugins", first); settings, the API schema and PATCH /config
# all use these types
MappingName = Literal[mapping_names()]  # type: ignore[valid-type]  # the registered mappings
ModeName = Literal[LAWS.names()]  # type: ignore[valid-type]  # the registered control laws
LimitName = Literal[LIMITS.names()]  # type: ignore[valid-type]  # the registered limits
IntegratorName = Literal[INTEGRATORS.names()]  # type: ignore[valid-type]  # the registered integrators
Vec6 = Annotated[list[Annotated[float, Field(ge=0, le=1e5, allow_inf_nan=False)]],
                 Field(min_length=6, max_length=6)]

Coord3 = Annotated[list[Annotated[float, Field(allow_inf_nan=False, ge=-100, le=100)]],
                  Field(min_length=3, max_length=3)]


class PlaneSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    point: Coord3 = Field(description="a point of the plane (m, base frame)")
    normal: Coord3 = Field(description="normal towards the allowed side (base frame, normalised)")


class SphereSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    center: Coord3 = Field(description="m, base frame")
    radius: float = Field(ge=0, le=100, allow_inf_nan=False, description="m")


class LinkLoadSpec(BaseModel):
    """A repulsive spring–damper keeping a link frame's origin `margin` outside an obstacle
    (fdcontrol.control.link_loads): F = k (margin − d) − b·(approach speed) inside the margin."""

    model_config = ConfigDict(extra="forbid")

    link: str = Field(min_length=1, max_length=200, description="frame name of the robot description")
    plane: PlaneSpec | None = None
    sphere: SphereSpec | None = None
    margin: float = Field(0.05, ge=0, le=2, allow_inf_nan=False, description="m")
    stiffness: float = Field(100.0, ge=0, le=1e5, allow_inf_nan=False, description="N/m")
    damping: float = Field(0.0, ge=0, le=1e4, allow_inf_nan=False, description="N·s/m, against approach")

    @model_validator(mode="after")
    def _one_obstacle(self) -> LinkLoadSpec:
        if (self.plane is None) == (self.sphere is None):
            raise ValueError("a link load needs exactly one of 'plane' or 'sphere'")
        return self


class WorkspaceBoxSpec(BaseModel):
    """The box the tip (and ``workspace_links``) stays inside (fdcontrol.control.workspace), base frame."""

    model_config = ConfigDict(extra="forbid")

    min: Coord3 = Field(description="lower corner (m, base frame)")
    max: Coord3 = Field(description="upper corner (m, base frame); > min on every axis")
    margin: float = Field(0.05, ge=0, le=1, allow_inf_nan=False, description="m: the repulsive load acts inside it")
    stiffness: float = Field(2000.0, ge=0, le=1e5, allow_inf_nan=False, description="N/m")
    damping: float = Field(90.0, ge=0, le=1e4, allow_inf_nan=False, description="N·s/m, against approach")

    @model_validator(mode="after")
    def _ordered(self) -> WorkspaceBoxSpec:
        bad = [a for a, lo, hi in zip("xyz", self.min, self.max, strict=True) if not lo < hi]
        if bad:
            raise ValueError(f"workspace box min must be < max on every axis; not on {', '.join(bad)}")
        return self


class BoxSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min: Coord3 = Field(description="m, base frame")
    max: Coord3 = Field(description="m, base frame; > min on every axis (a positive size)")

    @model_validator(mode="after")
    def _ordered(self) -> BoxSpec:
        bad = [a for a, lo, hi in zip("xyz", self.min, self.max, strict=True) if not lo < hi]
        if bad:
            raise ValueError(f"box min must be < max on every axis (a positive size); not on {', '.join(bad)}")
        return self


class KeepOutSpec(BaseModel):
    """A volume the tip (and ``workspace_links``) stays out of: a sphere, a box or the far side of a plane."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, min_length=1, max_length=100, description="shown on the dashboard")
    sphere: SphereSpec | None = None
    box: BoxSpec | None = None
    plane: PlaneSpec | None = Field(None, description="the side the normal points to is allowed")
    margin: float = Field(0.05, ge=0, le=1, allow_inf_nan=False, description="m")
    stiffness: float = Field(2000.0, ge=0, le=1e5, allow_inf_nan=False, description="N/m")
    damping: float = Field(90.0, ge=0, le=1e4, allow_inf_nan=False, description="N·s/m, against approach")

    @model_validator(mode="after")
    def _one_volume(self) -> KeepOutSpec:
        if sum(v is not None for v in (self.sphere, self.box, self.plane)) != 1:
            raise ValueError("a keep-out volume needs exactly one of 'sphere', 'box' or 'plane'")
        if self.sphere is not None and self.sphere.radius <= 0:
            raise ValueError("a keep-out sphere needs a radius > 0")
        return self


#: the structured parameters' API types (kind "spec" in the declarations)
SPEC_TYPES: dict[str, Any] = {
    "link_loads": list[LinkLoadSpec],
    "driver_options": dict[str, Any],
    "workspace_box": WorkspaceBoxSpec,
    "workspace_links": list[Annotated[str, Field(min_length=1, max_length=200)]],
    "keep_out": list[KeepOutSpec],
}


def _bounds_schema(p: Param) -> dict[str, float]:
    keys = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum"}
    return {keys[b]: getattr(p, b) for b in keys if getattr(p, b) is not None}


def annotation(p: Param) -> Any:
    """The pydantic type of a declared parameter. Its values are checked by the declaration itself
    (``Param.check`` after pydantic's type coercion), so the service refuses exactly what the library
    refuses, with the same message; bounds and sizes are also written into the JSON schema."""
    check = AfterValidator(p.check)
    if p.kind == "float":
        t: Any = Annotated[float, check, Field(json_schema_extra=_bounds_schema(p))]
    elif p.kind == "int":
        t = Annotated[int, check, Field(json_schema_extra=_bounds_schema(p))]
    elif p.kind == "bool":
        t = bool
    elif p.kind == "str":
        t = Annotated[str, Field(min_length=1, max_length=1000)]
    elif p.kind == "choice":
        t = Literal[p.options()]  # type: ignore[valid-type]
    elif p.kind == "vector":
        item = Annotated[float, Field(json_schema_extra=_bounds_schema(p))]
        t = Annotated[list[item], check, Field(json_schema_extra={"minItems": p.size, "maxItems": p.size}
                                                if p.size else {"maxItems": p.max_items})]
    elif p.kind == "names":
        t = Annotated[list[Literal[p.options()]], Field(max_length=p.max_items)]  # type: ignore[valid-type]
    else:
        t = SPEC_TYPES[p.name]
        if p.max_items and get_origin(t) is list:
            t = Annotated[t, Field(max_length=p.max_items)]
    return t | None if p.nullable else t


def field_of(p: Param) -> Any:
    """The pydantic field of a declared parameter: default, description, unit and policy (in the schema)."""
    default = p.default
    factory = (lambda d=default: type(d)(d)) if isinstance(default, list | dict) else None
    extra = {"unit": p.unit, "policy": p.policy, "owner": p.owner}
    desc = f"{p.description}{f' ({p.unit})' if p.unit else ''}; policy: {p.policy}"
    if factory is not None:
        return Field(default_factory=factory, description=desc, json_schema_extra=extra)
    return Field(default, description=desc, json_schema_extra=extra)


#: every parameter of the loop and its parts, as declared (fdcontrol.loop.parameters)
PARAMS: dict[str, Param] = declared()


class _Checks(BaseModel):
    """Checks across fields, the same functions the library runs (same messages)."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("limits", check_fields=False)
    @classmethod
    def _limits_complete(cls, v: list[str]) -> list[str]:
        return list(check_limit_names(v))  # the composition order; required ones present

    @model_validator(mode="after")
    def _jerk_for_franka(self) -> Any:
        """A Franka rejects references that are not smooth in jerk: the jerk limit is always on for it."""
        limits, rate = franka_rules(self.driver, list(self.limits), self.rate,  # type: ignore[attr-defined]
                                    "rate" in self.model_fields_set)  # the library's rules, one place
        if limits != list(self.limits):  # type: ignore[attr-defined]
            self.limits = limits
        if rate != self.rate:  # type: ignore[attr-defined]
            self.rate = rate  # the robot's clock
        return self

    @field_validator("robot", check_fields=False)
    @classmethod
    def _robot_known(cls, v: str) -> str:
        from fdcontrol.model.robot import SHIPPED, is_mjcf, unknown_robot

        if v not in SHIPPED and not v.endswith(".urdf") and not is_mjcf(v):
            raise ValueError(unknown_robot(v))
        return v

    @field_validator("tool_inertia", check_fields=False)
    @classmethod
    def _tool_inertia_physical(cls, v: list[float]) -> list[float]:
        from fdcontrol.control.tool_inertia import inertia_matrix

        inertia_matrix(v)  # a rigid body's inertia, the sensor model's own check
        return v

    @model_validator(mode="after")
    def _gamma_in_range(self) -> Any:
        try:  # γ's bound depends on the algorithm: the virtual model's own check, one place
            check_gamma(self.gamma, self.algorithm)  # type: ignore[attr-defined]
            check_gamma(self.gamma_straight, self.algorithm, GAMMA_STRAIGHT)  # type: ignore[attr-defined]
        except ModelError as exc:
            raise ValueError(str(exc)) from None
        return self


#: Everything the loop runs with, generated from the declarations (one field per parameter).
ControlParams: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "ControlParams", __base__=_Checks, __doc__="The loop's parameters, each declared once by its part "
    "(GET /params lists them with unit, bounds and run-time policy).",
    **{name: (annotation(p), field_of(p)) for name, p in PARAMS.items()})


class Settings(ControlParams, BaseSettings):
    """Service settings = control parameters + process options."""

    model_config = SettingsConfigDict(env_prefix="FDCONTROL_", extra="forbid", env_parse_none_str="null")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    autostart: bool | None = Field(None, description="start the loop at startup (default: "
                                   "only on the simulated robot)")
    realtime: bool = Field(True, description="try SCHED_FIFO for the loop thread (ignored where not permitted)")
    api_nice: int | None = Field(-10, ge=-20, le=19, description="niceness of the API process (fdcontrol serve): "
                                 "its event loop hands every wrench to the loop and every state to the WebSockets, "
                                 "so a negative value keeps CPU-bound neighbours from delaying them; null: "
                                 "unchanged; ignored where not permitted")
    api_realtime: bool = Field(False, description="try SCHED_FIFO for the API process's event loop thread "
                               "(fdcontrol serve; below the loop's priority): it takes every wrench and sends every "
                               "state; for a machine that runs nothing else (its CPU time then shares the loop's "
                               "real-time budget); ignored where not permitted")
    state_decimation: int = Field(10, ge=1, le=10000, description="default WS decimation")
    max_batch: int = Field(10_000, ge=1, le=1_000_000)
    switch_interval: float = Field(2e-4, gt=0, le=0.01, description="sys.setswitchinterval (s)")
    record_dir: str = Field("recordings", description="directory of MCAP recordings (POST /recording/start)")
    record: str | None = Field(None, description="record from startup to this file (a bare name goes "
                               "into record_dir)")
    # ---- Foxglove live (server/foxglove.py)
    foxglove_port: int | None = Field(None, ge=0, le=65535, description="run a Foxglove WebSocket server on "
                                      "this port (0: any free port; null: off)")
    foxglove_host: str = Field("127.0.0.1", description="address the Foxglove server binds")
    foxglove_remote: bool = Field(False, description="allow a non-loopback foxglove_host: the Foxglove "
                                  "protocol has no authentication, anyone who reaches the port sees the arm")
    foxglove_rate: float = Field(50.0, ge=1, le=200, description="messages per second to Foxglove (Hz)")

    @model_validator(mode="after")
    def _simulated_start_box(self) -> Settings:
        """A simulated arm starts inside a workspace box (:func:`start_workspace_box`) unless one is given
        (``workspace_box: null`` for none) or ``collision_links`` is ``all`` (a box that holds every link
        is the operator's to size). Set without marking the field as given: a box derived from
        one robot is never carried over as if chosen for another (load_settings merges given fields)."""
        if "workspace_box" not in self.model_fields_set and self.workspace_box is None and \
                self.collision_links != "all":  # type: ignore[has-type]  # (all: the box must hold every link)
            box = start_workspace_box(self.robot, self.base, self.tip, self.driver,  # type: ignore[attr-defined]
                                      self.driver_options)  # type: ignore[attr-defined]
            if box is not None:
                self.__dict__["workspace_box"] = WorkspaceBoxSpec.model_validate(box)
        return self

    def record_path(self) -> Path:
        p = Path(self.record or "")
        if p.parent == Path("."):
            Path(self.record_dir).mkdir(parents=True, exist_ok=True)
            return (Path(self.record_dir) / p).resolve()
        return p.resolve()
    # ---- access (server/auth.py)
    token: SecretStr | None = Field(None, description="API token; required as 'Authorization: Bearer' "
                                    "(or the dashboard's session cookie) when set")
    token_file: str | None = Field(None, description="file holding the API token (first line)")
    public_read: bool = Field(False, description="allow GET of status routes and /ws/state without a token")
    allowed_origins: list[str] = Field(default_factory=list, description="extra browser origins allowed "
                                       "besides the service's own (e.g. 'https://cell.example:8443')")
    allowed_hosts: list[str] = Field(default_factory=list, description="extra Host names accepted besides "
                                     "localhost, 127.0.0.1, [::1] and the bound host")
    max_body_bytes: int = Field(4 << 20, ge=1024, le=1 << 30, description="largest REST request body")
    max_ws_message_bytes: int = Field(64 << 10, ge=1024, le=16 << 20, description="largest WebSocket message")
    max_json_depth: int = Field(32, ge=4, le=200, description="deepest JSON nesting accepted")
    auth_burst: int = Field(10, ge=1, le=10_000, description="failed authentication attempts a client may "
                            "make at once before it is throttled (429)")
    auth_rate: float = Field(1.0, gt=0, le=1000, description="failed attempts per second a throttled client "
                             "regains (1/s)")
    trusted_proxies: list[str] = Field(default_factory=list, description="addresses of reverse proxies whose "
                                       "X-Forwarded-For names the client (else the header is ignored)")
    lease_timeout: float = Field(2.0, gt=0, le=3600, description="the control lease ends this long after its "
                                 "holder's last command (s)")
    max_stream_rate: float | None = Field(None, ge=10, le=100_000, description="messages per second one "
                                          "WebSocket may send (default: the loop's rate, one per cycle); a "
                                          "faster sender is slowed down by back-pressure")
    # ---- supervision (server/supervisor.py)
    supervise: bool = Field(True, description="restart a dead or stuck loop process, into hold")
    max_restarts: int = Field(5, ge=0, le=1000, description="crashed loop processes replaced per restart_window "
                              "(a stuck process the supervisor kills is replaced without counting)")
    restart_window: float = Field(300.0, gt=0, description="s")

    def with_params(self, params: dict[str, Any]) -> Settings:
        """These settings with the run-time parameters ``params`` (as the loop process reports them:
        JSON-like values); the structured ones (workspace box, keep-out volumes, link loads) become
        their API types again."""
        typed = {k: v if v is None or k not in SPEC_TYPES else TypeAdapter(SPEC_TYPES[k]).validate_python(v)
                 for k, v in params.items()}
        return self.model_copy(update=typed)

    def api_token(self) -> str | None:
        """The token from `token` or, else, the first line of `token_file` (ValueError when that
        line is blank or shorter than MIN_TOKEN: a token file never means "no authentication")."""
        if self.token is not None:
            if not self.token.get_secret_value().strip():
                raise ValueError(f"the token is empty: give a token of at least {MIN_TOKEN} characters, or none "
                                 f"at all to run open on loopback ({TOKEN_HINT})")
            if len(self.token.get_secret_value().strip()) < MIN_TOKEN:
                raise ValueError(f"the token must be at least {MIN_TOKEN} characters ({TOKEN_HINT})")
            return self.token.get_secret_value()
        if self.token_file:
            lines = Path(self.token_file).read_text().splitlines()
            token = lines[0].strip() if lines else ""
            if not token:
                raise ValueError(f"token_file {self.token_file}: the first line is blank (it must hold the token)")
            if len(token) < MIN_TOKEN:
                raise ValueError(f"token_file {self.token_file}: the token must be at least {MIN_TOKEN} "
                                 f"characters ({TOKEN_HINT})")
            return token
        return None


def start_workspace_box(robot: str, base: str | None, tip: str | None, driver: str,
                        driver_options: dict[str, Any]) -> dict[str, Any] | None:
    """The workspace box a simulated arm starts with (fdcontrol.control.workspace.start_box around the
    tip at its start pose: ``driver_options.q0``, else the shipped robot's home pose); None for a real
    arm's driver (its cell is not known here: configure one), or when the robot cannot be loaded (its
    own error is reported where it is built)."""
    import numpy as np

    from fdcontrol.control.workspace import start_box
    from fdcontrol.drivers.registry import DRIVERS
    from fdcontrol.model.robot import HOME, RobotModel

    try:
        if driver not in DRIVERS or not DRIVERS.get(driver).simulated:
            return None
        model = RobotModel.resolve(robot, base, tip)
        q0 = driver_options.get("q0", HOME.get(model.name))
        return start_box(model, np.zeros(model.dof) if q0 is None else np.asarray(q0, dtype=float))
    except Exception:  # an unknown robot, frame or q0, a driver that cannot be imported: reported when built
        return None


def follow_start_box(current: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` with the start box of the new robot when the robot (or its frames, or the start pose)
    changes and the workspace box is still the start box of the old one; else ``changes`` as given."""
    keys = ("robot", "base", "tip", "driver_options")
    if "workspace_box" in changes or not any(k in changes and changes[k] != current.get(k) for k in keys):
        return changes
    old = start_workspace_box(*(current.get(k) for k in ("robot", "base", "tip", "driver")),
                              current.get("driver_options") or {})
    if old is None or current.get("workspace_box") != WorkspaceBoxSpec.model_validate(old).model_dump():
        return changes
    new = {**current, **changes}
    return {**changes, "workspace_box": start_workspace_box(new["robot"], new.get("base"), new.get("tip"),
                                                            new["driver"], new.get("driver_options") or {})}


def load_settings(config: str | None = None, **overrides: Any) -> Settings:
    """Defaults < YAML (`config` or $FDCONTROL_CONFIG) < environment < `overrides`."""
    path = config or os.environ.get("FDCONTROL_CONFIG")
    data: dict[str, Any] = {}
    if path:
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"config file not found: {p}")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            raise ValueError(f"config file {p}{where}: malformed YAML ({getattr(exc, 'problem', exc)})") from None
        if not isinstance(data, dict):
            raise ValueError(f"config file {p} must hold a mapping of settings")
    valid = set(Settings.model_fields)
    unknown_env = {k[len("FDCONTROL_"):].lower() for k in os.environ if k.startswith("FDCONTROL_")} - valid - {
        "config"}
    for source, names in ((f"in {path}", set(data)), ("", set(overrides)), ("in the environment (FDCONTROL_…)",
                                                                           unknown_env)):
        if names - valid:
            raise ValueError(f"{unknown_names(names, valid, 'setting')}{' ' + source if source else ''}")
    env = Settings()  # environment over defaults
    merged = {**data, **{k: getattr(env, k) for k in env.model_fields_set},
              **{k: v for k, v in overrides.items() if v is not None}}
    return Settings.model_validate(merged)


__all__ = ["PARAMS", "ControlParams", "Settings", "ValidationError", "annotation", "field_of", "follow_start_box",
           "load_settings", "start_workspace_box"]
