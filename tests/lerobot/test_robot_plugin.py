"""The LeRobot robot plugin (plugins/lerobot_robot_fdcontrol) against the real service on loopback (MuJoCo arm).

Runs where LeRobot is installed (`make test-lerobot`: its own venv); elsewhere the module skips.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pytest

pytest.importorskip("lerobot", reason="needs LeRobot (make test-lerobot installs it in its own venv)")
pytest.importorskip("lerobot_robot_fdcontrol", reason="needs LeRobot and the fdcontrol robot plugin "
                    "(make test-lerobot installs plugins/*)")

from lerobot.robots import RobotConfig, make_robot_from_config
from lerobot.utils.import_utils import register_third_party_plugins

from fdcontrol.client import Client
from fdcontrol.env.features import MODES, action_names, observation_names
from fdcontrol.env.service import ServiceEnv
from fdcontrol.env.spaces import ActionError, ActionSpec, check_action
from fdcontrol.model.robot import RobotModel
from tests.service import Service
from tests.waits import cycles_later, until

FPS = 20.0
ZERO = dict.fromkeys(action_names("delta_pose", 6), 0.0)


@pytest.fixture(scope="module")
def service():
    # a wrench streamed over REST at 20 Hz on a loaded machine: the watchdog allows 1 s between two
    svc = Service("--command-timeout", "1.0")
    with Client(svc.url) as c:  # no workspace box: the tests move the arm up to 20 cm from its start
        c.patch_config(workspace_box=None)
    yield svc
    svc.stop()


@pytest.fixture(scope="module")
def ur10() -> RobotModel:
    return RobotModel.load("ur10")


def make(url: str, **kw):
    """The robot as LeRobot's command line makes it: plugins discovered, the config class by its type name."""
    register_third_party_plugins()
    return make_robot_from_config(RobotConfig.get_choice_class("fdcontrol")(url=url, fps=FPS, **kw))


def settled(client: Client) -> dict:
    """The state once the arm is at rest (tip speed below 1 mm/s, by the loop's own record)."""
    cycles_later(client.state, 200)
    return until(client.state, lambda s: np.linalg.norm(s["tip_twist"][:3]) < 1e-3 and not s["holding"],
                 what="the arm at rest")


def run(robot, actions: list[dict[str, float]]) -> list[dict[str, float]]:
    """Observe and act at FPS, as lerobot-record's loop does; the actions as applied."""
    applied = []
    t = time.monotonic()
    for a in actions:
        robot.get_observation()
        applied.append(robot.send_action(a))
        t += 1.0 / FPS
        time.sleep(max(0.0, t - time.monotonic()))
    return applied


def push_until_at_rest(robot, client: Client, push: dict[str, float]) -> dict:
    """Stream `push` at FPS for at least a second, until the tip is at rest (by the loop's record)."""
    def read() -> dict:
        run(robot, [push])
        return client.state()

    run(robot, [push] * int(FPS))
    return until(read, lambda s: np.linalg.norm(s["tip_twist"][:3]) < 1e-3, what="the pushed arm at rest")


def tip(state: dict) -> np.ndarray:
    return np.asarray(state["tip_pose"], float)[:3, 3]


@dataclass
class Command:
    """A command's configuration as lerobot-record's and lerobot-replay's: a robot chosen by type name."""

    robot: RobotConfig


def test_found_by_lerobot_by_its_type_name(service):
    import draccus

    register_third_party_plugins()
    cfg = draccus.parse(config_class=Command, args=["--robot.type=fdcontrol", f"--robot.url={service.url}",
                                                     "--robot.action_type=twist"]).robot
    robot = make_robot_from_config(cfg)
    assert type(robot).__name__ == "FdcontrolRobot" and robot.name == "fdcontrol"
    assert cfg.type == "fdcontrol" and cfg.url == service.url
    # before connecting (lerobot-record builds the dataset's features first): the service's joint count
    assert list(robot.action_features) == ["twist.vx", "twist.vy", "twist.vz", "twist.wx", "twist.wy", "twist.wz"]
    assert list(robot.observation_features) == list(observation_names(6))
    with pytest.raises(draccus.utils.ParsingError) as exc:  # the config's own check, named
        draccus.parse(config_class=Command, args=["--robot.type=fdcontrol", "--robot.action_type=jump"])
    assert "action_type 'jump': expected one of delta_pose, pose, twist, wrench, joint_delta" in str(
        exc.value.__cause__)


