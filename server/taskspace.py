"""The task space in the loop process: request schemas and the worker's "task" command.

:func:`task_call` (run by server/loop_process.py in its command loop) validates a request, builds
every part outside the loop thread and hands it over by reference; the loop picks it up at its
next cycle. The REST routes are in server/routers/task.py.
"""

from __future__ import annotations

import copy
import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fdcontrol.control.gains import GainRamp, check_gains
from fdcontrol.control.laws import LAWS
from fdcontrol.control.path_check import link_path_violations, path_violations
from fdcontrol.control.reactions import ACTIONS, OPS, SIGNALS, Reactions, rules_from_config
from fdcontrol.control.switch import VectorRamp, check_switch
from fdcontrol.control.task import TaskSpace
from fdcontrol.control.trajectory import Move, MoveError, MoveLimits, solve_ik
from fdcontrol.control.workspace import TIP
from fdcontrol.loop.build import build_workspace
from fdcontrol.model.robot import HOME, RobotModel
from fdcontrol.model.spatial import target_pose
from fdcontrol.server.settings import PARAMS

Finite = Annotated[float, Field(allow_inf_nan=False)]
SignalName = Literal[tuple(SIGNALS)]  # type: ignore[valid-type]
OpName = Literal[tuple(OPS)]  # type: ignore[valid-type]
ActionName = Literal[ACTIONS]  # type: ignore[valid-type]


class RuleIn(BaseModel):
    """``when signal op value [for cycles] then action`` (fdcontrol.control.reactions)."""

    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: the API schema is the contract

    name: str | None = Field(None, min_length=1, max_length=100)
    signal: SignalName  # type: ignore[valid-type]
    op: OpName = ">"  # type: ignore[valid-type]
    value: Finite
    cycles: int = Field(1, ge=1, le=100_000, description="consecutive cycles the condition must hold")
    action: ActionName = "hold"  # type: ignore[valid-type]
    distance: float = Field(0.0, ge=0, le=0.5, allow_inf_nan=False, description="retract distance (m)")
    mode: str | None = Field(None, description="switch: the control law to switch to")
    params: dict[str, Any] | None = Field(None, max_length=64, description="switch: parameters to set (name → "
                                          "value; the law's gains ramped over ramp_time)")
    ramp_time: float = Field(0.5, ge=0, le=60, allow_inf_nan=False, description="switch: ramp of the gains (s)")
    once: bool = Field(True, description="disarm after firing (else re-arm when the condition clears)")

    @model_validator(mode="after")
    def _action(self) -> RuleIn:
        if self.action == "retract" and self.distance <= 0:
            raise ValueError("retract needs a distance > 0 (m)")
        if self.action == "switch" and not self.params and self.mode is None:
            raise ValueError(f"switch needs a mode (one of {', '.join(LAWS.names())}) and/or params")
        if self.mode is not None and self.mode not in LAWS.names():
            raise ValueError(f"mode must be one of {', '.join(LAWS.names())}")
        if self.params and self.action != "switch":
            raise ValueError("params are set by the action 'switch' only")
        return self


class RulesIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: the API schema is the contract

    rules: list[RuleIn] = Field(max_length=1000, description="replaces the armed rules; [] disarms all")


class MoveIn(BaseModel):
    """A goal pose (position, optional orientation quaternion [x, y, z, w]; base frame) or joint goal q."""

    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: the API schema is the contract

    position: Annotated[list[Finite], Field(min_length=3, max_length=3)] | None = None
    orientation: Annotated[list[Finite], Field(min_length=4, max_length=4)] | None = None
    q: Annotated[list[Finite], Field(min_length=1, max_length=64)] | None = None
    relative: bool = Field(False, description="position is an offset from the current tip position")
    speed: float = Field(1.0, gt=0, le=1, allow_inf_nan=False, description="speed scaling (0, 1]")
    acceleration: float = Field(1.0, gt=0, le=1, allow_inf_nan=False, description="acceleration scaling (0, 1]")
    until: RuleIn | None = Field(None, description="a guarded move: this rule is armed with the move, and the "
                                 "linear speed is capped at approach_speed")

    @model_validator(mode="after")
    def _one_goal(self) -> MoveIn:
        if (self.position is None) == (self.q is None):
            raise ValueError("a move needs exactly one of 'position' (with optional 'orientation') or 'q'")
        if self.q is not None and (self.orientation is not None or self.relative):
            raise ValueError("a joint goal 'q' takes no orientation and is not relative")
        return self


class HomeIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: the API schema is the contract

    speed: float = Field(1.0, gt=0, le=1, allow_inf_nan=False)
    acceleration: float = Field(1.0, gt=0, le=1, allow_inf_nan=False)


class GainsIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: the API schema is the contract

    stiffness: Annotated[list[Finite], Field(min_length=6, max_length=6)] | None = None
    damping: Annotated[list[Finite], Field(min_length=6, max_length=6)] | None = None
    ramp_time: float = Field(0.5, ge=0, le=60, allow_inf_nan=False, description="s")


