"""UR RTDE driver against a recording fake of ur_rtde's two interface classes.

The fakes accept exactly the signatures of ur_rtde 1.6.5 (checked against the installed
package below), record every call, and integrate speedJ/servoJ like a robot would.
"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest

from fdcontrol.drivers.registry import build_driver
from fdcontrol.drivers.ur_rtde import UrRtdeDriver, UrSafetyError
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.mappings import make_mapping
from fdcontrol.model.robot import HOME, RobotModel

Q0 = np.array(HOME["ur10"])


class FakeControl:
    def __init__(self, log: list, robot: FakeReceive) -> None:
        self.log, self.robot, self.running = log, robot, True

    def _rec(self, name, *args):
        self.log.append((name, args))
        return True

    def setWatchdog(self, min_frequency: float = 10.0) -> bool:
        return self._rec("setWatchdog", min_frequency)

    def kickWatchdog(self) -> bool:
        return self._rec("kickWatchdog")

    def speedJ(self, qd: list, acceleration: float = 0.5, time: float = 0.0) -> bool:
        self.robot.qd = np.array(qd)
        return self._rec("speedJ", list(qd), acceleration, time)

    def servoJ(self, q, speed, acceleration, time, lookahead_time, gain) -> bool:
        return self._rec("servoJ", list(q), speed, acceleration, time, lookahead_time, gain)

    def speedStop(self, a: float = 10.0) -> bool:
        return self._rec("speedStop", a)

    def servoStop(self, a: float = 10.0) -> bool:
        return self._rec("servoStop", a)

    def zeroFtSensor(self) -> bool:
        return self._rec("zeroFtSensor")

    def isProgramRunning(self) -> bool:
        return self.running

    def reuploadScript(self) -> bool:
        self.running = True
        return self._rec("reuploadScript")

    def disconnect(self) -> None:
        self._rec("disconnect")


class FakeReceive:
    def __init__(self, log: list) -> None:
        self.log, self.q, self.qd, self.t = log, Q0.copy(), np.zeros(6), 0.0
        self.force = np.zeros(6)  # getActualTCPForce: base frame, at the TCP
        self.safety_mode, self.speed_scaling = 1, 0.75
        self.frozen = False  # the real interface refreshes its state at the RTDE rate on its own thread

    def advance(self, dt: float) -> None:
        self.q, self.t = self.q + dt * self.qd, self.t + dt

    def getActualQ(self) -> list:
        return self.q.tolist()

    def getActualQd(self) -> list:
        return self.qd.tolist()

    def getActualTCPForce(self) -> list:
        return self.force.tolist()

    def getActualTCPPose(self) -> list:
        """(x, y, z, rx, ry, rz), the orientation as a rotation vector (ur_rtde's docstring), computed with
        Universal Robots' published DH parameters (tests/test_robot.py::ur10_dh), not the project's model."""
        from scipy.spatial.transform import Rotation

        from .test_robot import ur10_dh

        T = ur10_dh(self.q)
        return [*T[:3, 3], *Rotation.from_matrix(T[:3, :3]).as_rotvec()]

    def getTimestamp(self) -> float:
        if not self.frozen:
            self.t += 0.002
        return self.t

    def getSafetyMode(self) -> int:
        return self.safety_mode

    def getSpeedScaling(self) -> float:
        return self.speed_scaling

    def disconnect(self) -> None:
        self.log.append(("receive.disconnect", ()))


def _pybind_signatures(fn) -> list[inspect.Signature]:
    """The real signatures of a pybind11 method, from the signature lines pybind11 writes (one per
    overload): names, and which parameters have defaults (the values are C++ reprs: kept as text)."""
    lines = [ln.strip() for ln in (fn.__doc__ or "").splitlines()]
    name = fn.__name__
    sigs = []
    for ln in lines:
        ln = ln.split(". ", 1)[1] if ln[:1].isdigit() and ". " in ln else ln  # "2. speedJ(...)" (overloads)
        if not ln.startswith(name + "(") or "->" not in ln:
            continue
        inner = ln[len(name) + 1: ln.rindex(") ->")]
        parts, depth, cur = [], 0, ""
        for ch in inner:  # split on the commas outside brackets (list[float], tuple[float, float])
            depth += 1 if ch in "[(" else -1 if ch in "])" else 0
            if ch == "," and depth == 0:
                parts.append(cur.strip())
                cur = ""
            else:
                cur += ch
        if cur.strip():
            parts.append(cur.strip())
        params = []
        for part in parts[1:]:  # after self
            pname, _, rest = part.partition(":")
            default = rest.split("=", 1)[1].strip() if "=" in rest else inspect.Parameter.empty
            pname = pname.strip()  # pybind11 names unnamed arguments arg0, arg1, …: by position only
            kind = inspect.Parameter.POSITIONAL_ONLY if re.fullmatch(r"arg\d+", pname) else \
                inspect.Parameter.POSITIONAL_OR_KEYWORD
            params.append(inspect.Parameter(pname, kind, default=default))
        sigs.append(inspect.Signature(params))
    return sigs


def test_fake_matches_the_real_ur_rtde_api():
    """Every method the fakes offer exists in ur_rtde with the same parameter names and the same
    required ones, and every call the driver made to the fakes in a session binds to a real
    signature (by position and keyword): a driver calling ur_rtde wrongly fails here."""
    rtde_control = pytest.importorskip("rtde_control")
    rtde_receive = pytest.importorskip("rtde_receive")
    reals = {FakeControl: rtde_control.RTDEControlInterface, FakeReceive: rtde_receive.RTDEReceiveInterface}
    for fake, real in reals.items():
        for name, fn in inspect.getmembers(fake, inspect.isfunction):
            if name.startswith("_") or name == "advance":
                continue
            sigs = _pybind_signatures(getattr(real, name))
            assert sigs, f"{name}: no signature in ur_rtde's docstring"
            mine = list(inspect.signature(fn).parameters.values())[1:]
            def same(real_sig, mine=mine):
                rp = list(real_sig.parameters.values())
                return len(rp) == len(mine) and all(
                    (r.kind == r.POSITIONAL_ONLY or r.name == m.name)
                    and (r.default is r.empty) == (m.default is m.empty)
                    for r, m in zip(rp, mine, strict=True))

            ok = [sg for sg in sigs if same(sg)]
            assert ok, f"{name}{inspect.signature(fn)} is none of ur_rtde's {[str(s) for s in sigs]}"
    # the calls a driver session makes (setWatchdog, speedJ, servoJ, speedStop, zeroFtSensor, …), as made:
    # positional and keyword arguments recorded before the fake binds them
    ur10 = RobotModel.load("ur10")
    for opts in ({}, {"interface": "position"}):
        calls: list[tuple[type, str, tuple, dict]] = []
        log: list = []
        rx = FakeReceive(log)
        ctl = FakeControl(log, rx)
        spy_ctl, spy_rx = _Spy(ctl, FakeControl, calls), _Spy(rx, FakeReceive, calls)
        drv = UrRtdeDriver(ur10, 0.002, host="ur.invalid", control_factory=lambda h, f, c=spy_ctl: c,
                           receive_factory=lambda h, f, r=spy_rx: r, **opts)
        loop = loop_for(ur10, drv)
        loop._running.set()
        loop.set_wrench([20.0, 0, 0, 0, 0, 0])
        for _ in range(5):
            loop.step()
        loop.zero_sensor()
        loop.hold(True)
        for _ in range(5):
            loop.step()
        drv.close()
        names = {name for _, name, _, _ in calls}
        assert {"speedJ", "servoJ"} & names and "getActualQ" in names, names
        for cls, name, args, kwargs in calls:
            sigs = _pybind_signatures(getattr(reals[cls], name))
            assert any(_binds(sg, args, kwargs) for sg in sigs), (name, args, kwargs, [str(x) for x in sigs])


class _Spy:
    """Records each method call on a fake as the driver made it, then makes it."""

    def __init__(self, target, cls, calls) -> None:
        self._target, self._cls, self._calls = target, cls, calls

    def __getattr__(self, name):
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            self._calls.append((self._cls, name, args, kwargs))
            return attr(*args, **kwargs)

        return call


def _binds(sig: inspect.Signature, args: tuple, kwargs: dict) -> bool:
    try:
        sig.bind(*args, **kwargs)
        return True
    except TypeError:
        return False


@pytest.fixture
def ur10() -> RobotModel:
    return RobotModel.load("ur10")


def make(ur10, **opts):
    log: list = []
    rx = FakeReceive(log)
    ctl = FakeControl(log, rx)
    drv = UrRtdeDriver(ur10, 0.002, host="ur.invalid", control_factory=lambda h, f: ctl,
                       receive_factory=lambda h, f: rx, **opts)
    return drv, ctl, rx, log


def loop_for(ur10, drv) -> ControlLoop:
    limits = SafetyLimits.from_robot(ur10, max_acceleration=2.0)
    return ControlLoop(ur10, drv, make_solver(make_mapping("fd", ur10)), limits=limits, rate=500)


def test_one_cycle_sends_one_speedj_with_the_limited_reference_and_kicks_the_watchdog(ur10):
    drv, _ctl, rx, log = make(ur10, watchdog_frequency=20.0)
    assert log[0] == ("setWatchdog", (20.0,))
    loop = loop_for(ur10, drv)
    loop._running.set()  # as if started, without the thread: cycles run synchronously
    loop.set_wrench([50.0, 0, 0, 0, 0, 0])
    log.clear()
    loop.step()  # activation: a zero reference, nothing streamed yet, the watchdog fed
    assert [n for n, _ in log] == ["kickWatchdog"]
    for _ in range(5):
        log.clear()
        st = loop.step()
        rx.advance(0.002)
        speeds = [a for n, a in log if n == "speedJ"]
        assert len(speeds) == 1 and [n for n, _ in log].count("kickWatchdog") == 1
        qd, acc, t = speeds[0]
        np.testing.assert_allclose(qd, st.qd_ref, atol=0)  # exactly the loop's limited reference (rad/s)
        assert t == 0.002 and acc == 5.0
        assert [n for n, _ in log].index("kickWatchdog") > [n for n, _ in log].index("speedJ")
    # the loop's acceleration limit (2 rad/s²) bounds each step: it reached the robot unmodified
    assert np.max(np.abs(st.qd_ref)) <= 2.0 * 0.002 * 6 + 1e-12 and np.any(st.qd_ref != 0)


def test_position_interface_sends_servoj_with_lookahead_and_gain(ur10):
    drv, _ctl, _rx, log = make(ur10, interface="position", lookahead_time=0.05, gain=500)
    loop = loop_for(ur10, drv)
    loop._running.set()
    loop.set_wrench([50.0, 0, 0, 0, 0, 0])
    loop.step()
    log.clear()
    st = loop.step()
    servo = [a for n, a in log if n == "servoJ"]
    assert len(servo) == 1 and "speedJ" not in [n for n, _ in log]
    q, _speed, _acc, t, lookahead, gain = servo[0]
    np.testing.assert_allclose(q, st.q_ref, atol=0)
    assert (t, lookahead, gain) == (0.002, 0.05, 500)


def test_tcp_force_arrives_as_f_measured_in_the_documented_sign_and_frame(ur10):
    drv, _ctl, rx, _log = make(ur10)
    loop = loop_for(ur10, drv)
    loop.filter.cutoff = 0.0
    # a person pushes the tool towards +x (base) with 12 N and twists it about +z with 1.5 N·m:
    # UR reports the environment's wrench on the TCP in its base frame
    rx.force = np.array([12.0, 0.0, 0.0, 0.0, 0.0, 1.5])
    st = loop.step()
    # fdcontrol's convention: the tool on the environment, base frame after the loop's filter
    np.testing.assert_allclose(st.f_measured, [-12.0, 0, 0, 0, 0, -1.5], atol=1e-9)
    raw = drv.read_wrench()  # and the raw reading is in the tip frame (the sensor contract)
    R = ur10.pose(rx.q)[:3, :3]
    np.testing.assert_allclose(R @ raw[:3], [-12.0, 0, 0], atol=1e-9)
    assert abs(np.linalg.norm(raw[:3]) - 12.0) < 1e-9 and not np.allclose(raw[:3], [-12.0, 0, 0])


def _ur_driver_tool_wrench(force_base: np.ndarray, tcp_pose: list) -> np.ndarray:
    """The wrench in the TCP frame as Universal Robots' own ROS driver computes it from RTDE's
    actual_TCP_force and the TCP pose (UniversalRobots/Universal_Robots_ROS_Driver,
    ur_robot_driver/src/hardware_interface.cpp, HardwareInterface::transformForceTorque, CB3 branch:
    ``ft = base_to_tcp_rot.Inverse() * ft`` with the rotation from the pose's rotation vector; on the
    e-Series the same with a zero TCP offset, as here). Written from that source, not from fdcontrol."""
    from scipy.spatial.transform import Rotation

    R = Rotation.from_rotvec(tcp_pose[3:]).as_matrix()  # UR robots operate in axis-angle (rotation vector)
    return np.concatenate((R.T @ force_base[:3], R.T @ force_base[3:]))


def test_tcp_force_against_urs_documented_convention_at_random_configurations(ur10):
    """UR's convention from UR's own sources, not the driver's: ``actual_TCP_force`` is the external wrench
    acting at the TCP (URScript manual, get_tcp_force: "the wrench (Force/Torque vector) at the TCP. The
    external wrench is computed based on the error between the joint torques required to stay on the
    trajectory and the expected joint torques"), its forces and torques along the axes of the robot's base
    coordinate system (ibid.: "forces in the axes of the robot base coordinate system", torques "around these
    axes"), turned into the tool frame with the TCP pose's rotation vector as UR's ROS driver does
    (:func:`_ur_driver_tool_wrench`). fdcontrol's convention is the opposite sign (the tool on the
    environment, fdcontrol.control.law). So at any configuration the driver's tip-frame reading is minus UR's
    driver's tool-frame wrench, and the loop's base-frame f_measured is minus UR's reading."""
    rng = np.random.default_rng(40)
    drv, _ctl, rx, _log = make(ur10)
    loop = loop_for(ur10, drv)
    loop.filter.cutoff = 0.0
    for _ in range(20):
        rx.q = ur10.random_q(rng)
        rx.force = rng.normal(size=6) * [20, 20, 20, 2, 2, 2]
        st = loop.step()
        expected_tool = -_ur_driver_tool_wrench(rx.force, rx.getActualTCPPose())
        np.testing.assert_allclose(drv.read_wrench(), expected_tool, atol=1e-9)
        np.testing.assert_allclose(st.f_measured, -rx.force, atol=1e-9)


def _doc_param(fn, name: str) -> str:
    """A parameter's description in the installed ur_rtde's own docstring ("Parameter ``name``: …")."""
    doc = fn.__doc__ or ""
    m = re.search(rf"Parameter ``{name}``:\s*(.*?)(?:\n\s*\n|\Z)", doc, re.S)
    assert m, f"{fn.__name__}: no description of {name!r} in ur_rtde's docstring"
    return " ".join(m.group(1).split())


def test_commands_use_the_units_and_ranges_ur_rtde_documents(ur10):
    """The units and ranges come from the installed ur_rtde's own docstrings (not restated here): speedJ
    takes joint speeds in rad/s, an acceleration in rad/s² and a time in s; servoJ positions in rad, a
    time in s, lookahead_time and gain within the documented ranges — so the loop's reference (rad/s,
    rad) reaches the robot unscaled, the time is the loop's period in s, and the driver refuses exactly the
    settings outside ur_rtde's ranges."""
    rtde_control = pytest.importorskip("rtde_control")
    C = rtde_control.RTDEControlInterface
    assert "[rad/s]" in _doc_param(C.speedJ, "qd")
    assert "[rad/s^2]" in _doc_param(C.speedJ, "acceleration")
    assert "[s]" in _doc_param(C.speedJ, "time")
    assert "[rad]" in _doc_param(C.servoJ, "q")
    assert "[S]" in _doc_param(C.servoJ, "time")
    assert "[rad/s^2]" in _doc_param(C.speedStop, "a")  # for speedJ: of the leading axis
    ranges = {}
    for name in ("lookahead_time", "gain"):
        m = re.search(r"range \[([0-9.]+),\s*([0-9.]+)\]", _doc_param(C.servoJ, name))
        assert m, name
        ranges[name] = (float(m.group(1)), float(m.group(2)))
    (lo_t, hi_t), (lo_g, hi_g) = ranges["lookahead_time"], ranges["gain"]
    for lookahead, gain in ((lo_t, lo_g), (hi_t, hi_g)):
        make(ur10, interface="position", lookahead_time=lookahead, gain=gain)
    for lookahead, gain in ((lo_t * 0.999, lo_g), (hi_t * 1.001, hi_g), (lo_t, lo_g * 0.999), (lo_t, hi_g * 1.001)):
        with pytest.raises(ValueError, match="lookahead_time"):
            make(ur10, interface="position", lookahead_time=lookahead, gain=gain)
    for interface in ("velocity", "position"):
        drv, _ctl, rx, log = make(ur10, interface=interface)
        loop = loop_for(ur10, drv)
        loop._running.set()
        loop.set_wrench([50.0, 0, 0, 0, 0, 0])
        loop.step()
        for _ in range(3):
            log.clear()
            st = loop.step()
            rx.advance(loop.period)
            if interface == "velocity":
                (qd, acc, t), = [a for n, a in log if n == "speedJ"]
                np.testing.assert_array_equal(qd, st.qd_ref)  # rad/s, the loop's own
                assert acc == drv.acceleration and t == loop.period == 0.002  # rad/s², s
            else:
                (q, _speed, _acc, t, lookahead, gain), = [a for n, a in log if n == "servoJ"]
                np.testing.assert_array_equal(q, st.q_ref)  # rad
                assert t == loop.period and lo_t <= lookahead <= hi_t and lo_g <= gain <= hi_g


def test_safety_mode_names_are_urs():
    """The safety-mode codes of RTDE's ``safety_mode`` as Universal Robots names them (ur_dashboard_msgs
    msg/SafetyMode.msg of UR's ROS driver; the same numbers in ur_client_library's SafetyStatus enum,
    include/ur_client_library/ur/datatypes.h), transcribed here; only NORMAL and REDUCED let the arm move."""
    from fdcontrol.drivers.ur_rtde import OK_SAFETY, SAFETY_MODES

    ur = {1: "NORMAL", 2: "REDUCED", 3: "PROTECTIVE_STOP", 4: "RECOVERY", 5: "SAFEGUARD_STOP",
          6: "SYSTEM_EMERGENCY_STOP", 7: "ROBOT_EMERGENCY_STOP", 8: "VIOLATION", 9: "FAULT",
          10: "VALIDATE_JOINT_ID", 11: "UNDEFINED_SAFETY_MODE", 12: "AUTOMATIC_MODE_SAFEGUARD_STOP",
          13: "SYSTEM_THREE_POSITION_ENABLING_STOP"}
    assert SAFETY_MODES == ur and set(OK_SAFETY) == {1, 2}


def test_base_yaw_for_ur_description_base_link(ur10):
    drv, _ctl, rx, _log = make(ur10, base_yaw=math.pi)
    rx.force = np.array([12.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    drv.read()
    R = ur10.pose(rx.q)[:3, :3]
    np.testing.assert_allclose(R @ drv.read_wrench()[:3], [12.0, 0, 0], atol=1e-9)  # −(−x) after the π turn


def test_zero_sensor_calls_zeroftsensor_in_the_loop(ur10):
    drv, _ctl, _rx, log = make(ur10)
    loop = loop_for(ur10, drv)
    loop.zero_sensor()
    log.clear()
    loop.step()
    assert [n for n, _ in log].count("zeroFtSensor") == 1
    log.clear()
    loop.step()
    assert "zeroFtSensor" not in [n for n, _ in log]


def test_stop_hold_and_fault_call_speedstop(ur10):
    drv, _ctl, rx, log = make(ur10)
    loop = loop_for(ur10, drv)
    loop._running.set()  # as if started, without the thread: cycles run synchronously
    loop.set_wrench([50.0, 0, 0, 0, 0, 0])
    for _ in range(3):
        loop.step()
    assert "speedStop" not in [n for n, _ in log]
    loop.hold(True)
    for _ in range(200):  # decelerate within the limit, then leave speed mode once
        loop.step()
    assert [n for n, _ in log].count("speedStop") == 1
    loop.hold(False)
    loop.set_wrench([50.0, 0, 0, 0, 0, 0])
    loop.step()
    log.clear()
    rx.safety_mode = 3  # protective stop: a fault, reported by name, and speedStop
    with pytest.raises(UrSafetyError, match="PROTECTIVE_STOP"):
        loop.step()
    from fdcontrol.loop.cycle import _hold_after
    _hold_after(loop, UrSafetyError("UR safety mode 3 (PROTECTIVE_STOP)"))
    assert ("speedStop", (10.0,)) in log and drv.status["safety_mode_name"] == "PROTECTIVE_STOP"
    assert drv.status["speed_scaling"] == 0.75
    rx.safety_mode = 1
    loop.hold(False)  # released: moving again, then stopped
    loop.set_wrench([50.0, 0, 0, 0, 0, 0])
    for _ in range(3):
        loop.step()
    assert [n for n, _ in log].count("speedJ") >= 2
    log.clear()
    loop._running.clear()
    loop.stop()
    names = [n for n, _ in log]
    assert names.count("speedJ") <= 1 and all(a[0] == [0.0] * 6 for n, a in log if n == "speedJ")
    assert names.count("speedStop") == 1  # the stop leaves speed mode after the zero command


def test_stale_rtde_state_faults(ur10):
    drv, _ctl, rx, _log = make(ur10, timeout=0.05)
    drv.read()
    rx.frozen = True
    drv.read()
    import time
    time.sleep(0.08)  # the timestamp stopped advancing
    with pytest.raises(Exception, match="no new RTDE state"):
        drv.read()


def test_factories_are_not_settings(ur10):
    with pytest.raises(ValueError, match="Python API"):
        build_driver("ur_rtde", ur10, 0.002, {"host": "x", "control_factory": "os:system"})


def test_restart_after_the_watchdog_ended_the_script_reuploads_it(ur10):
    drv, ctl, _rx, log = make(ur10, watchdog_frequency=10.0)
    loop = loop_for(ur10, drv)
    loop._running.set()
    loop.step()
    ctl.running = False  # idle longer than 1/10 s: the robot's watchdog ended the control script
    loop.set_wrench([50.0, 0, 0, 0, 0, 0])
    log.clear()
    loop.step()
    names = [n for n, _ in log]
    assert names[:4] == ["reuploadScript", "setWatchdog", "speedJ", "kickWatchdog"]
    log.clear()
    loop.step()
    assert "reuploadScript" not in [n for n, _ in log]


def test_speed_scaling_and_safety_mode_reach_the_state_and_the_api(ur10):
    """The fake's getSpeedScaling / getSafetyMode appear in LoopState, and in /state's encoding
    (the worker's shared memory → state_dict → the app's State model)."""
    pytest.importorskip("fastapi")
    from fdcontrol.server import channel, schemas
    from fdcontrol.server.app import state_dict

    drv, _ctl, rx, _log = make(ur10)
    loop = loop_for(ur10, drv)
    loop._running.set()
    st = loop.step()
    assert (st.speed_scaling, st.safety_mode) == (0.75, "NORMAL")
    rx.speed_scaling, rx.safety_mode = 0.3, 2
    st = loop.step()
    assert (st.speed_scaling, st.safety_mode) == (0.3, "REDUCED")
    ch = channel.Channel()
    try:
        ch.write_state(st, 1.0)
        d = {**state_dict(ch.read_state()[0]), "stale": False}
    finally:
        ch.close(unlink=True)
    assert (d["speed_scaling"], d["safety_mode"]) == (0.3, "REDUCED")
    api = schemas.State.model_validate(d)
    assert (api.speed_scaling, api.safety_mode) == (0.3, "REDUCED")
    from fdcontrol.server.metrics import _robot_gauges

    samples = {(m.samples[0].name, tuple(m.samples[0].labels.items())): m.samples[0].value for m in _robot_gauges(st)}
    assert samples == {("fdcontrol_robot_speed_scaling", ()): 0.3,
                       ("fdcontrol_robot_safety_mode", (("mode", "REDUCED"),)): 1.0}


def test_drivers_without_them_publish_null(ur10):
    """The kinematic simulator (and the MuJoCo arm) have no speed scaling or safety mode: null."""
    from fdcontrol.drivers import SimulatedRobot
    from fdcontrol.loop.state import to_dict

    loop = ControlLoop(ur10, SimulatedRobot(ur10, q0=Q0), make_solver(make_mapping("fd", ur10)))
    d = to_dict(loop.step())
    assert d["speed_scaling"] is None and d["safety_mode"] is None
    from fdcontrol.drivers import mujoco  # the project's own module (the mujoco extra is in make test)

    d = to_dict(ControlLoop(ur10, mujoco.MujocoRobot(ur10), make_solver(make_mapping("fd", ur10))).step())
    assert d["speed_scaling"] is None and d["safety_mode"] is None
