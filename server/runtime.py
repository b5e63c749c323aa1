"""Runtime: the robot, its driver and the control loop, built from and updated by settings."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from fdcontrol.control import sensing, workspace
from fdcontrol.loop import ControlLoop, build_loop
from fdcontrol.loop.build import (  # the one assembly (the library's), re-exported for the service's modules
    build_filter,
    build_law,
    build_limits,
    build_link_loads,
    build_parts,
    build_posture,
    build_solver,
    load_driver,
    loop_params,
)
from fdcontrol.model.robot import RobotModel
from fdcontrol.params import change_errors
from fdcontrol.server.settings import PARAMS, ControlParams, Settings, follow_start_box
from fdcontrol.server.taskspace import carry_gains, check_workspace

__all__ = ["BRAKE_WAIT", "ConflictError", "PolicyError", "Runtime", "build_filter", "build_law", "build_limits",
           "build_link_loads", "build_posture", "build_solver", "load_driver", "loop_phase"]


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


#: parameters whose change alters what the sensor reading or the law means: applied at standstill
#: (their policy), after which the loop resumes from rest and re-zeroes the sensor bias at the held
#: pose when the sensor model changed (nobody touches the tool while its calibration changes)
_MEANING = frozenset(k for k, p in PARAMS.items() if p.policy == "holding")
#: the sensor model's meaning (tool, sign, sensor pose): after a change, the bias is taken again at the held pose
_SENSOR = frozenset(p.name for p in sensing.PARAMS if p.policy == "holding")
#: the parameters that shape the workspace's volumes (fdcontrol.control.workspace; not its stop's braking)
_WORKSPACE = frozenset(p.name for p in workspace.PARAMS) - {"workspace_stop_deceleration", "collision_distance"}
BRAKE_WAIT = 10.0  # s: longest wait for the arm to reach standstill before PATCH answers


class Runtime:
    """Owns the loop; configuration changes build new parts and swap them in by reference."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.params = ControlParams.model_validate(settings.model_dump(include=set(ControlParams.model_fields)))
        self._lock = threading.Lock()  # serialises reconfiguration, never taken by the loop
        self.loop = self._build(self.params)

    def _build(self, p: ControlParams) -> ControlLoop:
        return build_loop(p, realtime=self.settings.realtime)  # the library's one assembly

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
            # the rules' firings so far, read before the configuration (which takes in their switches): a rule
            # that fires after this is found at the swap, where the change is refused (see below)
            task = self.loop.task
            built_at, seen = self.loop.cycle, (task.reactions.count if task is not None else None)
            current = self.params.model_dump()
            changes = follow_start_box(current, changes)  # a simulated arm's start box follows its robot
            new = ControlParams.model_validate({**current, **changes})
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
                if changed & _WORKSPACE:  # a new workspace that would move the arm by itself is refused (an
                    check_workspace(loop, new)  # unchanged one already acts: other changes pass)
                # build outside the loop, as the library's assembly builds them (build_parts); the loop
                # thread swaps all of them in at one cycle boundary
                parts = build_parts(loop.robot, loop_params(new), loop=loop)
                # the new law goes on from the gains the loop runs with; changed gains are ramped, never stepped
                carry_gains(loop, parts["law"], parts["task"], changed)
                done = loop.reconfigure(
                    **parts, **({"rest": True, "rezero": bool(changed & _SENSOR)} if changed & _MEANING else {}),
                    reactions=seen)
                # applied at the next cycle (a change of meaning: at standstill, after braking): answer after it
                done.wait(BRAKE_WAIT if changed & _MEANING else max(0.5, 20 * loop.period))
                event = getattr(done, "refused", None)
                if event is not None:  # the rule's action stands; the configuration is the one it left
                    raise ConflictError(
                        f"a rule fired while this change was being applied (rule {event.rule!r}, {event.text}; "
                        f"the change was built at cycle {built_at} and refused at cycle {done.applied_cycle}): "
                        "nothing was changed — read GET /config, which shows what the rule switched, and send "
                        "the change again")
            self.params = new
            return new

    def close(self) -> None:
        self.loop.stop()
        self.loop.driver.close()
