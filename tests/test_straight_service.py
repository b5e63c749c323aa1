"""Straight hand guiding on the real service with no setting but the mode, and an MJCF arm served
on the MuJoCo driver (the real uvicorn service on a loopback port, its loop process, MuJoCo)."""

from __future__ import annotations

import time

import httpx
import mujoco
import numpy as np
import pytest

from fdcontrol.model.robot import HOME, URDF_DIR
from tests.service import Service

TIMEOUT = 60.0  # s: only ends a hung test


def _state(svc: Service) -> dict:
    return httpx.get(svc.url + "/state", timeout=10).json()


def _guide(svc: Service, push: list[float], cycles: int = 500) -> tuple[np.ndarray, np.ndarray, dict]:
    """Force mode, released; a push for `cycles` loop cycles, timed by the loop's own record: the
    state stream (every cycle) gives the cycle where f_measured first shows the push and the tip
    pose `cycles` cycles later, however late this process reads them. Returns the tip position at
    the push's first cycle, `cycles` later, and that state."""
    import json

    from websockets.sync.client import connect

    r = httpx.patch(svc.url + "/config", json={"mode": "force"}, timeout=10)
    assert r.status_code == 200, r.text
    assert httpx.post(svc.url + "/control/hold", json={"hold": False}, timeout=10).status_code == 200
    deadline = time.monotonic() + TIMEOUT
    start = p0 = end = None
    with connect(svc.url.replace("http", "ws") + "/ws/state?decimation=1", open_timeout=TIMEOUT) as ws:
        pushed = False
        while time.monotonic() < deadline and end is None:
            s = json.loads(ws.recv(timeout=TIMEOUT))
            if "cycle" not in s:
                continue  # an event
            if not pushed:
                if s["running"] and not s["holding"] and s["cycle"] > 50:
                    assert httpx.put(svc.url + "/sim/push", json={"wrench": push}, timeout=10).status_code == 200
                    pushed = True
                continue
            if start is None:
                if np.linalg.norm(s["f_measured"][:3]) > 0.5 * np.linalg.norm(push[:3]):
                    start, p0 = s["cycle"], np.array(s["tip_pose"])[:3, 3]
            elif s["cycle"] >= start + cycles:
                end = s
    httpx.delete(svc.url + "/sim/push", timeout=10)
    assert end is not None, "the push was not seen in time"
    return p0, np.array(end["tip_pose"])[:3, 3], end


def _sideways(p0: np.ndarray, p1: np.ndarray, u: np.ndarray) -> tuple[float, float]:
    d = p1 - p0
    along = float(d @ u)
    return along, float(np.linalg.norm(d - along * u)) / along


@pytest.mark.parametrize("axis", [0, 1])
def test_default_service_guides_straight_at_the_start_pose(axis):
    """`fdcontrol serve` as installed (the MuJoCo UR10 with its sensor and tool): force mode, a 10 N
    push for 0.3 s at the start pose along base +x / +y — sideways < 1 % of the travel. The published γ
    is the schedule's value there, gamma_straight (1e6)."""
    svc = Service()
    try:
        u = np.eye(3)[axis]
        # 0.3 s: the tool travels about 10 cm (0.4 m/s), short of the margin of the start workspace box
        # (15 cm out), where the box begins to stop it
        p0, p1, s = _guide(svc, [*(10.0 * u), 0.0, 0.0, 0.0], cycles=150)
        along, side = _sideways(p0, p1, u)
        print(f"axis {axis}: along {along:.4f} m, sideways {100 * side:.3f} %, γ {s['gamma']}")
        assert along > 0.05 and side < 0.01
        assert s["gamma"] == 1e6 and s["fault"] is None
    finally:
        svc.stop()


def _mjcf_arm(tmp_path) -> str:
    """The shipped UR10 converted to MJCF by MuJoCo, with motor actuators of its own (force limits
    40 N·m on the wrist, below the URDF's 56: the driver must take them; 400 N·m elsewhere, above the
    URDF's) and the elbow's range removed (no position limit)."""
    spec = mujoco.MjSpec.from_file(str(URDF_DIR / "ur10.urdf"))
    spec.compiler.discardvisual, spec.compiler.fusestatic = True, False
    spec.joint("elbow_joint").limited = mujoco.mjtLimited.mjLIMITED_FALSE
    for j in spec.joints:
        a = spec.add_actuator(name=f"motor_{j.name}", target=j.name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        e = 40.0 if j.name.startswith("wrist") else 400.0
        a.forcelimited, a.forcerange = mujoco.mjtLimited.mjLIMITED_TRUE, [-e, e]
    spec.compile()
    f = tmp_path / "arm.xml"
    f.write_text(spec.to_xml())
    return str(f)


def test_mjcf_arm_runs_the_service_on_the_mujoco_driver(tmp_path):
    """`--robot arm.xml`: the service loads the MJCF (pinocchio for the controller, MuJoCo for the
    simulated arm: that file's own bodies, joints and actuator force limits), hand guiding works on it."""
    f = _mjcf_arm(tmp_path)
    cfg = tmp_path / "service.yaml"
    cfg.write_text(f"robot: {f}\ndriver_options:\n  q0: {HOME['ur10']}\n")
    svc = Service("--config", str(cfg))
    try:
        info = httpx.get(svc.url + "/config", timeout=10).json()
        assert info["robot"] == f
        s = _state(svc)
        assert len(s["q"]) == 6
        np.testing.assert_allclose(s["q"], HOME["ur10"], atol=2e-3)  # it holds the start pose
        p0, p1, s = _guide(svc, [0.0, 10.0, 0.0, 0.0, 0.0, 0.0])
        along, side = _sideways(p0, p1, np.array([0.0, 1.0, 0.0]))
        print(f"MJCF arm: along {along:.4f} m, sideways {100 * side:.3f} %")
        assert along > 0.05 and side < 0.01 and s["fault"] is None
    finally:
        svc.stop()


def test_mjcf_driver_takes_the_files_bodies_and_actuator_limits(tmp_path):
    """In-process: the MuJoCo driver on the MJCF simulates its bodies (the same kinematics as the
    controller's pinocchio model), replaces its actuators by the servo with their force limits, and
    leaves the elbow, which has no range, unbounded."""
    from fdcontrol import RobotModel
    from fdcontrol.drivers.mujoco import MujocoRobot

    f = _mjcf_arm(tmp_path)
    robot = RobotModel.resolve(f)
    assert robot.base == "world" and robot.tip == "tool0" and robot.dof == 6
    assert robot.limits.lower[2] == -np.inf and robot.limits.upper[2] == np.inf
    drv = MujocoRobot(robot, q0=HOME["ur10"])
    m = drv.model
    assert m.nu == 12  # the servo's two actuators per joint; the file's motors are gone
    np.testing.assert_allclose(m.jnt_actfrcrange[:, 1], [330, 330, 150, 40, 40, 40])  # the smaller of both
    assert not m.actuator_actlimited[4] and m.actuator_actlimited[0]  # the elbow's integrator (joint 3)
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = robot.random_q(rng)
        drv.data.qpos[:] = q
        mujoco.mj_kinematics(m, drv.data)
        np.testing.assert_allclose(drv.data.xpos[drv._tip_id], robot.pose(q)[:3, 3], atol=1e-12)
