"""One assembly: the control loop built from the declared parameters.

:func:`build_loop` is the one place a loop is assembled — the service (its loop process), the
gymnasium ``SimEnv``, the experiments and in-process users all call it, so the same parameters
give the same loop. The parameters are the declared ones (:func:`fdcontrol.loop.parameters.declared`:
name, default, bounds); any subset may be given, as a mapping, keyword arguments or an object with
those attributes (the service passes its validated settings), the rest take their defaults.

:func:`build_parts` builds the parts a running loop may swap at run time (law, solver, limits, sensor
model, posture, link loads, task space) from parameters: the service's configuration changes use it
too, so a changed loop is the loop its parameters would build.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np

from fdcontrol.control.law import ControlLaw, ForceTerm, MotionTerm, WrenchFilter
from fdcontrol.control.link_loads import LinkLoads, link_loads_from_config
from fdcontrol.control.posture import PostureTask
from fdcontrol.control.task import TaskSpace
from fdcontrol.control.trajectory import MoveLimits
from fdcontrol.control.twist import TwistTerm, admittance_damping
from fdcontrol.control.workspace import Workspace, workspace_from_config
from fdcontrol.drivers.base import RobotDriver
from fdcontrol.drivers.registry import DRIVERS, build_driver
from fdcontrol.limits.collision import CollisionAvoidance
from fdcontrol.limits.safety import SafetyLimits, check_limit_names
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.integrators import make_integrator
from fdcontrol.loop.parameters import declared
from fdcontrol.loop.solvers import Solver, make_solver
from fdcontrol.loop.stages import Stage
from fdcontrol.mappings import make_mapping, settings_kwargs
from fdcontrol.model.collision import Clearance
from fdcontrol.model.constraints import braking_inset
from fdcontrol.model.robot import RobotModel
from fdcontrol.model.virtual import check_gamma
from fdcontrol.params import unknown_names


def loop_params(params: Mapping[str, Any] | Any = None, /, **overrides: Any) -> SimpleNamespace:
    """Every declared parameter, as attributes: the defaults, then ``params`` (a mapping or an object with
    the parameters as attributes, e.g. the service's settings), then ``overrides``. Values given here are
    checked by their declarations (ParamError names the parameter), unknown names are refused; structured
    values (link loads, volumes) are plain data. A Franka gets its rules: the jerk limit always on, and the
    robot's 1 kHz clock when no rate is given."""
    table = declared()
    given: dict[str, Any] = {}
    if params is not None:  # a mapping, or an object with the parameters as attributes (the service's settings)
        given.update(params if isinstance(params, Mapping) else
                     {k: getattr(params, k) for k in table if hasattr(params, k)})
    given.update(overrides)
    if set(given) - table.keys():
        raise unknown_names(set(given), table, "parameter")
    values = {k: (list(p.default) if isinstance(p.default, list) else
                  dict(p.default) if isinstance(p.default, dict) else p.default) for k, p in table.items()}
    for k, v in given.items():
        v = _plain(v)
        values[k] = v if table[k].kind == "spec" else table[k].check(v)
    values["limits"], values["rate"] = franka_rules(values["driver"], list(check_limit_names(values["limits"])),
                                                    values["rate"], "rate" in given)
    check_gamma(values["gamma"], values["algorithm"])
    return SimpleNamespace(**values)


def franka_rules(driver: str, limits: list[str], rate: float, rate_given: bool) -> tuple[list[str], float]:
    """A Franka: the jerk limit always on, and its 1 kHz clock unless a rate is given (the service's
    settings apply the same rules, here in one place)."""
    if driver == "franka":
        if "jerk" not in limits:
            limits = list(check_limit_names([*limits, "jerk"]))
        if not rate_given:
            rate = 1000.0
    return limits, rate


def _plain(v: Any) -> Any:
    """Plain data: pydantic models (the service's specs) dumped without unset optional fields."""
    if hasattr(v, "model_dump"):
        return v.model_dump(exclude_none=True)
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _spec(v: Any) -> Any:
    """A volume's or a link load's plain data without its unset (None) fields, as the API's schema leaves them."""
    v = _plain(v)
    return {k: _spec(x) for k, x in v.items() if x is not None} if isinstance(v, dict) else v


# ---------------------------------------------------------------------- the parts
def load_driver(spec: str, robot: RobotModel, dt: float, options: dict[str, Any]) -> RobotDriver:
    """A registered driver by name (``fdcontrol.drivers.registry.DRIVERS``), or — from startup
    configuration only — an import path 'package.module:Class' called as Class(robot=, dt=, **options)."""
    if spec in DRIVERS:
        return build_driver(spec, robot, dt, options)
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"driver must be one of {', '.join(DRIVERS.names())} or 'package.module:Class', "
                         f"got {spec!r}")
    cls = getattr(importlib.import_module(module), name)
    driver = cls(robot=robot, dt=dt, **options)
    if not isinstance(driver, RobotDriver):
        raise TypeError(f"{spec} is not a subclass of fdcontrol.drivers.RobotDriver")
    return driver


