"""ROS 2 bridge: a separate process plays ros2_control over DDS on loopback; the real service
runs `fdcontrol serve --driver ros2` against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from fdcontrol.loop.state import to_dict
from fdcontrol.model.robot import HOME, RobotModel
from tests.dds import dds_domain, loopback_env, pin_loopback
from tests.service import ROOT, Service
from tests.waits import HUNG

pin_loopback()  # this process joins the DDS domain too (in-process tests): loopback only
DOMAIN = dds_domain()


def start_peer(interface: str, q0: list[float], wrench_tool: np.ndarray, seconds: float = 60) -> subprocess.Popen:
    """The peer, once it publishes: its start (imports, DDS) must not eat into the service's
    connect_timeout on a loaded machine. Its output goes to a file (an undrained pipe would
    block it after a minute of lines)."""
    out = tempfile.NamedTemporaryFile("w+", prefix="ros2-peer-", suffix=".log")
    peer = subprocess.Popen([sys.executable, "-m", "tests.ros2_peer", str(DOMAIN), interface, json.dumps(q0),
                             json.dumps(list(map(float, wrench_tool))), str(seconds)],
                            cwd=ROOT, env={**os.environ, **loopback_env()}, stdout=out,
                            stderr=subprocess.STDOUT, text=True)
    peer.log = out  # type: ignore[attr-defined]  # closed (deleted) with the Popen object
    deadline = time.monotonic() + 60
    while not Path(out.name).read_text().startswith("q "):
        if peer.poll() is not None or time.monotonic() > deadline:
            peer.kill()
            raise RuntimeError(f"the ROS 2 peer did not start: {Path(out.name).read_text()[-2000:]}")
        time.sleep(0.05)
    return peer


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


#: a state's ``stamp`` is taken just after the driver's read that checked the joint states' age
#: (and the command poll): a preemption between the two on a loaded machine adds to it
STAMP_SLACK = 0.02


def last_live_cycle_after(st: dict, t_kill: float) -> float:
    """How long after the peer died (``t_kill``, this host's monotonic clock) the loop ran its last
    cycle on joint states, from a fault state: a fault publishes the last good cycle's ``stamp``
    (the loop's clock, the same host's monotonic), so the answer does not depend on how fast
    anyone polls. Within ``timeout`` when the driver refuses states older than its timeout."""
    return st["stamp"] - t_kill


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
        s0 = svc.state()
        assert np.allclose(s0["q"], q0, atol=0.05), "joint_states shuffled by name must map onto the model order"
        r = httpx.post(svc.url + "/control/start", timeout=5)
        assert r.status_code == 200, r.text
        p0 = np.array(s0["tip_pose"])[:3, 3]
        def moved():
            p = np.array(svc.state()["tip_pose"])[:3, 3]
            return (p,) if abs(p[0] - p0[0]) > 0.02 else None
        (p,) = wait_for(moved, 20, "the tip to move")
        d = p - p0
        assert d[0] > 0.02 and abs(d[0]) > 3 * max(abs(d[1]), abs(d[2])), f"moved {d}, expected along +x"
        st = svc.state()
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
        wait_for(lambda: svc.state()["running"], 5, "running")
        peer.kill()
        peer.wait(5)
        t_kill = time.monotonic()  # the peer's last joint_states was sent before this
        st = wait_for(lambda: (s := svc.state())["holding"] and s["fault"] and s, 5, "the hold")
        assert "joint_states" in st["fault"]
        assert st["qd_ref"] == [0.0] * 6
        ran_on_stale = last_live_cycle_after(st, t_kill)
        print(f"last cycle on live joint states {ran_on_stale * 1e3:.1f} ms after the peer died (timeout 100 ms)")
        assert ran_on_stale <= 0.1 + STAMP_SLACK, "the loop kept running on joint states older than the timeout"
    finally:
        if svc is not None:
            svc.stop()
        peer.kill()


class Side:
    """This process's own DDS participant, as a ROS tool (RViz, a teleop node) would be."""

    def __init__(self, interface: str = "velocity") -> None:
        from cyclonedds.core import Policy
        from cyclonedds.domain import DomainParticipant
        from cyclonedds.pub import DataWriter
        from cyclonedds.qos import Qos
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        from fdcontrol.drivers import ros2_msgs as m

        self.m = m
        self.dp = DomainParticipant(DOMAIN)
        qos = Qos(Policy.Reliability.Reliable(max_blocking_time=0), Policy.History.KeepLast(1000))
        self.cmd = DataReader(self.dp, Topic(self.dp, f"rt/forward_{interface}_controller/commands",
                                             m.Float64MultiArray), qos=qos)
        self.pose = DataReader(self.dp, Topic(self.dp, "rt/current_pose", m.PoseStamped), qos=qos)
        self.state = DataReader(self.dp, Topic(self.dp, "rt/fdcontrol/state", m.String), qos=qos)
        self.target = DataWriter(self.dp, Topic(self.dp, "rt/target_wrench", m.WrenchStamped), qos=qos)

    def take(self, reader) -> list:
        from cyclonedds.internal import InvalidSample

        return [s for s in reader.take(N=1000) if not isinstance(s, InvalidSample)]

    def push(self, f: list[float], frame: str = "base_link") -> None:
        m = self.m
        self.target.write(m.WrenchStamped(m.Header(m.Time(), frame), m.Wrench(m.Vector3(*f[:3]), m.Vector3(*f[3:]))))


def in_process_loop(robot: RobotModel, **opts):
    from fdcontrol.drivers.ros2 import Ros2Driver
    from fdcontrol.loop.cycle import ControlLoop
    from fdcontrol.loop.solvers import make_solver
    from fdcontrol.mappings import make_mapping

    drv = Ros2Driver(robot, 0.002, domain_id=DOMAIN, connect_timeout=20, **opts)
    return drv, ControlLoop(robot, drv, make_solver(make_mapping("fd", robot)), rate=500, command_timeout=0.1)


def test_target_wrench_in_current_pose_and_state_out_stale_hold_and_zero_after_stop(ur10):
    side = Side()
    peer = start_peer("velocity", HOME["ur10"], np.zeros(6))
    drv = None
    try:
        drv, loop = in_process_loop(ur10, publish_every=5)
        loop.start()
        p0 = loop.state.tip_pose[:3, 3].copy()
        # a teleop node streams target_wrench at 50 Hz, for 1.5 s of the loop's own cycles (500 Hz) from the
        # first wrench the loop took (DDS discovery may take a while on a loaded machine); the deadline only
        # ends a hung test
        deadline = time.monotonic() + HUNG
        while loop.state.seq_ack == 0:
            assert time.monotonic() < deadline, "no target_wrench reached the loop"
            side.push([0.0, 0.0, 20.0, 0.0, 0.0, 0.0])
            time.sleep(0.02)
        c0 = loop.state.cycle
        while loop.state.cycle < c0 + 750:
            assert time.monotonic() < deadline, loop.state.cycle
            side.push([0.0, 0.0, 20.0, 0.0, 0.0, 0.0])
            time.sleep(0.02)
        d = loop.state.tip_pose[:3, 3] - p0
        assert d[2] > 0.02 and abs(d[2]) > 3 * max(abs(d[0]), abs(d[1])), f"moved {d}, expected along +z"
        assert loop.state.watchdog in ("ok", "tripped") and loop.state.seq_ack > 10
        poses = side.take(side.pose)
        assert len(poses) > 20 and poses[-1].header.frame_id == ur10.base
        last = poses[-1].pose.position
        np.testing.assert_allclose([last.x, last.y, last.z], loop.state.tip_pose[:3, 3], atol=0.01)
        states = [json.loads(s.data) for s in side.take(side.state)]
        assert states and states[-1]["running"] and states[-1]["mode"] == "admittance"
        # a wrench in a frame fdcontrol does not know is refused, not applied
        side.push([0.0, 0.0, 20.0, 0.0, 0.0, 0.0], frame="camera_link")
        wait_for(lambda: "camera_link" in drv.rejected.get("target_wrench", ""), 5, "the refusal of camera_link")
        # the peer dies: the loop holds within the timeout (+ one cycle; margin for a shared VM)
        peer.kill()
        peer.wait(5)
        t_kill = time.monotonic()
        wait_for(lambda: loop.state.fault is not None, 5, "the fault")
        assert loop.state.holding and "joint_states" in loop.state.fault
        ran_on_stale = last_live_cycle_after(to_dict(loop.state), t_kill)
        assert ran_on_stale <= 0.1 + STAMP_SLACK, f"last cycle on live states {ran_on_stale:.3f} s after the kill"
        side.take(side.cmd)
        loop.stop()  # brakes within the acceleration limit (fdcontrol.loop.cycle.ControlLoop.stop), then ends
        braking: list = []

        def at_standstill() -> bool:  # the stop's last command delivered (DDS: a deadline, not a fixed wait)
            braking.extend(side.take(side.cmd))
            return bool(braking) and list(braking[-1].data) == [0.0] * 6

        wait_for(at_standstill, 5, "the stop's zero command")  # stop ends at standstill
        time.sleep(0.2)
        after = side.take(side.cmd)
        assert all(list(c.data) == [0.0] * 6 for c in after), \
            f"after stop only zero velocities: {[list(c.data) for c in after][:5]}"
    finally:
        if drv is not None:
            drv.close()
        peer.kill()
        peer.wait(5)


def test_wrench_in_another_frame_faults(ur10):
    peer = start_peer("velocity", HOME["ur10"], np.zeros(6))
    drv = None
    try:
        drv, _ = in_process_loop(ur10, sensor_frame="ft_sensor_link")
        deadline = time.monotonic() + 5
        with pytest.raises(ValueError, match="'tool0' is not the sensor frame 'ft_sensor_link'"):
            while time.monotonic() < deadline:
                drv.read_wrench()
                time.sleep(0.01)
    finally:
        if drv is not None:
            drv.close()
        peer.kill()
        peer.wait(5)


def test_commands_follow_the_controllers_joint_order(ur10):
    side = Side("position")
    peer = start_peer("velocity", HOME["ur10"], np.zeros(6))  # publishes joint_states only for this test
    drv = None
    try:
        order = list(reversed(ur10.joint_names))
        drv, loop = in_process_loop(ur10, interface="position", controller_joints=order)
        side.take(side.cmd)
        st = loop.step()
        deadline = time.monotonic() + 5
        cmds: list = []
        while not cmds and time.monotonic() < deadline:
            cmds = side.take(side.cmd)
            time.sleep(0.01)
        assert cmds, "no command on forward_position_controller/commands"
        c = cmds[-1]
        np.testing.assert_allclose(c.data, st.q_ref[::-1], atol=0)
        assert c.layout.dim[0].size == 6 and c.layout.dim[0].label == "joints"
    finally:
        if drv is not None:
            drv.close()
        peer.kill()
        peer.wait(5)


def test_compose_example_matches_the_driver_and_pins_dds_to_loopback():
    """compose.ros2.yaml: every driver option is one Ros2Driver accepts, both containers share the
    same loopback-pinned Cyclone DDS settings and domain, and the ROS side runs Cyclone DDS."""
    import inspect

    import yaml

    from fdcontrol.drivers.ros2 import Ros2Driver

    doc = yaml.safe_load((ROOT / "compose.ros2.yaml").read_text())
    fd, ros = doc["services"]["fdcontrol"], doc["services"]["ur-driver"]
    opts = json.loads(fd["environment"]["FDCONTROL_DRIVER_OPTIONS"])
    params = inspect.signature(Ros2Driver.__init__).parameters
    assert set(opts) <= set(params), set(opts) - set(params)
    assert fd["environment"]["FDCONTROL_DRIVER"] == "ros2"
    uri = fd["environment"]["CYCLONEDDS_URI"]
    assert uri == ros["environment"]["CYCLONEDDS_URI"]
    assert '<NetworkInterface name="lo"/>' in uri and "<AllowMulticast>false</AllowMulticast>" in uri
    assert '<Peer address="127.0.0.1"/>' in uri
    assert ros["environment"]["RMW_IMPLEMENTATION"] == "rmw_cyclonedds_cpp"
    assert str(opts["domain_id"]) == ros["environment"]["ROS_DOMAIN_ID"]
    assert fd["network_mode"] == ros["network_mode"] == "host"
    assert "initial_joint_controller:=forward_velocity_controller" in ros["command"]
    assert opts["command"] == "forward_velocity_controller/commands" and opts["interface"] == "velocity"