# ---------------------------------------------------------------------- the loop process's side
_OWN: dict[int, RobotModel] = {}


def own(robot: RobotModel) -> RobotModel:
    """The robot with its own pinocchio Data for the command thread (the loop thread uses the robot's)."""
    c = _OWN.get(id(robot))
    if c is None or c.model is not robot.model:
        c = copy.copy(robot)
        c.data = robot.model.createData()
        _OWN.clear()
        _OWN[id(robot)] = c
    return c


def check_workspace(loop: Any, p: Any) -> None:
    """ValueError when the arm is where the new workspace would push it (no change moves the arm)."""
    ws = build_workspace(own(loop.robot), p)
    if ws is None:
        return
    q = np.asarray(loop.state.q)
    bad = ws.violations(ws.points(q)) + ws.link_violations(q)
    if bad:
        raise ValueError("the workspace would move the arm by itself: " + "; ".join(bad[:3]) +
                         " — move the arm first or change the volume")


def _goal_checks(runtime: Any, goal: np.ndarray) -> None:
    ws = runtime.loop.task.workspace if runtime.loop.task is not None else None
    if ws is not None:
        bad = ws.violations({"goal": goal[:3, 3]})
        if bad:
            raise MoveError("goal out of the workspace: " + "; ".join(bad[:3]))


def start_move(runtime: Any, spec: dict[str, Any]) -> dict[str, Any]:
    loop, p = runtime.loop, runtime.params
    if not loop.running:
        raise MoveError("the loop is not running: POST /control/start first")
    if loop.state.holding:
        raise MoveError("the loop is holding: release the hold (POST /control/hold {\"hold\": false}) first")
    m = MoveIn.model_validate(spec, strict=False)
    robot, task = own(loop.robot), loop.task
    s = loop.state
    lim = task.move_limits.scaled(m.speed, m.acceleration)
    if m.until is not None:
        v, a, j = lim.linear
        lim = MoveLimits((min(v, p.approach_speed), a, j), lim.angular, lim.joint_velocity,
                         lim.joint_acceleration, lim.joint_jerk)
    if m.q is not None:
        q = np.asarray(m.q, dtype=float)
        if len(q) != robot.dof:
            raise MoveError(f"q must have {robot.dof} entries, got {len(q)}")
        lo, hi = robot.limits.lower, robot.limits.upper
        out = [i for i in range(robot.dof) if not lo[i] <= q[i] <= hi[i]]
        if out:
            raise MoveError(f"q[{out[0]}] = {q[out[0]]:.4g} rad is outside the joint limits "
                            f"[{lo[out[0]]:.4g}, {hi[out[0]]:.4g}]")
        _goal_checks(runtime, robot.pose(q))
        move = Move(robot, s.tip_pose, loop.period, lim, goal_q=q, start_q=s.q, pause_error=task.pause_error)
    else:
        position = (np.asarray(m.position) + (s.tip_pose[:3, 3] if m.relative else 0)).tolist()
        goal = target_pose(position, m.orientation, s.tip_pose, MoveError)
        _goal_checks(runtime, goal)
        q_goal = solve_ik(robot, np.asarray(s.q), goal)
        if q_goal is None:
            raise MoveError(f"goal unreachable: no joint configuration within the joint limits reaches "
                            f"position {np.round(goal[:3, 3], 4).tolist()} with that orientation")
        move = Move(robot, s.tip_pose, loop.period, lim, goal_pose=goal, pause_error=task.pause_error)
    ws = task.workspace
    if ws is not None:  # the references the loop will send, checked against the volumes before it moves
        bad = path_violations(move, ws) + link_path_violations(move, ws, np.asarray(s.q))  # tip, then every link
        if bad:
            raise MoveError("the move's path is not allowed: " + "; ".join(bad[:3]) +
                            " — choose a goal or a path (e.g. a waypoint) around it")
    rules = None
    if m.until is not None:
        rules = [*task.reactions.rules, *rules_from_config([checked_rule(runtime, m.until.model_dump(), "until")])]
    task.request(move, rules)
    return {"goal": move.goal.tolist(), "duration": None}


def home_q(robot: RobotModel) -> list[float]:
    if robot.name not in HOME:
        raise MoveError(f"no home configuration for robot {robot.name!r}")
    return HOME[robot.name]


def checked_rule(runtime: Any, item: dict[str, Any], name: str) -> dict[str, Any]:
    """A rule's data, validated (its parameter switch against the declarations, the policies and the
    startup bounds: refused when armed, never when it fires)."""
    r = RuleIn.model_validate(item).model_dump()
    r["name"] = item.get("name") or name
    if r["params"]:
        p = runtime.params
        r["params"] = check_switch(r["params"], PARAMS, runtime.startup(), np.array(p.max_stiffness),
                                   np.array(p.max_damping), f"rule {r['name']!r}")
        type(p).model_validate({**p.model_dump(), **r["params"]})  # and together with the others (cross-checks)
    return r


