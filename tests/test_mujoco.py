"""The MuJoCo arm (real physics nobody here wrote): kinematics, the physical sensor, hand
guiding, force control on a table and the stretched singularity — ur10 and panda, both servo
modes. Ground truth for contact is MuJoCo's own contact force, not the code under test."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from fdcontrol.drivers.mujoco import EnvObject, MujocoRobot, Tool
from fdcontrol.experiments import physics as P
from fdcontrol.model.robot import HOME, RobotModel

ROBOTS = ("ur10", "panda")
MODES = ("velocity", "position")


@pytest.fixture(scope="module", params=ROBOTS)
def robot(request) -> RobotModel:
    return RobotModel.load(request.param)


def test_kinematics_match_pinocchio_to_machine_precision(robot):
    drv = MujocoRobot(robot, tool=P.TOOL)
    rng = np.random.default_rng(1)
    for _ in range(50):
        q = robot.random_q(rng)
        drv.data.qpos[:] = q
        mujoco.mj_kinematics(drv.model, drv.data)
        T = robot.pose(q)
        assert np.abs(drv.data.xpos[drv._tip_id] - T[:3, 3]).max() < 1e-12
        assert np.abs(drv.data.xmat[drv._tip_id].reshape(3, 3) - T[:3, :3]).max() < 1e-12


def test_servo_has_torque_limits_and_gravity_compensation_in_actuators(robot):
    drv = MujocoRobot(robot)
    m = drv.model
    np.testing.assert_allclose(m.jnt_actfrcrange[:, 1], robot.model.effortLimit)
    assert np.all(m.jnt_actgravcomp == 1) and np.all(m.body_gravcomp[1:] == 1)
    assert np.all(m.dof_damping == 0)


@pytest.mark.parametrize("sign", ["robot_on_tool", "tool_on_robot"])
def test_at_rest_in_three_orientations_f_measured_is_zero(robot, sign):
    """0.8 kg tool with an off-axis centre of mass; the filter knows mass and CoM only."""
    q0 = np.array(HOME[robot.name])
    for dq in ([0, 0, 0], [0.9, -0.7, 1.2], [-1.1, 0.6, -0.8]):
        q = q0.copy()
        q[-3:] += dq
        r = P.rig(robot, law=P.force_law(gain=0.0), q0=q, sign=sign)
        s = P.advance(r, 0.2)[-1]
        W = r.drv.read_wrench()
        assert np.linalg.norm(W[:3]) == pytest.approx(9.81 * P.TOOL.mass, rel=1e-3)  # it does see the weight
        assert np.linalg.norm(s.f_measured[:3]) < 0.3
        assert np.linalg.norm(s.f_measured[3:]) < 0.03


@pytest.mark.parametrize("push", [[10.0, 0, 0], [0, -6.0, 8.0]])
def test_a_10N_push_reads_back_as_minus_the_push(robot, push):
    """f_measured = tool on environment: a hand pushing the tool with F reads −F (at the tip origin)."""
    r = P.rig(robot, law=P.force_law(gain=0.0))  # f_c = 0: the servo holds still against the hand
    w = np.array([*push, 0, 0, 0])
    s = P.advance(r, 0.3, push=w)[-1]
    np.testing.assert_allclose(s.f_measured[:3], -w[:3], atol=0.02 * 10)
    assert np.linalg.norm(s.f_measured[:3] + w[:3]) < 0.02 * np.linalg.norm(w[:3])
    assert np.linalg.norm(s.f_measured[3:]) < 0.03  # applied at the tip origin: no moment there


@pytest.mark.parametrize("mode", MODES)
def test_hand_guiding_follows_the_push_and_stays_still_without_one(robot, mode):
    g = P.hand_guiding(robot, "fd", mode)
    print(robot.name, mode, g)
    assert g["fault"] is None
    assert g["along_m"] > 0.1  # moves along the push (+x)
    assert g["drift"] < 0.01
    assert g["still_max_mm"] < 1.0


@pytest.mark.parametrize("mode", MODES)
def test_force_control_presses_10N_on_a_table(robot, mode):
    f = P.force_press(robot, "fd", mode, seconds=3.0)
    print(robot.name, mode, f)
    assert f["settle_s"] is not None and f["settle_s"] < 2.5
    assert abs(f["final_N"] - 10.0) < 0.2 and abs(f["final_measured_N"] - 10.0) < 0.2
    assert f["contact_lost_after_settling"] == 0
    assert f["peak_N"] <= 15.0


@pytest.mark.parametrize("mode", MODES)
def test_stretched_singularity_under_200N_stays_within_limits(robot, mode):
    s = P.singular_stretch(robot, "fd", mode)
    print(robot.name, mode, s)
    # no fault of the model; a 200 N push may overpower a simulated servo (the Panda's wrist joint runs
    # against its reference): the loop then says so and holds, which is what it must do
    assert s["finite"] and (s["fault"] is None or s["fault"].startswith("the arm does not follow the reference"))
    assert s["ref_speed_over_limit"] <= 1.0 + 1e-9
    assert s["ref_acc_over_limit"] <= 1.0 + 1e-9
    assert s["position_violation_rad"] == 0.0


def test_push_environment_and_bad_options():
    robot = RobotModel.load("ur10")
    drv = MujocoRobot.from_options(robot, 0.002, {"tool": {"mass": 0.5, "com": [0, 0, 0.05]},
                                                  "objects": [{"name": "wall", "position": [1, 0, 0.5],
                                                               "size": [0.1, 2, 1]}]})
    env = drv.environment()
    assert [o["name"] for o in env["objects"]] == ["wall", "table"]
    assert env["objects"][0]["size"] == [0.1, 2, 1]
    drv.set_push([1, 2, 3, 0, 0, 0])
    assert drv.environment()["push"] == [1, 2, 3, 0, 0, 0]
    for bad in ([np.nan] * 6, [1, 2, 3], [1000, 0, 0, 0, 0, 0]):
        with pytest.raises(ValueError):
            drv.set_push(bad)
    with pytest.raises(ValueError):
        MujocoRobot(robot, mode="torque")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        EnvObject("x", (0, 0, 0), (1, -1, 1))
    with pytest.raises(ValueError):
        Tool(mass=-1)
    with pytest.raises(ValueError):
        MujocoRobot(robot, sensor_sign="up")


def test_physics_is_deterministic():
    robot = RobotModel.load("panda")
    a, b = (P.rig(robot, law=P.force_law()) for _ in range(2))
    sa = P.advance(a, 0.2, push=np.array([2.0, 1, 0, 0, 0, 0]))[-1]
    sb = P.advance(b, 0.2, push=np.array([2.0, 1, 0, 0, 0, 0]))[-1]
    np.testing.assert_array_equal(sa.q, sb.q)


def test_a_period_runs_when_observed_and_none_is_lost():
    """send() leaves the period's physics to its first observer: every observer (read, the sensor,
    data, tool_end, contact_force, the next send) sees the same states as stepping at once would,
    and two sends in a row advance two periods. Oracle: MuJoCo stepped by hand on a second copy."""
    robot = RobotModel.load("ur10")
    a, b = (MujocoRobot(robot, dt=0.002, q0=np.array(HOME["ur10"])) for _ in range(2))
    qd = np.array([0.2, -0.1, 0.1, 0.0, 0.3, -0.2])

    def by_hand(n: int) -> None:  # b's period, stepped directly: ctrl, push, sub-steps, sensors
        for _ in range(n):
            d = b._data
            d.ctrl[0::2], d.ctrl[1::2] = qd, qd
            b._apply_push()
            for _ in range(b.nsub):
                mujoco.mj_step(b.model, d)
            mujoco.mj_rnePostConstraint(b.model, d)
            mujoco.mj_sensorAcc(b.model, d)

    a.send(None, qd)
    a.send(None, qd)  # no read between: the first period must not be lost
    by_hand(2)
    assert a.read().t == pytest.approx(0.004)
    np.testing.assert_array_equal(a.read().q, b._data.qpos)
    for observe in (lambda r: r.read_wrench(), lambda r: r.data.qvel.copy(), lambda r: r.tool_end()):
        a.send(None, qd)
        by_hand(1)
        np.testing.assert_array_equal(observe(a), observe(b))
        np.testing.assert_array_equal(a.data.qpos, b._data.qpos)


def test_service_defaults_to_mujoco_with_environment_and_push_api():
    """The real service (loop process + uvicorn on loopback) on the MuJoCo arm: a hand push set
    over HTTP reads back in f_measured; bad pushes are refused with 422."""
    import time

    import httpx

    from tests.service import Service

    svc = Service()
    try:
        env = httpx.get(svc.url + "/environment", timeout=5).json()
        assert env["push"] == [0.0] * 6
        tbl = next(o for o in env["objects"] if o["name"] == "table")
        assert tbl["kind"] == "box" and len(tbl["quaternion"]) == 4 and tbl["size"][2] > 0
        r = httpx.put(svc.url + "/sim/push", json={"wrench": [10, 0, 0, 0, 0, 0]}, timeout=5)
        assert r.status_code == 200 and r.json()["push"][0] == 10
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            f = httpx.get(svc.url + "/state", timeout=5).json()["f_measured"]
            if abs(f[0] + 10) < 0.3:
                break
            time.sleep(0.1)
        assert abs(f[0] + 10) < 0.3, f
        for bad in ({"wrench": [1, 2]}, {"wrench": [1e4, 0, 0, 0, 0, 0]}, {"w": 1}):
            assert httpx.put(svc.url + "/sim/push", json=bad, timeout=5).status_code == 422
        assert httpx.delete(svc.url + "/sim/push", timeout=5).json()["push"] == [0.0] * 6
    finally:
        svc.stop()


def test_kinematic_simulator_reads_the_same_physical_sensor_as_mujoco(robot):
    """SimulatedSensor (kinematic sim) and MuJoCo's own force/torque sensors agree at rest."""
    from fdcontrol.drivers.simulated import SimulatedSensor

    rng = np.random.default_rng(5)
    for _ in range(3):
        q = np.array(HOME[robot.name]) + rng.uniform(-0.5, 0.5, robot.dof)
        q = np.clip(q, robot.limits.lower + 0.05, robot.limits.upper - 0.05)
        for sign in ("robot_on_tool", "tool_on_robot"):
            drv = MujocoRobot(robot, q0=q, tool=P.TOOL, sensor_sign=sign)
            sim = SimulatedSensor(tool_mass=P.TOOL.mass, tool_com=np.array(P.TOOL.com), sign=sign)
            np.testing.assert_allclose(drv.read_wrench(), sim.reading(robot.pose(q)), atol=1e-9)


