"""Request and response models of the REST and WebSocket API."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from fdcontrol.loop.state import state_model
from fdcontrol.mappings import mapping_names, mapping_params
from fdcontrol.params import unknown_names
from fdcontrol.server.settings import MappingName, annotation, field_of

Finite = Annotated[float, Field(allow_inf_nan=False)]
#: inputs: numbers are numbers (no "5", no true), finite
StrictFinite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Vector = list[Finite]
Wrench = Annotated[list[StrictFinite], Field(min_length=6, max_length=6,
                                             description="[fx, fy, fz, tx, ty, tz] in N and N·m")]
SEQ_MAX = 2**53
#: |q| bound of the analysis input (rad or m): far beyond any joint's range, small enough that
#: sin, cos and the products of kinematics stay finite
Q_MAX = 1e3
JointValue = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-Q_MAX, le=Q_MAX)]


class Health(BaseModel):
    status: Literal["ok", "fault"]
    loop_running: bool
    last_cycle_age_s: float | None
    cycles: int
    fault: str | None = Field(description="why the loop is not healthy (dead, stuck, faulted)")
    restarts: int = Field(0, description="loop process restarts by the supervisor")
    following: bool = Field(True, description="the arm does what the loop asks (false: a joint's measured velocity "
                            "has differed from the reference by more than 0.5 rad/s for 0.25 s); not a fault by itself")
    following_joint: int | None = Field(None, description="the joint (0-based) that does not follow; null if none")
    following_error: float | None = Field(None, description="|measured − reference| velocity of that joint (rad/s)")
    kernels: str = Field("unknown", description="the numba kernels of the loop process and the API's: "
                         "\"compiled (numba …)\", or what is not and why (numba not installed or failing to "
                         "import: the slower Python forms run; a kernel whose cache could not be read, compiled "
                         "afresh); not a fault by itself")


class Joint(BaseModel):
    name: str
    lower: float
    upper: float
    max_velocity: float


class RobotInfo(BaseModel):
    name: str
    dof: int
    base: str
    tip: str
    joints: list[Joint]


#: the published loop state, derived from its one declaration (fdcontrol/loop/state.py), plus the API's ``stale``
State = state_model(
    "State", stale=(bool, Field(False, description="the loop process is dead or stuck: this state is not current")),
    lease=(dict[str, Any] | None, Field(None, description="the control lease: holder (null: free), since (Unix "
                                        "time), since_cycle, idle (s since its last command), timeout, yours")))


class Stats(BaseModel):
    rate: float
    cycles: int
    overruns: int
    window: int
    compute_p50_us: float
    compute_p99_us: float
    compute_max_us: float
    period_error_p50_us: float
    period_error_p99_us: float
    period_error_max_us: float
    integrator_nonconverged: int = Field(description="cycles whose adaptive integrator hit max_substeps")
    robot_success_rate: float | None = Field(None, description="a driver that owns the clock (franka): the robot's "
                                             "control_command_success_rate of its last state (0–1)")
    robot_missed_cycles: int | None = Field(None, description="a driver that owns the clock: robot states that "
                                            "passed without a command, in total")
    robot_last_state_at: float | None = Field(None, description="a driver that owns the clock: the loop's "
                                              "time.monotonic() (s) when the robot's last state arrived")
    robot_lost_at: float | None = Field(None, description="a driver that owns the clock: the loop's "
                                        "time.monotonic() (s) when no state came within the driver's timeout "
                                        "and the loop faulted into hold; null while connected")
    scheduler: str | None = Field(None, description="the loop thread's scheduling policy: SCHED_FIFO when "
                                  "real-time was granted (realtime: true and CAP_SYS_NICE), else SCHED_OTHER; "
                                  "null while the loop is stopped")
    ws_clients: int
    ws_dropped: int
    api_gc_frozen: int = Field(0, description="objects of the API process kept out of the cyclic garbage collector "
                               "since its startup (fdcontrol serve): a full collection walks only what came after")


class _MappingSpecBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: MappingName

    @model_validator(mode="after")
    def _declared_by_this_mapping(self) -> Any:
        given = self.model_fields_set - {"name"}
        valid = {p.name for p in mapping_params(self.name)}
        if given - valid:
            raise ValueError(str(unknown_names(given, valid, f"parameter of mapping {self.name!r}:")))
        return self


#: one mapping and its parameters, the mappings' own declarations (fdcontrol.params); a parameter another
#: mapping declares is refused, naming the valid ones
MappingSpec = create_model(
    "MappingSpec", __base__=_MappingSpecBase,
    **{p.name: (annotation(p), field_of(p)) for n in mapping_names() for p in mapping_params(n)})


class AnalysisRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    q: Annotated[list[JointValue], Field(min_length=1)] | Annotated[
        list[Annotated[list[JointValue], Field(min_length=1)]], Field(min_length=1)] = Field(
        description="one configuration or a batch; |q| ≤ 1e3 (rad or m)")
    mappings: list[MappingName | MappingSpec] = Field(
        default_factory=lambda: list(mapping_names()), min_length=1, max_length=20)
    type: Literal["joint", "cartesian"] = "joint"
    robot: str | None = Field(None, max_length=200, description="shipped robot name; default: the loaded one")


class MappingAnalysis(BaseModel):
    mapping: str
    params: dict[str, float | str]
    singular_values: Vector
    sigma_min: float
    sigma_max: float
    condition: float | None = Field(description="κ = σmax/σmin; null when singular")
    singular: bool
    manipulability: float


class AnalysisPoint(BaseModel):
    q: Vector
    manipulability_j: float = Field(description="Yoshikawa √det(J Jᵀ) of the robot")
    sigma_min_j: float = Field(description="σmin of the Jacobian")
    kappa_h: float | None = Field(description="κ(H) of the virtual model at the first FD mapping's γ "
                                  "(or γ = 1e3); null when singular")
    results: list[MappingAnalysis]


class AnalysisResponse(BaseModel):
    robot: str
    type: str
    points: list[AnalysisPoint]


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid")

    position: Annotated[list[StrictFinite], Field(min_length=3, max_length=3)]
    orientation: Annotated[list[StrictFinite], Field(min_length=4, max_length=4)] | None = Field(
        None, description="unit quaternion [x, y, z, w] in the base frame; default: keep current")


class WrenchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    wrench: Wrench
    frame: Literal["base", "tool"] = "base"
    seq: Annotated[int, Field(strict=True, ge=0, le=SEQ_MAX)] | None = None


class HoldIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hold: Annotated[bool, Field(strict=True)] = True


class Ack(BaseModel):
    ok: bool = True
    running: bool
    holding: bool
    detail: str | None = None


class Error(BaseModel):
    detail: str


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str


class ValidationErrorOut(BaseModel):
    detail: list[FieldError] | str
