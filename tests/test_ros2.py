"""ROS 2 bridge: a separate process plays ros2_control over DDS on loopback; the real service
runs `fdcontrol serve --driver ros2` against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

from fdcontrol.robot import HOME, RobotModel
from tests.dds import dds_domain, loopback_env
from tests.service import ROOT, Service

DOMAIN = dds_domain()


def start_peer(interface: str, q0: list[float], wrench_tool: np.ndarray, seconds: float = 60) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.ros2_peer", str(DOMAIN), interface, json.dumps(q0),
                             json.dumps(list(map(float, wrench_tool))), str(seconds)],
                            cwd=ROOT, env={**os.environ, **loopback_env()}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def serve(interface: str, mode: str = "force", **extra) -> Service:
    opts = {"domain_id": DOMAIN, "interface": interface, "connect_timeout": 20, **extra}
    env = {**loopback_env(), "FDCONTROL_DRIVER_OPTIONS": json.dumps(opts), "FDCONTROL_MODE": mode}
    return Service("--driver", "ros2", "--robot", "ur10", env=env)


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def state(svc: Service) -> dict:
    return httpx.get(svc.url + "/state", timeout=5).json()


@pytest.fixture(scope="module")
def ur10() -> RobotModel:
    return RobotModel.load("ur10")


def push_in_tool_frame(robot: RobotModel, q0: list[float], f_base: np.ndarray) -> np.ndarray:
    """A ROS sensor reading (environment on the tool, tool0 frame) of a push f_base (base frame)."""
    R = robot.pose(np.array(q0))[:3, :3]
    return np.concatenate((R.T @ f_base, np.zeros(3)))


@pytest.mark.parametrize("interface", ["velocity", "position"])
def test_pushed_sensor_moves_the_arm_along_the_push(ur10, interface):
    q0 = HOME["ur10"]
    push = np.array([15.0, 0.0, 0.0])  # a hand pushes the tool towards +x (base)
    peer = start_peer(interface, q0, push_in_tool_frame(ur10, q0, push))
    svc = None
    try:
        svc = serve(interface)
        s0 = state(svc)
        assert np.allclose(s0["q"], q0, atol=0.05), "joint_states shuffled by name must map onto the model order"
        r = httpx.post(svc.url + "/control/start", timeout=5)
        assert r.status_code == 200, r.text
        p0 = np.array(s0["tip_pose"])[:3, 3]
        def moved():
            p = np.array(state(svc)["tip_pose"])[:3, 3]
            return (p,) if abs(p[0] - p0[0]) > 0.02 else None
        (p,) = wait_for(moved, 20, "the tip to move")
        d = p - p0
        assert d[0] > 0.02 and abs(d[0]) > 3 * max(abs(d[1]), abs(d[2])), f"moved {d}, expected along +x"
        st = state(svc)
        assert st["fault"] is None and not st["holding"]
    finally:
        if svc is not None:
            svc.stop()
        peer.kill()
        peer.wait(5)


def test_killing_the_peer_faults_into_hold_within_the_timeout(ur10):
    q0 = HOME["ur10"]
    peer = start_peer("velocity", q0, np.zeros(6))
    svc = None
    try:
        svc = serve("velocity", mode="admittance")
        assert httpx.post(svc.url + "/control/start", timeout=5).status_code == 200
        wait_for(lambda: state(svc)["running"], 5, "running")
        peer.kill()
        peer.wait(5)
        t_kill = time.monotonic()
        st = wait_for(lambda: (s := state(svc))["holding"] and s["fault"] and s, 5, "the hold")
        elapsed = time.monotonic() - t_kill
        assert "joint_states" in st["fault"]
        assert elapsed < 2.0, f"hold after {elapsed:.2f} s"  # 0.1 s timeout + HTTP polling on a busy VM
        assert st["qd_ref"] == [0.0] * 6
    finally:
        if svc is not None:
            svc.stop()
        peer.kill()