def build_solver(robot: RobotModel, p: Any) -> Solver:
    """The mapping's solver with its integrator; the virtual joint limits inside the safety envelope's
    braking distance, so they act first (docs/numerics.md)."""
    mapping = make_mapping(p.mapping, robot, **settings_kwargs(p.mapping, p))  # its declared parameters
    inset = braking_inset(p.velocity_scale * robot.limits.velocity, p.max_joint_acceleration)
    return make_solver(mapping, make_integrator(p.integrator), decay=p.decay,
                       substeps=p.substeps, coriolis=p.coriolis, joint_limits=p.joint_limits,
                       limit_inset=inset)


def build_law(p: Any) -> ControlLaw:
    return ControlLaw(
        mode=p.mode, frame=p.frame,
        force=ForceTerm(gain=np.array(p.force_gain), target=np.array(p.force_target)),
        motion=MotionTerm(stiffness=np.array(p.stiffness), damping=np.array(p.damping),
                          error_clip=None if p.error_clip is None else np.array(p.error_clip)),
        twist=TwistTerm(gain=np.array(p.twist_gain), feedforward=admittance_damping(p.decay)),
    )


def build_posture(robot: RobotModel, p: Any) -> PostureTask | None:
    """The null-space posture task, or None (off, non-redundant on auto, or not the FD mapping)."""
    on = p.posture == "on" or (p.posture == "auto" and robot.dof > 6)
    if not on or p.mapping != "fd":
        return None
    return PostureTask(robot, p.posture_stiffness, p.posture_damping,
                       None if p.posture_preferred is None else np.array(p.posture_preferred))


def build_link_loads(robot: RobotModel, p: Any) -> LinkLoads | None:
    if not p.link_loads:
        return None
    return link_loads_from_config(robot, [_spec(s) for s in p.link_loads], p.link_load_mode)


def build_limits(robot: RobotModel, p: Any, clearance: Clearance | None = None) -> SafetyLimits:
    """The limits named in ``p.limits``, each built from the robot and the parameters by its class;
    with workspace volumes the hard stop at their boundary (limit ``workspace``) joins them, and with link
    geometry and volumes (or self-collision) the links' velocity damper (limit ``collision``).
    ``clearance``: the links' distances the damper reads (the workspace's, computed once per cycle by the
    loop's ``link_distances`` stage); without it the damper computes its own."""
    volumes = p.workspace_box is not None or bool(p.keep_out)
    if volumes and "workspace" not in p.limits:
        p = SimpleNamespace(**{**vars_of(p), "limits": [*p.limits, "workspace"]})
    on = {"keep_out": bool(p.keep_out), "all": volumes, "off": False}[p.collision_links]
    links = robot.geometry is not None and (on or p.self_collision)
    if links and "collision" not in p.limits:  # every link's velocity damper (fdcontrol.limits.collision)
        p = SimpleNamespace(**{**vars_of(p), "limits": [*p.limits, "collision"]})
    out = SafetyLimits.from_settings(robot, p)
    if clearance is not None:
        for lim in out.limits:
            if isinstance(lim, CollisionAvoidance) and lim.clearance is not None:
                lim.clearance = clearance  # the same pairs, built from the same parameters: one computation
    return out


def vars_of(p: Any) -> dict[str, Any]:
    """The parameters of ``p`` (a namespace, a pydantic model or a mapping) as a dict."""
    if isinstance(p, Mapping):
        return dict(p)
    if hasattr(p, "model_dump"):
        return {k: getattr(p, k) for k in type(p).model_fields}
    return dict(vars(p))


def build_filter(p: Any, old: WrenchFilter | None = None, driver: Any = None) -> WrenchFilter:
    """The sensor model from the parameters; tool_mass 0 on a simulated tool (a driver with a
    ``tool``) means that tool's own payload, as a user would enter it on a real controller."""
    import pinocchio as pin

    tool = driver.tool if isinstance(driver, RobotDriver) else None
    mass, com = (tool.mass, tool.com) if tool is not None and p.tool_mass == 0 else (p.tool_mass, p.tool_com)
    inertia = getattr(tool, "inertia", p.tool_inertia) if tool is not None and p.tool_mass == 0 else p.tool_inertia
    f = WrenchFilter(tool_mass=mass, tool_com=np.array(com), tool_inertia=np.array(inertia, dtype=float),
                     inertia_compensation=p.tool_inertia_compensation, accel_cutoff=p.tool_accel_cutoff,
                     deadband_force=p.deadband_force, deadband_torque=p.deadband_torque,
                     cutoff=p.filter_cutoff, sign=p.sensor_sign,
                     sensor_rotation=pin.rpy.rpyToMatrix(np.array(p.sensor_rpy, dtype=float)),
                     sensor_position=np.array(p.sensor_position))
    if old is not None:
        f.bias = old.bias
    return f


def build_workspace(robot: RobotModel, p: Any) -> Workspace | None:
    box = _spec(p.workspace_box) if p.workspace_box is not None else None
    ws = workspace_from_config(robot, box, [_spec(k) for k in p.keep_out], p.workspace_links,
                               collision_links=p.collision_links, self_collision=p.self_collision,
                               self_margin=p.self_collision_margin, hard_margin=p.collision_distance)
    return None if ws.empty else ws


