"""Runtime: the robot, its driver and the control loop, built from and updated by settings."""

from __future__ import annotations

import importlib
import threading
from typing import Any

import numpy as np
import pinocchio as pin

from fdcontrol import RobotModel, make_mapping
from fdcontrol.control import sensing
from fdcontrol.control.law import ControlLaw, ForceTerm, MotionTerm, WrenchFilter
from fdcontrol.control.link_loads import LinkLoads, link_loads_from_config
from fdcontrol.control.posture import PostureTask
from fdcontrol.control.twist import TwistTerm, admittance_damping
from fdcontrol.drivers import RobotDriver
from fdcontrol.drivers.registry import DRIVERS, build_driver
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.integrators import make_integrator
from fdcontrol.loop.solvers import make_solver
from fdcontrol.mappings import settings_kwargs
from fdcontrol.model.constraints import braking_inset
from fdcontrol.params import change_errors
from fdcontrol.server.settings import PARAMS, ControlParams, Settings
from fdcontrol.server.taskspace import build_task, carry_gains, check_workspace


class ConflictError(RuntimeError):
    """A change its run-time policy does not allow in the loop's present phase (HTTP 409)."""


class PolicyError(ValueError):
    """A change its run-time policy never allows (a safety bound loosened beyond startup; HTTP 422)."""


def loop_phase(loop: ControlLoop) -> str:
    """``stopped``, ``holding`` (running, held at standstill: every joint's reference velocity 0) or ``moving``."""
    if not loop.running:
        return "stopped"
    s = loop.state
    return "holding" if s.holding and not np.any(s.qd_ref) else "moving"


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


def build_solver(robot: RobotModel, p: ControlParams):
    mapping = make_mapping(p.mapping, robot, **settings_kwargs(p.mapping, p))  # its declared parameters
    # virtual limits inside the safety envelope's braking distance: they act first (docs/numerics.md)
    inset = braking_inset(p.velocity_scale * robot.limits.velocity, p.max_joint_acceleration)
    return make_solver(mapping, make_integrator(p.integrator), decay=p.decay,
                       substeps=p.substeps, coriolis=p.coriolis, joint_limits=p.joint_limits,
                       limit_inset=inset)


def build_law(p: ControlParams) -> ControlLaw:
    return ControlLaw(
        mode=p.mode, frame=p.frame,
        force=ForceTerm(gain=np.array(p.force_gain), target=np.array(p.force_target)),
        motion=MotionTerm(stiffness=np.array(p.stiffness), damping=np.array(p.damping),
                          error_clip=None if p.error_clip is None else np.array(p.error_clip)),
        twist=TwistTerm(gain=np.array(p.twist_gain), feedforward=admittance_damping(p.decay)),
    )


def build_posture(robot: RobotModel, p: ControlParams) -> PostureTask | None:
    """The null-space posture task, or None (off, non-redundant on auto, or not the FD mapping)."""
    on = p.posture == "on" or (p.posture == "auto" and robot.dof > 6)
    if not on or p.mapping != "fd":
        return None
    return PostureTask(robot, p.posture_stiffness, p.posture_damping,
                       None if p.posture_preferred is None else np.array(p.posture_preferred))


def build_link_loads(robot: RobotModel, p: ControlParams) -> LinkLoads | None:
    if not p.link_loads:
        return None
    return link_loads_from_config(robot, [s.model_dump(exclude_none=True) for s in p.link_loads],
                                  p.link_load_mode)


def build_limits(robot: RobotModel, p: ControlParams) -> SafetyLimits:
    """The limits named in ``p.limits``, each built from the robot and the settings by its class;
    with workspace volumes the hard stop at their boundary (limit ``workspace``) joins them, and with link
    geometry and volumes (or self-collision) the links' velocity damper (limit ``collision``)."""
    volumes = p.workspace_box is not None or bool(p.keep_out)
    if volumes and "workspace" not in p.limits:
        p = p.model_copy(update={"limits": [*p.limits, "workspace"]})
    on = {"keep_out": bool(p.keep_out), "all": volumes, "off": False}[p.collision_links]
    links = robot.geometry is not None and (on or p.self_collision)
    if links and "collision" not in p.limits:  # every link's velocity damper (fdcontrol.limits.collision)
        p = p.model_copy(update={"limits": [*p.limits, "collision"]})
    return SafetyLimits.from_settings(robot, p)


def build_filter(p: ControlParams, old: WrenchFilter | None = None, driver: Any = None) -> WrenchFilter:
    """The sensor model from the settings; tool_mass 0 on a simulated tool (a driver with a
    ``tool``) means that tool's own payload, as a user would enter it on a real controller."""
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