def test_default_table_lies_under_the_tool_without_contact():
    for name in ROBOTS:
        drv = MujocoRobot.from_options(RobotModel.load(name), 0.002, {})
        tbl = drv.environment()["objects"][0]
        end = drv.tool_end()
        top = tbl["position"][2] + tbl["size"][2] / 2
        assert np.allclose(tbl["position"][:2], end[:2]) and end[2] - drv.tool.radius - top == pytest.approx(0.05)
        drv.send(None, np.zeros(drv.dof))
        assert drv.data.ncon == 0


def test_position_servo_blocked_by_a_wall_keeps_a_bounded_tracking_error():
    """A position-servoed arm driven into a hard wall: q_ref stays within max_tracking_error of
    q (no wind-up), nothing faults, and a stop request (send(None, 0)) holds the arm."""
    robot = RobotModel.load("ur10")
    end = MujocoRobot(robot, tool=P.TOOL).tool_end()
    wall = EnvObject("wall", (end[0] + P.TOOL.radius + 0.01 + 0.05, end[1], end[2]), (0.1, 0.5, 0.5),
                     stiffness=5000.0, damping=50.0)
    r = P.rig(robot, mode="position", law=P.ControlLaw(mode="admittance"), objects=[wall])
    errs = []
    for i in range(500):
        r.loop.set_wrench([60.0, 0, 0, 0, 0, 0], t=i * P.DT)
        s = r.loop.step(now=i * P.DT)
        errs.append(np.max(np.abs(s.q_ref - s.q)))
    print("max tracking error", max(errs), "contact", r.drv.contact_force())
    assert r.drv.contact_force()[0] < -1.0  # pressing on the wall (wall pushes back along −x)
    assert max(errs) <= r.loop.max_tracking_error + 1e-12 and r.loop.fault is None
    q = r.drv.read().q
    for _ in range(100):
        r.drv.send(None, np.zeros(robot.dof))
    assert np.max(np.abs(r.drv.read().q - q)) < r.loop.max_tracking_error