def move_limits(robot: RobotModel, p: Any) -> MoveLimits:
    return MoveLimits((p.move_max_linear_speed, p.move_max_linear_acceleration, p.move_max_linear_jerk),
                      (p.move_max_angular_speed, p.move_max_angular_acceleration, p.move_max_angular_jerk),
                      p.velocity_scale * robot.limits.velocity,
                      np.full(robot.dof, 0.5 * p.max_joint_acceleration), np.full(robot.dof, p.move_max_joint_jerk))


def build_task(robot: RobotModel, p: Any, old: TaskSpace | None = None) -> TaskSpace:
    """A TaskSpace from the parameters; an ``old`` one keeps its rules, move and counters. Only the parts
    in use run in the cycle (a task space without volumes, rules, move or ramp costs nothing)."""
    t = TaskSpace(build_workspace(robot, p), move_limits=move_limits(robot, p))
    if old is not None:
        t.reactions, t.move, t.ramp, t.vector_ramp = old.reactions, old.move, old.ramp, old.vector_ramp
        t._switched, t._switched_lock = old._switched, old._switched_lock  # switches not yet in the configuration
    t.pause_error = p.move_pause_error
    return t


def build_parts(robot: RobotModel, p: Any, driver: RobotDriver | None = None,
                loop: ControlLoop | None = None) -> dict[str, Any]:
    """The loop's parts and scalar parameters from ``p`` (keyword names of :class:`ControlLoop` and of
    its ``reconfigure``); with the running ``loop``, the sensor bias and the task space's state carry over.
    The links' distances are one :class:`~fdcontrol.model.collision.Clearance`, the workspace's: its loads, the
    velocity damper and the fault check read what the loop's ``link_distances`` stage computed."""
    task = build_task(robot, p, loop.task if loop is not None else None)
    ws = task.workspace
    return {"solver": build_solver(robot, p), "law": build_law(p),
            "limits": build_limits(robot, p, ws.clearance if ws is not None else None),
            "filter": build_filter(p, loop.filter if loop is not None else None,
                                   driver if driver is not None else loop.driver if loop is not None else None),
            "posture": build_posture(robot, p), "link_loads": build_link_loads(robot, p),
            "task": task,
            "command_timeout": p.command_timeout, "telemetry_decimation": p.telemetry_decimation,
            "max_force": p.max_force, "max_torque": p.max_torque, "sensor_timeout": p.sensor_timeout}


# ---------------------------------------------------------------------- the loop
def build_loop(params: Mapping[str, Any] | Any = None, /, *, driver: RobotDriver | str | None = None,
               robot: RobotModel | str | None = None, realtime: bool = False, stages: tuple[Stage, ...] = (),
               parts: Mapping[str, Any] | None = None, **overrides: Any) -> ControlLoop:
    """The control loop of these parameters (see the module doc): the robot (``robot``, ``base``, ``tip``)
    unless given, the driver (``driver``, ``driver_options``) unless given (then ``robot`` is the model
    the driver was built for), the solver, law, limits, sensor model, posture, link loads and task space.

    ``stages``: further cycle stages (fdcontrol.loop.stages), e.g. a limit or a joint load of your own.
    ``parts``: parts given instead of built (names as :func:`build_parts` returns them: ``solver``, ``law``,
    ``limits``, ``filter``, ``posture``, ``link_loads``, ``task``) — a study of one part's variants
    (fdcontrol.experiments) keeps every other part as the parameters build it.

    >>> loop = build_loop(driver="simulated", stiffness=[300.0] * 6)  # doctest: +SKIP
    """
    if isinstance(driver, str):  # the parameter "driver" (a registered name), not a driver object
        overrides["driver"], driver = driver, None
    if isinstance(robot, str):  # the parameter "robot" (a shipped robot or a URDF path)
        overrides["robot"], robot = robot, None
    p = loop_params(params, **overrides)
    if robot is None:
        robot = getattr(driver, "robot", None) or RobotModel.resolve(p.robot, p.base, p.tip)
    if driver is None:
        driver = load_driver(p.driver, robot, 1.0 / p.rate, p.driver_options)
    built = build_parts(robot, p, driver)
    unknown = set(parts or ()) - {"solver", "law", "limits", "filter", "posture", "link_loads", "task"}
    if unknown:
        raise ValueError(f"parts: unknown {', '.join(sorted(unknown))}; expected solver, law, limits, filter, "
                         "posture, link_loads or task")
    built.update(parts or {})
    return ControlLoop(robot, driver, built.pop("solver"), wrench_filter=built.pop("filter"), rate=p.rate,
                       realtime=realtime, stages=stages, **built)


__all__ = ["build_filter", "build_law", "build_limits", "build_link_loads", "build_loop", "build_parts",
           "build_posture", "build_solver", "build_task", "build_workspace", "franka_rules", "load_driver",
           "loop_params", "move_limits"]