def test_observation_keys_and_values(service, ur10):
    robot = make(service.url)
    robot.connect()
    try:
        obs = robot.get_observation()
        assert list(obs) == list(robot.observation_features)
        assert all(type(v) is float and robot.observation_features[k] is float for k, v in obs.items())
        q = np.array([obs[f"joint_{i}.pos"] for i in range(1, 7)])
        T = ur10.pose(q)  # forward kinematics of the observed joints: the observed tip pose
        assert np.allclose([obs["ee.x"], obs["ee.y"], obs["ee.z"]], T[:3, 3], atol=1e-6)
        quat = np.array([obs["ee.qx"], obs["ee.qy"], obs["ee.qz"], obs["ee.qw"]])
        import pinocchio as pin

        R = pin.Quaternion(quat[3], *quat[:3]).toRotationMatrix()
        assert np.linalg.norm(pin.log3(R.T @ T[:3, :3])) < 1e-6 and abs(np.linalg.norm(quat) - 1) < 1e-9
        assert obs["mode"] == MODES.index("compliance") and obs["held"] == 0.0 and obs["fault"] == 0.0
    finally:
        robot.disconnect()


def test_send_action_moves_the_arm_as_the_env_does(service):
    """20 steps of +5 mm x, then zeros: the plugin and the gymnasium env on the same service move the
    tip alike, by the commanded 10 cm (goal-origin deltas)."""
    steps = [{**ZERO, "delta_x": 0.005}] * 20 + [ZERO] * 10
    robot = make(service.url)
    robot.connect()
    try:
        c = robot.env.client
        p0 = tip(settled(c))
        applied = run(robot, steps)
        d_plugin = tip(settled(c)) - p0
    finally:
        robot.disconnect()
    assert applied == steps  # within bounds: applied as given
    env = ServiceEnv(service.url, rate=FPS)
    try:
        env.reset()
        p0 = tip(settled(env.client))
        for a in steps:
            env.step(np.array([a[k] for k in ZERO]))
        d_env = tip(settled(env.client)) - p0
    finally:
        env.close()
    assert abs(d_plugin[0] - 0.100) < 0.005 and np.hypot(*d_plugin[1:]) < 0.002, d_plugin
    assert np.linalg.norm(d_plugin - d_env) < 0.003, (d_plugin, d_env)


def test_out_of_bounds_is_clipped_and_returned_as_applied(service):
    robot = make(service.url)
    robot.connect()
    try:
        c = robot.env.client
        p0 = tip(settled(c))
        applied = run(robot, [{**ZERO, "delta_z": 0.05}] + [ZERO] * 5)  # 5 cm asked, 2 cm the bound
        assert applied[0] == {**ZERO, "delta_z": 0.02}
        dz = tip(settled(c))[2] - p0[2]
        assert abs(dz - 0.02) < 0.002, dz
    finally:
        robot.disconnect()


def test_bad_actions_are_refused_with_the_envs_message_and_no_motion(service):
    robot = make(service.url, clip=False)
    robot.connect()
    try:
        c = robot.env.client
        s0 = settled(c)
        space = ActionSpec().space(6)
        with pytest.raises(ActionError) as exc:
            robot.send_action({**ZERO, "delta_x": 0.5})
        with pytest.raises(ActionError) as ref:  # the env's own check, on the same values
            check_action(space, [0.5, 0, 0, 0, 0, 0])
        assert str(exc.value) == str(ref.value) and "outside the action space" in str(exc.value)
        with pytest.raises(ActionError, match="must be finite"):
            robot.send_action({**ZERO, "delta_y": math.nan})
        with pytest.raises(ActionError, match="must be finite"):
            robot.send_action({**ZERO, "delta_y": math.inf})
        with pytest.raises(ActionError, match="missing delta_rz"):
            robot.send_action({k: v for k, v in ZERO.items() if k != "delta_rz"})
        with pytest.raises(ActionError, match="unknown gripper"):
            robot.send_action({**ZERO, "gripper": 1.0})
        with pytest.raises(ActionError, match="'delta_x' must be a number"):
            robot.send_action({**ZERO, "delta_x": "left"})
        with pytest.raises(ActionError, match="must be a dict"):
            robot.send_action([0.0] * 6)
        s1 = cycles_later(c.state, 250)  # half a second of the loop's own cycles later
        assert s1["action_seq"] == s0["action_seq"]  # nothing reached the loop
        assert np.linalg.norm(tip(s1) - tip(s0)) < 2e-4
    finally:
        robot.disconnect()