def test_bias_zeroing_on_the_mujoco_arm_holds_in_other_orientations():
    """A sensor with an offset: zeroing at one pose (tool mass known) leaves f_measured ≈ 0 at
    other poses — only if the gravity model and the sign are right."""
    robot = RobotModel.load("panda")
    bias = np.array([3.0, -2.0, 5.0, 0.2, -0.1, 0.3])
    q0 = np.array(HOME["panda"])
    r = P.rig(robot, law=P.force_law(gain=0.0), q0=q0)
    r.drv.sensor_bias = bias
    r.loop.zero_sensor()
    P.advance(r, 0.05)
    for dq in ([0.8, -0.6, 1.0], [-1.0, 0.5, -1.2]):
        q = q0.copy()
        q[-3:] += dq
        r2 = P.rig(robot, law=P.force_law(gain=0.0), q0=q)
        r2.drv.sensor_bias = bias
        r2.loop.filter.bias = r.loop.filter.bias.copy()
        s = P.advance(r2, 0.05)[-1]
        assert np.linalg.norm(s.f_measured[:3]) < 0.05 and np.linalg.norm(s.f_measured[3:]) < 0.005


def test_sensor_noise_is_seeded_with_the_configured_spread():
    robot = RobotModel.load("ur10")
    a, b = (MujocoRobot(robot, tool=P.TOOL, sensor_noise=0.5, seed=3) for _ in range(2))
    np.testing.assert_array_equal(a.read_wrench(), b.read_wrench())
    spread = np.std([a.read_wrench()[0] for _ in range(400)])
    assert 0.4 < spread < 0.6
