"""The ``fdcontrol`` LeRobot robot: an arm under fdcontrol's compliant Cartesian control.

Observations and actions are flat dicts of named floats (names: :mod:`fdcontrol.env.features`).
``send_action`` goes the gymnasium environment's way (:meth:`fdcontrol.env.ServiceEnv.act`): the
action is checked against the action space — a NaN/Inf, a missing or unknown name or a non-number
raises :class:`fdcontrol.env.ActionError` and nothing is sent; out of bounds it is clipped (or
refused with ``clip=false``) — turned into a goal pose and sent as a policy action, which the loop's
target interpolator reaches over ``1/fps`` s. A ``wrench`` action streams the wrench instead
(``PUT /control/wrench``). It returns the action as applied.

When actions stop, the arm stays at the last goal, compliant (a wrench stream that stops trips the
service's watchdog: the arm holds), as for any client of the service. ``disconnect`` holds the arm.
"""

from __future__ import annotations

import math
import time
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from lerobot.cameras import make_cameras_from_configs
from lerobot.robots import Robot
from lerobot.utils.decorators import check_if_already_connected, check_if_not_connected

from fdcontrol.client import Client
from fdcontrol.env import features
from fdcontrol.env.service import ServiceEnv
from fdcontrol.env.spaces import ActionError, ActionSpec, check_action

from .config_fdcontrol_robot import FdcontrolRobotConfig
from .embedded import EmbeddedService

#: how long disconnect waits for the service to say it holds before it closes the connection (s)
HOLD_SEEN_S = 5.0


