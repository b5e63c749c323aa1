"""A gymnasium environment over a running fdcontrol service (REST, :class:`fdcontrol.client.Client`).

Each ``step(action)``: the action is checked against the action space (a bad one raises
:class:`~fdcontrol.env.spaces.ActionError` and nothing is sent), turned into a goal pose
(:mod:`fdcontrol.env.spaces`) and sent (``PUT /control/action``); the loop's target interpolator
ramps the motion law's target to it over the policy period at the loop's own rate. ``step()``
then waits for the end of the period and returns the newest loop state as the observation.
``reset()`` takes the arm to its home pose through the same interpolator (bounded speed and
acceleration) and returns once it is there.

Timing (:class:`~fdcontrol.env.timing.Timing`, in ``info`` and :meth:`ServiceEnv.timing`): the
age of each observation and the delay from ``step()`` to the first loop cycle that used the
action, both on ``time.monotonic()`` — valid for a service on the same host (otherwise the loop's
own stamps are on another clock and the env reports NaN).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlparse

import numpy as np

from fdcontrol.extras import missing

try:
    import gymnasium as gym
except ImportError as exc:
    raise missing("env", "the learning environments", exc) from exc

from fdcontrol.client import Client
from fdcontrol.env.spaces import ActionSpec, check_action, goal_pose, observation, observation_space, pose7
from fdcontrol.env.timing import Timing
from fdcontrol.model.robot import HOME, RobotModel
from fdcontrol.model.spatial import finite

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")

Reward = Callable[[dict[str, np.ndarray], np.ndarray, dict[str, Any]], float]


class ServiceEnv(gym.Env):
    """The arm behind ``url`` as a gymnasium ``Env`` (see the module docstring and docs/learning.md).

    ``rate``: policy steps per second (``step()`` keeps this rate when the policy is faster).
    ``action``: an :class:`ActionSpec` (type, frame, origin, bounds). ``mode``: the control law the
    env selects (``compliance`` reacts to measured contact forces; ``motion`` does not).
    ``config``: parameters set once at construction (e.g. ``{"error_clip": [...], "stiffness": [...]}``).
    ``home``: joint positions whose tip pose ``reset()`` returns to (default: the robot's home).
    ``observe``: extra observation fields (:data:`fdcontrol.env.spaces.EXTRA_FIELDS`).
    ``reward``: ``reward(obs, action, info)``, default 0. ``episodes``: open an episode in the active
    recording at each ``reset()`` (task ``task``, policy ``policy_id``) and close it at the next one.
    """

    metadata = {"render_modes": []}  # noqa: RUF012  (gymnasium's declared class attribute)

    def __init__(self, url: str = "http://127.0.0.1:8000", token: str | None = None, rate: float = 20.0,
                 action: ActionSpec | None = None, mode: str = "compliance", config: dict[str, Any] | None = None,
                 home: Sequence[float] | None = None, observe: Sequence[str] = (), reward: Reward | None = None,
                 max_episode_steps: int | None = None, reset_tolerance: tuple[float, float] = (5e-4, 5e-3),
                 reset_timeout: float = 20.0, episodes: bool = False, task: str | None = None,
                 policy_id: str | None = None) -> None:
        if not (math.isfinite(rate) and 1.0 <= rate <= 200.0):
            raise ValueError("rate must be within [1, 200] Hz")
        self.client = Client(url, token=token)
        self.same_clock = urlparse(url).hostname in LOCAL_HOSTS
        self.rate, self.period = float(rate), 1.0 / rate
        self.spec_action = action or ActionSpec()
        # the target first becomes the tip's own pose: selecting a mode with a motion term must not pull
        # the arm to an older target (no configuration change moves the arm by itself)
        T = np.asarray(self.client.state()["tip_pose"], dtype=float)
        p = pose7(T)
        self.client.set_target(p[:3].tolist(), p[3:].tolist())
        params = self.client.patch_config(mode=mode, **(config or {}))
        self.robot = RobotModel.resolve(params["robot"], params["base"], params["tip"])
        self.home_q = np.array(home if home is not None else HOME.get(params["robot"], np.zeros(self.robot.dof)),
                               dtype=float)
        self.home = self.robot.pose(self.home_q)
        self.observe = tuple(observe)
        self.action_space = self.spec_action.space(self.robot.dof)
        self.observation_space = observation_space(self.robot.dof, self.observe)
        self.reward_fn = reward
        self.max_episode_steps = max_episode_steps
        self.reset_tolerance, self.reset_timeout = reset_tolerance, float(reset_timeout)
        self.episodes, self.task, self.policy_id = episodes, task, policy_id
        self.timing = Timing()
        self._seq = int(time.monotonic() * 1e3) % 10**9  # new sequence numbers per env instance
        self._goal = self.home.copy()
        self._q_goal = self.home_q.copy()
        self._state: dict[str, Any] = {}
        self._tick = time.monotonic()
        self._steps = 0
        self._episode_open = False
        self._success: bool | None = None

    # ------------------------------------------------------------------ gymnasium
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if self.episodes and self._episode_open:
            self.end_episode(self._success)
        s = self.client.state()
        if not s["running"]:
            self.client.start()
        if s["holding"] or s["fault"]:
            self.client.hold(False)
        self._move_home(options)
        if self.episodes:
            meta = {"action_type": self.spec_action.type, "action_frame": self.spec_action.frame,
                    "action_origin": self.spec_action.origin, "policy_rate_hz": f"{self.rate:g}",
                    **(options or {}).get("metadata", {})}
            self.client.start_episode(self.task, self.policy_id, meta)
            self._episode_open, self._success = True, None
        self._steps = 0
        obs, info = self._observe()
        self._tick = time.monotonic()
        return obs, info

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        t_step = time.monotonic()
        a, seq = self.act(action)  # raises before anything is sent
        self._tick += self.period
        now = time.monotonic()
        if now > self._tick + self.period:  # the policy took longer than a period: re-anchor
            self.timing.late_steps += 1
            self._tick = now
        elif self._tick > now:
            time.sleep(self._tick - now)
        obs, info = self._observe()
        s = self._state
        if s.get("action_seq") == seq and s.get("action_used_at") is not None and self.same_clock:
            info["action_delay"] = float(s["action_used_at"]) - t_step
            self.timing.action_delay.add(info["action_delay"])
        else:
            info["action_delay"] = math.nan
            if s.get("action_seq") != seq:
                self.timing.missed_actions += 1
        self._steps += 1
        reward = float(self.reward_fn(obs, a, info)) if self.reward_fn is not None else 0.0
        truncated = self.max_episode_steps is not None and self._steps >= self.max_episode_steps
        return obs, reward, False, truncated, info

    def close(self) -> None:
        if self.episodes and self._episode_open:
            try:
                self.end_episode(self._success)
            except Exception:  # closing must not fail on a service that went away
                pass
        self.client.close()

    # ------------------------------------------------------------------ without waiting
    def act(self, action: Any, clip: bool = False, measured: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """Check one action, turn it into a goal and send it, without waiting for the period
        (``step()`` is ``act()``, the wait, and the observation). Returns the action as applied
        (clipped to the action space when ``clip``, else an out-of-bounds action raises
        :class:`~fdcontrol.env.spaces.ActionError` like a NaN or a wrong shape, and nothing is
        sent) and its sequence number. ``measured``: the tip pose deltas apply to with
        ``origin="measured"`` (default: the last observation's)."""
        a = check_action(self.action_space, action, clip=clip)
        if measured is None:
            measured = np.asarray(self._state["tip_pose"], float) if self._state else self._goal
        goal, qg = goal_pose(self.spec_action, a, self._goal, measured, self.period, self.robot, self._q_goal)
        seq = self._send(goal, a)
        self._goal = goal
        if qg is not None:
            self._q_goal = qg
        return a, seq

    def anchor(self, state: dict[str, Any] | None = None) -> None:
        """The goal becomes the measured tip pose and joint positions (of ``state``, default the newest):
        the next deltas start from where the arm is instead of from the last goal or home."""
        s = state if state is not None else self.client.state()
        self._state = s
        self._goal = np.asarray(s["tip_pose"], dtype=float).copy()
        self._q_goal = np.asarray(s["q"], dtype=float).copy()

    # ------------------------------------------------------------------ episodes and timing
    def set_success(self, success: bool) -> None:
        """The outcome recorded when the open episode is closed."""
        self._success = bool(success)

    def end_episode(self, success: bool | None = None) -> dict[str, Any]:
        self._episode_open = False
        return self.client.stop_episode(success)

    def timing_summary(self) -> dict[str, object]:
        return self.timing.summary()

    # ------------------------------------------------------------------ internals
    def _send(self, goal: np.ndarray, action: np.ndarray | None = None) -> int:
        self._seq += 1
        p = pose7(goal)
        self.client.set_action(p[:3].tolist(), p[3:].tolist(), self.period, self._seq,
                               obs_cycle=self._state.get("cycle"), policy_action=action)
        return self._seq

    def _observe(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        s = self.client.state()
        now = time.monotonic()
        if s.get("stale"):
            raise RuntimeError("the control loop is not responding (the service reports its state as stale)")
        self._state = s
        age = now - float(s["stamp"]) if self.same_clock and s.get("stamp") is not None else math.nan
        self.timing.observation_age.add(age)
        info = {"observation_age": age, "cycle": int(s["cycle"]), "holding": bool(s["holding"]),
                "fault": s["fault"], "goal": pose7(self._goal)}
        return observation(s, self.observe), info

    def _move_home(self, options: dict[str, Any] | None) -> None:
        """Home through the interpolator (its speed and acceleration bounds), then wait until there."""
        q_home = np.asarray((options or {}).get("home_q", self.home_q), dtype=float)
        home = self.robot.pose(q_home)
        self._goal, self._q_goal = home.copy(), q_home.copy()
        self._send(home)
        tol_p, tol_r = self.reset_tolerance
        end = time.monotonic() + self.reset_timeout
        while True:
            s = self.client.state()
            T = np.asarray(s["tip_pose"], float)
            dp = float(np.linalg.norm(T[:3, 3] - home[:3, 3]))
            dr = float(np.linalg.norm(_log3(home[:3, :3] @ T[:3, :3].T)))
            v = float(np.linalg.norm(s["tip_twist"][:3])) if finite(np.asarray(s["tip_twist"])) else math.inf
            if dp < tol_p and dr < tol_r and v < 2e-3:
                return
            if s["fault"]:
                raise RuntimeError(f"reset: the loop reports a fault: {s['fault']}")
            if time.monotonic() > end:
                raise TimeoutError(f"reset: the tip is {dp * 1e3:.1f} mm and {dr:.3f} rad from home after "
                                   f"{self.reset_timeout:g} s")
            time.sleep(0.01)


def _log3(R: np.ndarray) -> np.ndarray:
    import pinocchio as pin

    return pin.log3(R)