def test_wrench_action_pushes_and_a_stale_stream_holds(service):
    """Compliance at rest: K_p (x_target − x) + F = 0, so a streamed F_x = 6 N displaces the tip by
    F/K_p = 6/200 = 3 cm; when the stream stops, the watchdog holds the arm."""
    robot = make(service.url, action_type="wrench")
    robot.connect()
    try:
        c = robot.env.client
        k_p = c.config()["stiffness"][0]
        p0 = tip(settled(c))
        push = {**dict.fromkeys(action_names("wrench", 6), 0.0), "wrench.fx": 6.0}
        s = push_until_at_rest(robot, c, push)
        assert not s["holding"] and s["watchdog"] == "ok", s["watchdog"]
        dx = tip(s)[0] - p0[0]
        assert abs(dx - 6.0 / k_p) < 0.15 * 6.0 / k_p, (dx, k_p)
        # the stream stops (the policy died): the watchdog trips and the arm holds
        until(c.state, lambda s: s["holding"] and s["watchdog"] == "tripped", what="the hold on a stale stream")
        assert robot.get_observation()["held"] == 1.0
        # the stream resumes: the arm is pushed against a spring where it stopped, not from the old target
        p1 = tip(c.state())
        s = push_until_at_rest(robot, c, push)
        assert not s["holding"] and abs(tip(s)[0] - p1[0] - 6.0 / k_p) < 0.15 * 6.0 / k_p, tip(s) - p1
    finally:
        robot.disconnect()


def test_disconnect_leaves_the_arm_held_and_connect_moves_nothing(service):
    robot = make(service.url)
    robot.connect()
    run(robot, [{**ZERO, "delta_y": 0.004}] * 5)
    robot.disconnect()
    c = Client(service.url)
    try:
        s = until(c.state, lambda s: s["holding"] and np.linalg.norm(s["tip_twist"][:3]) < 1e-3,
                  what="held at rest after disconnect")
        assert s["holding"]
        p_held = tip(s)
        robot = make(service.url)
        robot.connect()  # releases the hold with the tip's own pose as the target
        try:
            s = cycles_later(c.state, 500)
            assert not s["holding"]
            assert np.linalg.norm(tip(s) - p_held) < 1e-3
        finally:
            robot.disconnect()
    finally:
        c.close()


def test_after_a_hold_the_old_goal_does_not_resume(service):
    """Goals run ahead of the arm (2 cm steps at 20 Hz, faster than the interpolator's 0.25 m/s); an
    operator's hold stops the arm short of the goal. After the release, zero actions keep it where it
    stopped: the goal from before the hold does not resume (as for any client of the service)."""
    robot = make(service.url)
    robot.connect()
    c = Client(service.url)
    try:
        settled(c)
        run(robot, [{**ZERO, "delta_x": 0.02}] * 10)  # the goal: 20 cm ahead
        c.hold(True)
        s = until(c.state, lambda s: s["holding"] and np.linalg.norm(s["tip_twist"][:3]) < 1e-3,
                  what="held at rest")
        assert robot.get_observation()["held"] == 1.0
        p_held = tip(s)
        c.hold(False)
        run(robot, [ZERO] * 10)
        s = settled(c)
        assert np.linalg.norm(tip(s) - p_held) < 2e-3, tip(s) - p_held
        run(robot, [{**ZERO, "delta_y": 0.01}] * 3 + [ZERO] * 5)  # and it moves on from there
        d = tip(settled(c)) - p_held
        assert abs(d[1] - 0.03) < 0.003 and abs(d[0]) < 0.003, d
    finally:
        c.close()
        robot.disconnect()