def set_rules(runtime: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    task = runtime.loop.task
    rules = rules_from_config([checked_rule(runtime, it, f"rule{i}") for i, it in enumerate(items)])
    Reactions(rules)  # unique names, else ValueError
    task.request(None, rules)
    return get_rules(runtime, rules)


def get_rules(runtime: Any, rules: list | None = None) -> list[dict[str, Any]]:
    rules = runtime.loop.task.reactions.rules if rules is None else rules
    return [{"name": r.name, "signal": r.signal, "op": r.op, "value": r.value, "cycles": r.cycles,
             "action": r.action, "distance": r.distance, "mode": r.mode,
             "params": None if r.params is None else {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                                                      for k, v in r.params.items()},
             "ramp_time": r.ramp_time, "once": r.once, "armed": r.armed,
             "fired": r.fired} for r in rules]


def set_gains(runtime: Any, spec: dict[str, Any]) -> dict[str, Any]:
    g = GainsIn.model_validate(spec, strict=False)
    loop, p = runtime.loop, runtime.params
    motion = loop.law.motion
    k1 = motion.stiffness if g.stiffness is None else check_gains(g.stiffness, np.array(p.max_stiffness), "stiffness")
    d1 = motion.damping if g.damping is None else check_gains(g.damping, np.array(p.max_damping), "damping")
    loop.task.ramp = GainRamp(motion.stiffness.copy(), motion.damping.copy(), k1, d1, g.ramp_time)
    # the configuration tells the truth: GET /config shows them, and a later PATCH keeps them
    runtime.params = p.model_copy(update={"stiffness": list(map(float, k1)), "damping": list(map(float, d1))})
    return {"stiffness": list(map(float, k1)), "damping": list(map(float, d1)), "ramp_time": g.ramp_time}


#: s, the ramp of gains changed by PATCH /config (as POST /control/gains' default)
PATCH_GAIN_RAMP = 0.5


def carry_gains(loop: Any, law: Any, task: TaskSpace, changed: set[str], ramp_time: float = PATCH_GAIN_RAMP) -> None:
    """A configuration change rebuilds the law: the new one starts from the gains the loop runs with
    now (set by POST /control/gains, a reaction, or a ramp still under way, which continues), and the
    gains the change sets are ramped to over ``ramp_time`` (the smooth step of
    :class:`~fdcontrol.control.gains.GainRamp`), never stepped."""
    old = loop.law
    k1, d1 = law.motion.stiffness.copy(), law.motion.damping.copy()
    law.motion.stiffness, law.motion.damping = old.motion.stiffness.copy(), old.motion.damping.copy()
    if "stiffness" in changed or "damping" in changed:
        r = task.ramp
        k = k1 if "stiffness" in changed else (r.k1 if r is not None else law.motion.stiffness)
        d = d1 if "damping" in changed else (r.d1 if r is not None else law.motion.damping)
        task.ramp = GainRamp(law.motion.stiffness.copy(), law.motion.damping.copy(), k, d, ramp_time)
    targets: list[tuple[Any, str, Any]] = []
    for name, part in (("force_gain", "force"), ("twist_gain", "twist")):
        new_gain = getattr(law, part).gain.copy()
        getattr(law, part).gain = np.array(getattr(old, part).gain, dtype=float)
        if name in changed:
            targets.append((lambda part=part: getattr(loop.law, part), "gain", new_gain))
    if targets:
        new_parts = [obj() for obj, _, _ in targets]
        kept = [t for t in (task.vector_ramp.remaining() if task.vector_ramp else [])
                if not any(t[0]() is o for o in new_parts)]  # a reaction's ramp of the other gain goes on
        task.vector_ramp = VectorRamp(targets + kept, ramp_time)


def workspace_info(runtime: Any) -> dict[str, Any]:
    p, task = runtime.params, runtime.loop.task
    ws = task.workspace if task is not None else None
    return {"box": p.workspace_box.model_dump() if p.workspace_box is not None else None,
            "keep_out": [k.model_dump(exclude_none=True) for k in p.keep_out], "links": p.workspace_links,
            "tip": TIP, "distance": None if ws is None or not math.isfinite(ws.distance) else ws.distance,
            "nearest": None if ws is None else ws.nearest}


def task_call(runtime: Any, op: str, *args: Any) -> Any:
    """The worker's "task" command: op among move, home, cancel, rules, get_rules, gains, workspace."""
    if op == "move":
        return start_move(runtime, args[0])
    if op == "home":
        h = HomeIn.model_validate(args[0], strict=False)
        return start_move(runtime, {"q": home_q(runtime.loop.robot), "speed": h.speed,
                                    "acceleration": h.acceleration})
    if op == "cancel":
        mv = runtime.loop.task.move
        if mv is not None:
            mv.cancel()
        return None
    if op == "rules":
        return set_rules(runtime, args[0])
    if op == "get_rules":
        return get_rules(runtime)
    if op == "gains":
        return set_gains(runtime, args[0])
    if op == "workspace":
        return workspace_info(runtime)
    raise ValueError(f"unknown task operation {op!r}")


