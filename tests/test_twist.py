"""Twist input (fdcontrol.control.twist): velocity tracking in the loop and through the real service."""

from __future__ import annotations

import json

import numpy as np
import pytest
from websockets.sync.client import connect

from fdcontrol import RobotModel, make_mapping
from fdcontrol.client import Client, ServiceError
from fdcontrol.control.law import ControlInput
from fdcontrol.control.twist import TwistTerm, admittance_damping
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.limits.safety import SafetyLimits
from fdcontrol.loop.cycle import ControlLoop, InputError
from fdcontrol.model.robot import HOME

from .service import Service
from .waits import cycles_later, until

DT = 0.002
V = np.array([0.05, 0.0, 0.0, 0.0, 0.0, 0.0])


def make(name, limits=None, mapping="fd"):
    robot = RobotModel.load(name)
    sim = SimulatedRobot(robot, dt=DT, q0=np.array(HOME[name]))
    from fdcontrol.loop.solvers import make_solver

    return robot, sim, ControlLoop(robot, sim, make_solver(make_mapping(mapping, robot)), rate=1 / DT,
                                   limits=limits)


def stream(loop, robot, sim, twist, seconds, t0=0.0, frame="base"):
    """Stream `twist` every cycle on simulated time; return tip positions per cycle."""
    out = []
    for i in range(round(seconds / DT)):
        t = t0 + i * DT
        if twist is not None:
            loop.set_twist(twist, frame, t=t)
        loop.step(now=t)
        out.append(robot.pose(sim.q)[:3, 3])
    return np.array(out)


def velocity(p, seconds):
    n = round(seconds / DT)
    return (p[-1] - p[-1 - n]) / (n * DT)


