"""Service settings: one pydantic model, from defaults < YAML file < environment < CLI flags.

Environment variables are the field names upper-cased with the prefix ``FDCONTROL_``
(e.g. ``FDCONTROL_GAMMA=500``, ``FDCONTROL_STIFFNESS='[200,200,200,50,50,50]'``);
``FDCONTROL_CONFIG`` names a YAML file with the same keys.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from fdcontrol.control.laws import LAWS
from fdcontrol.limits import LIMITS
from fdcontrol.limits.safety import DEFAULT_LIMITS, check_limit_names
from fdcontrol.loop.integrators import INTEGRATORS
from fdcontrol.mappings import mapping_names

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


#: fields that change the loop's structure: only while it is stopped (else HTTP 409)
NEEDS_STOP = frozenset({"robot", "base", "tip", "rate", "driver", "driver_options"})
#: startup configuration only: file paths, import paths and driver options never come from the network
STARTUP_ONLY = frozenset({"base", "tip", "driver", "driver_options"})
#: safety bounds: PATCH may tighten them (smaller values) but loosen only up to the startup value
TIGHTEN_ONLY = frozenset({"command_timeout", "max_force", "max_torque", "velocity_scale",
                          "max_joint_acceleration", "max_linear_speed", "max_angular_speed"})
#: safety sets, the same rule: PATCH may add members, but never remove one the service started with
GROW_ONLY = frozenset({"limits"})


class ControlParams(BaseModel):
    """Everything PATCH /config may change. Bounds are physical sanity limits."""

    model_config = ConfigDict(extra="forbid")

    robot: str = "ur10"
    base: str | None = None
    tip: str | None = None
    mapping: MappingName = "fd"
    gamma: float = Field(1e3, gt=0, le=1e12, allow_inf_nan=False,
                         description="FD mass dominance γ (per-algorithm bound: fdcontrol.model.virtual.GAMMA_MAX)")
    alpha: float = Field(0.1, gt=0, le=10, allow_inf_nan=False, description="DLS damping α")
    gamma_max: float = Field(0.785398, gt=0, le=10, description="SDLS clamp γ_max (rad)")
    sdls_length: float = Field(0.5, gt=0, le=10, description="SDLS characteristic length L (m): rotations weigh L·rad")
    sdls_max_error: float = Field(0.1, gt=0, le=10, description="SDLS target clamp D_max (m)")
    algorithm: Literal["cholesky", "aba", "qr"] = "cholesky"
    integrator: IntegratorName = "euler"
    substeps: int = Field(1, ge=1, le=64)
    coriolis: bool = True
    joint_limits: Literal["constraints", "clamp", "none"] = Field(
        "constraints", description="FD virtual model at a joint limit: locked-joint dynamics, clamping, or none")
    decay: float = Field(10.0, gt=0, le=1000, allow_inf_nan=False, description="velocity decay c (1/s)")
    rate: float = Field(500.0, ge=10, le=2000, description="control loop rate (Hz)")
    command_timeout: float = Field(0.1, ge=0.005, le=10, description="watchdog timeout (s)")
    telemetry_decimation: int = Field(10, ge=1, le=10000, description="σmin(J) and κ(H) every n-th cycle")
    mode: ModeName = "admittance"
    frame: Literal["base", "tool"] = "base"
    stiffness: Vec6 = Field(default_factory=lambda: [200.0] * 3 + [50.0] * 3)
    damping: Vec6 = Field(default_factory=lambda: [10.0] * 3 + [5.0] * 3)
    force_gain: Vec6 = Field(default_factory=lambda: [1.0] * 6)
    force_target: list[Annotated[float, Field(allow_inf_nan=False)]] = Field(
        default_factory=lambda: [0.0] * 6, min_length=6, max_length=6)
    velocity_scale: float = Field(0.5, gt=0, le=1, description="fraction of URDF velocity limits")
    max_joint_acceleration: float = Field(4.0, gt=0, le=50, description="rad/s²")
    max_linear_speed: float = Field(0.5, gt=0, le=3, description="m/s at the tip")
    max_angular_speed: float = Field(1.5, gt=0, le=10, description="rad/s at the tip")
    limits: list[LimitName] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(DEFAULT_LIMITS), max_length=64,
        description="the safety limits composed after the solver, in their fixed order (listed in any); "
        "position, velocity and acceleration are required; at run time limits may be added, not removed")
    max_force: float = Field(500.0, gt=0, le=1e4, description="accepted |F| of an input wrench (N)")
    max_torque: float = Field(50.0, gt=0, le=1e3, description="accepted |τ| of an input wrench (N·m)")
    tool_mass: float = Field(0.0, ge=0, le=100)
    tool_com: list[float] = Field(default_factory=lambda: [0.0, 0.0, 0.0], min_length=3, max_length=3)
    deadband_force: float = Field(0.0, ge=0, le=100)
    deadband_torque: float = Field(0.0, ge=0, le=10)
    filter_cutoff: float = Field(0.0, ge=0, le=1000, description="low-pass on the sensor (Hz, 0 off)")
    sensor_sign: Literal["robot_on_tool", "tool_on_robot"] = Field(
        "robot_on_tool", description="raw F/T reading convention (fdcontrol.control.sensing)")
    sensor_position: list[Annotated[float, Field(ge=-2, le=2, allow_inf_nan=False)]] = Field(
        default_factory=lambda: [0.0, 0.0, 0.0], min_length=3, max_length=3,
        description="sensor origin in the tip frame (m)")
    sensor_rpy: list[Annotated[float, Field(ge=-7, le=7, allow_inf_nan=False)]] = Field(
        default_factory=lambda: [0.0, 0.0, 0.0], min_length=3, max_length=3,
        description="sensor orientation in the tip frame, roll-pitch-yaw (rad)")
    driver: str = Field("mujoco", description="a registered driver (fdcontrol.drivers.registry.DRIVERS) "
                        "or, at startup only, 'package.module:Class'")
    driver_options: dict[str, Any] = Field(default_factory=dict)
    posture: Literal["auto", "on", "off"] = Field(
        "auto", description="null-space posture task (fdcontrol.control.posture); auto: on for redundant arms "
        "(more joints than 6) with the FD mapping")
    posture_stiffness: float = Field(10.0, ge=0, le=1e4, allow_inf_nan=False,
                                     description="K (1/s², = ω² of the posture spring, mass-normalised)")
    posture_damping: float = Field(0.0, ge=0, le=1e3, allow_inf_nan=False,
                                   description="D (1/s), added to the velocity decay c")
    posture_preferred: list[Annotated[float, Field(allow_inf_nan=False)]] | None = Field(
        None, max_length=64, description="preferred posture (rad); default: the configuration when the task is "
        "switched on")
    link_loads: list[LinkLoadSpec] = Field(default_factory=list, max_length=32)
    link_load_mode: Literal["projected", "physical"] = Field(
        "projected", description="projected: null space only (tip unaffected); physical: the tip yields too")
    twist_gain: Vec6 = Field(default_factory=lambda: [50.0] * 3 + [5.0] * 3,
                             description="twist tracking K_v (N·s/m ×3, N·m·s/rad ×3)")

    @field_validator("limits")
    @classmethod
    def _limits_complete(cls, v: list[str]) -> list[str]:
        return list(check_limit_names(v))  # the composition order; required ones present

    @field_validator("robot")
    @classmethod
    def _robot_known(cls, v: str) -> str:
        from fdcontrol.model.robot import SHIPPED

        if v not in SHIPPED and not v.endswith(".urdf"):
            raise ValueError(f"unknown robot {v!r}; shipped robots: {', '.join(SHIPPED)} or a .urdf path")
        return v


class Settings(ControlParams, BaseSettings):
    """Service settings = control parameters + process options."""

    model_config = SettingsConfigDict(env_prefix="FDCONTROL_", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    autostart: bool | None = Field(None, description="start the loop at startup (default: "
                                   "only on the simulated robot)")
    realtime: bool = Field(True, description="try SCHED_FIFO for the loop thread (ignored where not permitted)")
    state_decimation: int = Field(10, ge=1, le=10000, description="default WS decimation")
    max_batch: int = Field(10_000, ge=1, le=1_000_000)
    switch_interval: float = Field(2e-4, gt=0, le=0.01, description="sys.setswitchinterval (s)")
    record_dir: str = Field("recordings", description="directory of MCAP recordings (POST /recording/start)")
    record: str | None = Field(None, description="record from startup to this file (a bare name goes "
                               "into record_dir)")

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
    # ---- supervision (server/supervisor.py)
    supervise: bool = Field(True, description="restart a dead or stuck loop process, into hold")
    max_restarts: int = Field(5, ge=0, le=1000, description="restarts allowed per restart_window")
    restart_window: float = Field(300.0, gt=0, description="s")

    def api_token(self) -> str | None:
        """The token from `token` or, else, the first line of `token_file` (ValueError when that
        line is blank or shorter than MIN_TOKEN: a token file never means "no authentication")."""
        if self.token is not None and self.token.get_secret_value():
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
    env = Settings()  # environment over defaults
    merged = {**data, **{k: getattr(env, k) for k in env.model_fields_set},
              **{k: v for k, v in overrides.items() if v is not None}}
    return Settings.model_validate(merged)


__all__ = ["GROW_ONLY", "NEEDS_STOP", "STARTUP_ONLY", "TIGHTEN_ONLY", "ControlParams", "Settings", "ValidationError",
           "load_settings"]
