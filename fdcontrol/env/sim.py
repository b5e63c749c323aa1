"""The learning interface in-process: fdcontrol's ControlLoop on the MuJoCo arm, stepped in simulated time.

Same spaces and actions as :class:`fdcontrol.env.service.ServiceEnv`; each ``step()`` hands the
goal to the loop's target interpolator and runs ``round(loop_rate / rate)`` loop cycles, each
advancing the physics by one loop period (:class:`fdcontrol.drivers.mujoco.MujocoRobot`), as fast
as the computer allows. Deterministic for a given seed: ``reset()`` puts the arm at its home
configuration at rest (the physics is reset; a real arm is driven home by the service env).
Timing in simulated time: every action is used by the next loop cycle and every observation is
the newest cycle's, so both are reported as 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fdcontrol.extras import missing

try:
    import gymnasium as gym
except ImportError as exc:
    raise missing("env", "the learning environments", exc) from exc

from fdcontrol.control.law import ControlLaw, ForceTerm, MotionTerm, WrenchFilter
from fdcontrol.drivers.mujoco import MujocoRobot
from fdcontrol.env.spaces import ActionSpec, check_action, goal_pose, observation, observation_space
from fdcontrol.env.timing import Timing
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop import state as state_encoding
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.integrators import make_integrator
from fdcontrol.loop.solvers import make_solver
from fdcontrol.mappings import make_mapping
from fdcontrol.model.robot import HOME, RobotModel


class SimEnv(gym.Env):
    """In-process env (see the module docstring). ``robot``: a shipped robot; ``loop_rate`` (Hz);
    ``stiffness``, ``damping``, ``force_gain`` (6 each), ``error_clip`` (6 or None), ``mode``,
    ``gamma``, ``decay`` as the service's settings of the same names; ``driver_options`` as the
    MuJoCo driver's (tool, table, objects, sensor_noise…)."""

    metadata = {"render_modes": []}  # noqa: RUF012  (gymnasium's declared class attribute)

    def __init__(self, robot: str = "ur10", rate: float = 20.0, loop_rate: float = 500.0,
                 action: ActionSpec | None = None, mode: str = "compliance",
                 stiffness: Sequence[float] = (200.0,) * 3 + (50.0,) * 3,
                 damping: Sequence[float] = (10.0,) * 3 + (5.0,) * 3, force_gain: Sequence[float] = (0.2,) * 6,
                 error_clip: Sequence[float] | None = None, gamma: float = 1e3, decay: float = 10.0,
                 driver_options: dict[str, Any] | None = None, observe: Sequence[str] = (),
                 max_episode_steps: int | None = None) -> None:
        if not (math.isfinite(rate) and 1.0 <= rate <= loop_rate):
            raise ValueError("rate must be within [1, loop_rate] Hz")
        self.robot = RobotModel.load(robot)
        self.rate, self.loop_rate = float(rate), float(loop_rate)
        self.cycles = max(1, round(loop_rate / rate))
        self.period = self.cycles / self.loop_rate  # the policy period the loop realises exactly
        self.spec_action = action or ActionSpec()
        self.home_q = np.array(HOME[robot], dtype=float)
        self.home = self.robot.pose(self.home_q)
        self.driver = MujocoRobot.from_options(self.robot, 1.0 / loop_rate, dict(driver_options or {}))
        self._law_args = {"mode": mode, "stiffness": np.array(stiffness, float), "damping": np.array(damping, float),
                          "force_gain": np.array(force_gain, float),
                          "error_clip": None if error_clip is None else np.array(error_clip, float)}
        self._gamma, self._decay = float(gamma), float(decay)
        self.observe = tuple(observe)
        self.action_space = self.spec_action.space(self.robot.dof)
        self.observation_space = observation_space(self.robot.dof, self.observe)
        self.max_episode_steps = max_episode_steps
        self.timing = Timing()
        self.t = 0.0
        self.loop = self._build()

    def _build(self) -> ControlLoop:
        a = self._law_args
        law = ControlLaw(mode=a["mode"], force=ForceTerm(gain=a["force_gain"]),
                         motion=MotionTerm(stiffness=a["stiffness"], damping=a["damping"], error_clip=a["error_clip"]))
        mapping = make_mapping("fd", self.robot, gamma=self._gamma, gamma_schedule="conditioning")  # as the service
        solver = make_solver(mapping, make_integrator("euler"), decay=self._decay)
        tool = self.driver.tool
        return ControlLoop(self.robot, self.driver, solver, law=law, limits=SafetyLimits.from_robot(self.robot),
                           wrench_filter=WrenchFilter(tool_mass=tool.mass, tool_com=np.array(tool.com)),
                           rate=self.loop_rate, command_timeout=10.0)  # its largest: actions are not a stream

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        q0 = np.asarray((options or {}).get("home_q", self.home_q), dtype=float)
        if seed is not None:
            self.driver._rng = np.random.default_rng(seed)  # the sensor noise stream
        self.driver.reset(q0)
        self.t = 0.0
        self.loop = self._build()
        self._goal, self._q_goal = self.robot.pose(q0), q0.copy()
        self._seq, self._steps = 0, 0
        self.loop.set_target(self._goal)
        s = self.loop.step(now=self.t)
        self.t += 1.0 / self.loop_rate
        return self._obs(s), {"observation_age": 0.0, "cycle": s.cycle}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        a = check_action(self.action_space, action)
        measured = self.loop.state.tip_pose
        goal, qg = goal_pose(self.spec_action, a, self._goal, measured, self.period, self.robot, self._q_goal)
        self._seq += 1
        t_step = self.t
        self.loop.set_action(goal, self.period, self._seq, t=t_step)
        self._goal = goal
        if qg is not None:
            self._q_goal = qg
        s = self.loop.state
        for _ in range(self.cycles):
            s = self.loop.step(now=self.t)
            self.t += 1.0 / self.loop_rate
        delay = s.action_used_at - t_step
        self.timing.action_delay.add(delay)
        self.timing.observation_age.add(0.0)
        self._steps += 1
        truncated = self.max_episode_steps is not None and self._steps >= self.max_episode_steps
        info = {"observation_age": 0.0, "action_delay": delay, "cycle": s.cycle, "holding": s.holding,
                "fault": s.fault}
        return self._obs(s), 0.0, False, truncated, info

    def _obs(self, s: Any) -> dict[str, np.ndarray]:
        return observation(state_encoding.to_dict(s), self.observe)

    def close(self) -> None:
        self.driver.close()