def test_term_is_feedforward_plus_tracking():
    term = TwistTerm(gain=np.array([50.0] * 3 + [5.0] * 3), feedforward=admittance_damping(10.0))
    f = term(V, np.array([0.01, 0, 0, 0, 0, 0]), np.eye(3))
    np.testing.assert_allclose(f, [10 * 0.05 + 50 * 0.04, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("name", ["ur10", "panda"])
def test_5_cm_per_s_along_x(name):
    robot, sim, loop = make(name)
    p = stream(loop, robot, sim, V, 2.0)
    v = velocity(p, 0.5)
    print(f"{name}: commanded 50 mm/s along x, measured {v[0] * 1e3:.2f} mm/s, "
          f"off-axis {np.linalg.norm(v[1:]) * 1e3:.3f} mm/s")
    assert v[0] == pytest.approx(0.05, rel=0.05)
    assert np.linalg.norm(v[1:]) < 0.05 * 0.05
    assert loop.state.watchdog == "ok" and not loop.state.holding


def test_without_feedforward_a_pure_p_term_lags():
    """Control for the test above: B = 0 leaves the steady-state error c·m_e/(c·m_e + K_v)."""
    robot, sim, loop = make("ur10")
    loop.law.twist = TwistTerm(gain=np.full(6, 10.0), feedforward=np.zeros(6))
    v = velocity(stream(loop, robot, sim, V, 2.0), 0.5)
    assert v[0] == pytest.approx(0.05 * 10 / (10 + 10), rel=0.05)


def test_tool_frame_twist_is_rotated():
    robot, sim, loop = make("ur10")
    R = robot.pose(sim.q)[:3, :3]
    v_tool = np.concatenate((R.T @ V[:3], np.zeros(3)))  # +x of the base, written in tool axes
    v = velocity(stream(loop, robot, sim, v_tool, 1.5, frame="tool"), 0.3)
    assert v[0] == pytest.approx(0.05, rel=0.05)


def test_watchdog_stops_the_arm_when_the_stream_stops():
    robot, sim, loop = make("panda")
    stream(loop, robot, sim, V, 1.0)
    p = stream(loop, robot, sim, None, 1.0, t0=1.0)  # the stream stops
    assert loop.state.watchdog == "tripped" and loop.state.holding
    assert np.linalg.norm(velocity(p, 0.3)) < 1e-6
    assert np.linalg.norm(p[-1] - p[0]) < 0.01  # within the deceleration distance
    p = stream(loop, robot, sim, V, 1.5, t0=2.0)  # a fresh stream moves it again
    assert velocity(p, 0.3)[0] == pytest.approx(0.05, rel=0.05)


def test_limits_hold_for_a_fast_command():
    robot = RobotModel.load("panda")
    lim = SafetyLimits.from_robot(robot, max_linear_speed=0.2)
    robot, sim, loop = make("panda", limits=lim)
    p = stream(loop, robot, sim, [2.0, 0, 0, 0, 0, 0], 1.0)
    speed = np.linalg.norm(np.diff(p, axis=0), axis=1) / DT
    print(f"2 m/s commanded, 0.2 m/s limit: max tip speed {speed.max():.4f} m/s")
    assert speed.max() < 0.2 * 1.02  # the reference obeys the limit; the lagging robot follows it
    assert np.all(np.abs(loop.state.qd_ref) <= lim.max_velocity + 1e-12)


def test_bad_twists_are_refused_and_the_last_good_one_kept():
    _, _, loop = make("ur10")
    loop.set_twist(V, t=0.0)
    for bad, msg in (([0.1] * 5, "6 entries"), ([np.nan, 0, 0, 0, 0, 0], "NaN"),
                     ([9.0, 0, 0, 0, 0, 0], "out of range"), (V, "frame")):
        with pytest.raises(InputError, match=msg):
            loop.set_twist(bad, "sideways" if msg == "frame" else "base")
    np.testing.assert_allclose(loop._twist.wrench, V)


def test_switching_from_a_wrench_stream_to_a_twist_stream_does_not_trip():
    robot, sim, loop = make("ur10")
    for i in range(50):
        loop.set_wrench([2.0, 0, 0, 0, 0, 0], t=i * DT)
        loop.step(now=i * DT)
    stream(loop, robot, sim, V, 1.0, t0=1.0)  # the wrench is 0.9 s old when the twists start
    assert loop.state.watchdog == "ok" and not loop.state.holding


def test_law_without_twist_is_unchanged():
    from fdcontrol.control.law import ControlLaw

    x = ControlInput(np.eye(4), np.zeros(6), np.zeros(6), np.array([1.0, 2, 3, 0, 0, 0]), None)
    np.testing.assert_allclose(ControlLaw()(x), [1, 2, 3, 0, 0, 0])


# ---------------------------------------------------------------------- the real service
@pytest.fixture(scope="module")
def service():
    svc = Service(env={"FDCONTROL_COMMAND_TIMEOUT": "0.25"})  # a loaded 2-core VM: room for jitter
    yield svc
    svc.stop()


def fit_velocity(states, t_from):
    t = np.array([s["t"] for s in states if s["t"] >= t_from])
    x = np.array([[row[3] for row in s["tip_pose"][:3]] for s in states if s["t"] >= t_from])
    return np.polyfit(t - t[0], x, 1)[0]


def test_service_twist_over_ws_control(service):
    with Client(service.url) as c:
        c.hold(False)
        states: list[dict] = []
        sent = c.teleoperate(lambda t: V.tolist() if t < 2.0 else None, rate=100.0, duration=5.0,
                             on_state=states.append)
        assert sent > 100
        moving = [s for s in states if s["watchdog"] == "ok"]
        assert len(moving) > 20
        v = fit_velocity(moving, moving[-1]["t"] - 0.8)
        print(f"service: commanded 50 mm/s along x, measured {v[0] * 1e3:.2f} mm/s (off-axis "
              f"{np.linalg.norm(v[1:]) * 1e3:.3f}) over {len(moving)} states")
        assert v[0] == pytest.approx(0.05, rel=0.05)
        # the stream stopped: the watchdog holds the arm (at rest, then 150 cycles of the loop later)
        until(c.state, lambda s: s["watchdog"] == "tripped" and s["holding"] and not any(s["qd_ref"]),
              what="the watchdog holding the arm at rest")
        s1 = cycles_later(c.state, 250)  # the simulated arm settles
        s2 = cycles_later(c.state, 150)
        assert s2["watchdog"] == "tripped" and s2["holding"]
        assert np.linalg.norm(np.array(s2["tip_pose"])[:3, 3] - np.array(s1["tip_pose"])[:3, 3]) < 1e-6


def test_service_twist_rest_and_errors(service):
    with Client(service.url) as c:
        c.hold(False)
        ack = c.set_twist([0.0, 0.02, 0, 0, 0, 0])
        assert ack["ok"]
        for bad in ([0.1] * 5, [9.0, 0, 0, 0, 0, 0]):
            with pytest.raises(ServiceError) as e:
                c.set_twist(bad)
            assert e.value.status == 422
        url = service.url.replace("http", "ws") + "/ws/control"
        with connect(url) as ws:
            ws.send(json.dumps({"twist": [1, 2]}))
            for _ in range(50):
                msg = json.loads(ws.recv(timeout=5))
                if "error" in msg:
                    assert "twist" in msg["error"]
                    break
            else:
                pytest.fail("no error message for a bad twist")
        assert c.health()["status"] == "ok"


def test_service_posture_and_link_loads_config(service):
    with Client(service.url) as c:
        cfg = c.config()
        assert cfg["posture"] == "auto" and cfg["posture_stiffness"] == 10.0
        load = {"link": "forearm_link", "plane": {"point": [0, 0, 2.0], "normal": [0, 0, -1]}, "margin": 0.05}
        cfg = c.patch_config(link_loads=[load], link_load_mode="physical")
        assert cfg["link_loads"][0]["link"] == "forearm_link"
        s = until(c.state, lambda s: s["link_clearance"] is not None, what="a link clearance in the state")
        assert s["link_clearance"] > 0.5
        assert s["posture_distance"] is None  # the UR10 is not redundant
        with pytest.raises(ServiceError) as e:
            c.patch_config(link_loads=[{**load, "link": "no_such_link"}])
        assert e.value.status == 422 and "no_such_link" in str(e.value.detail)
        with pytest.raises(ServiceError) as e:
            c.patch_config(link_loads=[{"link": "forearm_link", "margin": 0.05}])
        assert e.value.status == 422
        c.patch_config(link_loads=[])
        assert c.config()["link_loads"] == []
        c.stop()  # the robot is structural: only while stopped
        try:
            c.patch_config(robot="panda")
            c.start()
            s = until(c.state, lambda s: s["posture_distance"] is not None and s["running"],
                      what="posture_distance on the 7-DoF arm")  # auto: on for the 7-DoF arm
            q0 = np.array(cycles_later(c.state, 100)["q"])
            # a push (a live input: the posture task acts, taking q_p = the configuration then), then the
            # stream ends and the watchdog holds: the distance is ‖q − q_p‖, with q_p the start q to within
            # the simulated arm's own settling (~1e-4 rad)
            with c.control_stream(decimation=50) as stream:
                cycles_later(c.state, 250, each=lambda: stream.send_wrench([0.0, 10.0, 0.0, 0.0, 0.0, 0.0]))
            s = until(c.state, lambda s: s["holding"] and not any(s["qd_ref"]), what="held after the push")
            moved = float(np.linalg.norm(np.array(s["q"]) - q0))
            assert moved > 0.02, moved
            assert abs(s["posture_distance"] - moved) < 2e-3, (s["posture_distance"], moved)
            assert s["fault"] is None and s["watchdog"] == "tripped"  # held by the ended stream, no fault
        finally:
            c.stop()
            c.patch_config(robot="ur10")
            c.start()