class FdcontrolRobot(Robot):
    """See the module docstring; configured by :class:`FdcontrolRobotConfig`."""

    config_class = FdcontrolRobotConfig
    name = "fdcontrol"

    def __init__(self, config: FdcontrolRobotConfig) -> None:
        super().__init__(config)
        self.config = config
        self.cameras = make_cameras_from_configs(config.cameras)
        self.env: ServiceEnv | None = None
        self.service: EmbeddedService | None = None
        self._state: dict[str, Any] | None = None
        F, tau = config.max_wrench
        b = np.array([F] * 3 + [tau] * 3, dtype=float)
        self.wrench_space = spaces.Box(-b, b, dtype=np.float64)
        self._wrench_seq = 0
        self._goals_ended = False  # a hold was seen: the goal is re-anchored at the first action after it

    # ------------------------------------------------------------------ features
    def _token(self) -> str | None:
        if self.config.token is not None:
            return self.config.token
        if self.config.token_file:
            lines = Path(self.config.token_file).read_text().splitlines()
            return lines[0].strip() if lines else None
        return None

    @cached_property
    def dof(self) -> int:
        """The arm's joint count: of the embedded robot's model, else asked from the service (``GET /state``)."""
        if self.env is not None:
            return int(self.env.robot.dof)
        if self.config.embedded:
            from fdcontrol.model.robot import RobotModel

            return int(RobotModel.load(self.config.robot).dof)
        with Client(self.config.url, timeout=10.0, token=self._token()) as c:
            return len(c.state()["q"])

    @cached_property
    def observation_features(self) -> dict[str, type | tuple]:
        cams = {k: (c.height, c.width, 3) for k, c in self.config.cameras.items()}
        return {**dict.fromkeys(features.observation_names(self.dof), float), **cams}

    @cached_property
    def action_features(self) -> dict[str, type]:
        return dict.fromkeys(features.action_names(self.config.action_type, self.dof), float)

    @property
    def action_names(self) -> tuple[str, ...]:
        return features.action_names(self.config.action_type, self.dof)

    # ------------------------------------------------------------------ connection
    @property
    def is_connected(self) -> bool:
        return self.env is not None and all(c.is_connected for c in self.cameras.values())

    @property
    def is_calibrated(self) -> bool:
        return True  # the service's robot model is its calibration

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        pass

    @check_if_already_connected
    def connect(self, calibrate: bool = True) -> None:
        """Reach the service (or start the embedded one), select ``mode`` with the tip's own pose as the
        target, start the loop and release a hold when asked to: nothing moves until an action comes."""
        cfg = self.config
        url, token = cfg.url, self._token()
        if cfg.embedded:
            self.service = EmbeddedService(cfg.robot, cfg.embedded_args, cfg.startup_timeout)
            url, token = self.service.url, self.service.token
        kind = cfg.action_type
        spec = ActionSpec(type=kind if kind != "wrench" else "delta_pose",  # type: ignore[arg-type]
                          frame=cfg.frame, origin=cfg.origin,  # type: ignore[arg-type]
                          max_delta=tuple(cfg.max_delta), max_twist=tuple(cfg.max_twist),  # type: ignore[arg-type]
                          max_joint_delta=cfg.max_joint_delta)
        try:
            env = ServiceEnv(url, token=token, rate=cfg.fps, action=spec, mode=cfg.mode)
            s = env.client.state()
            if s.get("stale"):
                raise RuntimeError("the service's control loop is not responding (its state is stale)")
            if not s["running"]:
                env.client.start()
            if cfg.release_hold and (s["holding"] or s["fault"]):
                env.client.hold(False)  # (a release drops the goals: the target is set again below)
                s = env.client.state()
            p = features.pose7(s["tip_pose"])  # the target: where the tip is (the motion term pulls nowhere)
            env.client.set_target(p[:3].tolist(), p[3:].tolist())
            env.anchor(s)
        except BaseException:
            if self.service is not None:
                self.service.close()
                self.service = None
            raise
        self.env = env
        self.__dict__.pop("dof", None)  # now the service's own model
        for cam in self.cameras.values():
            cam.connect()

    @check_if_not_connected
    def disconnect(self) -> None:
        """Hold the arm (it brakes to standstill and stays), then close the connection (and stop the
        embedded service) once the service's state says it holds (bounded: HOLD_SEEN_S)."""
        env, self.env = self.env, None
        try:
            assert env is not None
            env.client.hold(True)
            deadline = time.monotonic() + HOLD_SEEN_S
            while not env.client.state().get("holding") and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            if env is not None:
                env.close()
            for cam in self.cameras.values():
                if cam.is_connected:
                    cam.disconnect()
            if self.service is not None:
                self.service.close()
                self.service = None

    # ------------------------------------------------------------------ the cycle
    @check_if_not_connected
    def get_observation(self) -> dict[str, Any]:
        assert self.env is not None
        s = self.env.client.state()
        if s.get("stale"):
            raise RuntimeError("the service's control loop is not responding (its state is stale)")
        self._state = s
        if s["holding"]:  # a hold ends the service's goals: the next action starts again from where the arm is
            self._goals_ended = True
        obs: dict[str, Any] = features.observation(s)
        for key, cam in self.cameras.items():
            obs[key] = cam.async_read()
        return obs

    @check_if_not_connected
    def send_action(self, action: dict[str, Any]) -> dict[str, float]:
        """Apply one action (a dict over :attr:`action_features`); returns it as applied (clipped, the
        pose's quaternion normalised). A bad action raises :class:`ActionError` and nothing is sent."""
        assert self.env is not None
        names = self.action_names
        a = self._vector(action, names)
        cfg = self.config
        if cfg.action_type == "wrench":
            a = check_action(self.wrench_space, a, clip=cfg.clip)
            st = self._state
            if st is not None and not st["fault"] and (
                    st["watchdog"] == "tripped" or (self._goals_ended and not st["holding"])):
                # the stream had gone stale (or a hold was released): the hold ended the goals, so the motion
                # term's target is set again where the tip is (the wrench pushes against a spring there)
                p = features.pose7(st["tip_pose"])
                self.env.client.set_target(p[:3].tolist(), p[3:].tolist())
                self._goals_ended = False
            self._wrench_seq += 1
            self.env.client.set_wrench(a.tolist(), cfg.frame, self._wrench_seq)
        else:
            st = self._state
            if st is not None and self._goals_ended and not st["holding"]:
                self.env.anchor(st)  # after a hold: deltas start from where the arm stopped, not the old goal
                self._goals_ended = False
            measured = np.asarray(st["tip_pose"], float) if st is not None else None
            a, _ = self.env.act(a, clip=cfg.clip, measured=measured)
            if cfg.action_type == "pose":
                a = a.copy()
                a[3:7] /= np.linalg.norm(a[3:7])
        return dict(zip(names, (float(x) for x in a), strict=True))

    @staticmethod
    def _vector(action: Any, names: tuple[str, ...]) -> np.ndarray:
        """The action's values in the order of ``names`` (ActionError naming missing, unknown or non-numbers)."""
        if not hasattr(action, "keys"):
            raise ActionError(f"action must be a dict over {', '.join(names)}; got {type(action).__name__}")
        missing = [n for n in names if n not in action]
        unknown = [str(k) for k in action if k not in names]
        if missing or unknown:
            parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
                [f"unknown {', '.join(unknown)}"] if unknown else [])
            raise ActionError(f"action names: {'; '.join(parts)} (expected {', '.join(names)})")
        out = np.empty(len(names))
        for i, n in enumerate(names):
            try:
                out[i] = float(action[n])
            except (TypeError, ValueError, RuntimeError) as exc:
                raise ActionError(f"action {n!r} must be a number, got {action[n]!r}: {exc}") from None
        if not np.all(np.isfinite(out)):
            bad = [n for n, x in zip(names, out, strict=True) if not math.isfinite(x)]
            raise ActionError(f"action must be finite, got {', '.join(f'{n}={action[n]}' for n in bad)}")
        return out