#: parameters whose change alters what the sensor reading or the law means: applied at standstill
#: (their policy), after which the loop resumes from rest and re-zeroes the sensor bias at the held
#: pose when the sensor model changed (nobody touches the tool while its calibration changes)
_MEANING = frozenset(k for k, p in PARAMS.items() if p.policy == "holding")
#: the sensor model's meaning (tool, sign, sensor pose): after a change, the bias is taken again at the held pose
_SENSOR = frozenset(p.name for p in sensing.PARAMS if p.policy == "holding")
BRAKE_WAIT = 10.0  # s: longest wait for the arm to reach standstill before PATCH answers


class Runtime:
    """Owns the loop; configuration changes build new parts and swap them in by reference."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.params = ControlParams.model_validate(settings.model_dump(include=set(ControlParams.model_fields)))
        self._lock = threading.Lock()  # serialises reconfiguration, never taken by the loop
        self.loop = self._build(self.params)

    def _build(self, p: ControlParams) -> ControlLoop:
        robot = RobotModel.resolve(p.robot, p.base, p.tip)
        driver = load_driver(p.driver, robot, 1.0 / p.rate, p.driver_options)
        return ControlLoop(robot, driver, build_solver(robot, p), law=build_law(p),
                           limits=build_limits(robot, p), wrench_filter=build_filter(p, driver=driver),
                           rate=p.rate, command_timeout=p.command_timeout, max_force=p.max_force,
                           max_torque=p.max_torque, realtime=self.settings.realtime,
                           sensor_timeout=p.sensor_timeout,
                           telemetry_decimation=p.telemetry_decimation,
                           posture=build_posture(robot, p), link_loads=build_link_loads(robot, p),
                           task=build_task(robot, p))

    @property
    def params(self) -> ControlParams:
        """The configuration, with the parameters (and law mode) reactions switched in the loop since."""
        task = getattr(getattr(self, "loop", None), "task", None)
        switched = task.take_switched() if task is not None else None
        if switched:
            self._params = self._params.model_copy(update=switched)
        return self._params

    @params.setter
    def params(self, p: ControlParams) -> None:
        self._params = p

    @property
    def robot(self) -> RobotModel:
        return self.loop.robot

    def startup(self) -> dict[str, Any]:
        """The parameters the service started with: the bounds of ``tighten`` parameters."""
        return self.settings.model_dump(include=set(PARAMS))

    def update(self, changes: dict[str, Any]) -> ControlParams:
        """Validate and apply a partial update under each parameter's run-time policy
        (fdcontrol.params): the same check as the API's, here against the loop itself."""
        with self._lock:
            new = ControlParams.model_validate({**self.params.model_dump(), **changes})
            current = self.params.model_dump()
            conflicts, refusals = change_errors(PARAMS, new.model_dump(include=set(changes)), current,
                                                self.startup(), loop_phase(self.loop),
                                                at_rest=not np.any(self.loop.qd_ref))
            if refusals:
                raise PolicyError("; ".join(m for _, m in refusals))
            if conflicts:
                raise ConflictError("; ".join(m for _, m in conflicts))
            changed = {k for k in changes if getattr(new, k) != current[k]}
            structural = {k for k in changed if PARAMS[k].policy in ("stopped", "startup")}
            if structural:
                old = self.loop
                old.driver.close()  # first: a new driver may need the same socket or device
                try:
                    self.loop = self._build(new)
                except Exception:
                    self.loop = self._build(self.params)
                    raise
            else:
                loop = self.loop
                check_workspace(loop, new)  # a workspace that would move the arm by itself is refused
                # the new law goes on from the gains the loop runs with; changed gains are ramped, never stepped
                law, task = build_law(new), build_task(loop.robot, new, loop.task)
                carry_gains(loop, law, task, changed)
                # build outside the loop; the loop thread swaps all of them in at one cycle boundary
                done = loop.reconfigure(
                    solver=build_solver(loop.robot, new), law=law,
                    limits=build_limits(loop.robot, new), filter=build_filter(new, loop.filter, loop.driver),
                    posture=build_posture(loop.robot, new), link_loads=build_link_loads(loop.robot, new),
                    command_timeout=new.command_timeout, telemetry_decimation=new.telemetry_decimation,
                    max_force=new.max_force, max_torque=new.max_torque, sensor_timeout=new.sensor_timeout,
                    task=task,
                    **({"rest": True, "rezero": bool(changed & _SENSOR)} if changed & _MEANING else {}))
                # applied at the next cycle (a change of meaning: at standstill, after braking): answer after it
                done.wait(BRAKE_WAIT if changed & _MEANING else max(0.5, 20 * loop.period))
            self.params = new
            return new

    def close(self) -> None:
        self.loop.stop()
        self.loop.driver.close()
