"""The library on simulated time: one clock for the watchdog, stats under step(), MJCF "world".

A loop stepped with ``step(now=sim_time)`` must measure the age of a command given without a
time on that same clock (its receipt by the loop), whatever the wall clock says.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fdcontrol import RobotModel, make_mapping
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.loop.cycle import ControlLoop
from fdcontrol.loop.solvers import make_solver
from fdcontrol.model.robot import HOME

DT = 0.002
TIMEOUT = 0.1


def make(name: str = "ur10"):
    robot = RobotModel.load(name)
    sim = SimulatedRobot(robot, dt=DT, q0=np.array(HOME[name]))
    loop = ControlLoop(robot, sim, make_solver(make_mapping("fd", robot)), rate=1 / DT, command_timeout=TIMEOUT)
    return robot, sim, loop


def run_once(send, t0: float, seconds: float = 2.0):
    """Send one command without a time, then step `seconds` of simulated time from `t0`."""
    robot, sim, loop = make()
    send(loop)
    states, tips = [], []
    for i in range(round(seconds / DT)):
        states.append(loop.step(now=t0 + i * DT))
        tips.append(robot.pose(sim.q)[:3, 3])
    return np.array(tips), [s.watchdog for s in states], loop


# simulated time starting at 0 (the wall clock is far ahead) and far ahead of the wall clock
@pytest.mark.parametrize("t0", [0.0, 1e7])
@pytest.mark.parametrize("kind", ["twist", "wrench"])
def test_watchdog_trips_on_simulated_time_when_commands_carry_no_time(kind, t0):
    def send(loop):
        if kind == "twist":
            loop.set_twist([0.05, 0, 0, 0, 0, 0])
        else:
            loop.set_wrench([20.0, 0, 0, 0, 0, 0])

    tips, wd, _ = run_once(send, t0)
    first_trip = wd.index("tripped")
    # the age counts from the first cycle (receipt): ok while age ≤ timeout, tripped after
    assert set(wd[:first_trip]) == {"ok"} and set(wd[first_trip:]) == {"tripped"}
    assert first_trip == math.floor(TIMEOUT / DT + 1e-9) + 1
    late = np.linalg.norm(tips[-1] - tips[round(0.5 / DT)])  # after the trip and the braking
    print(f"{kind} from t0={t0:g}: tripped at cycle {first_trip}, tip moved "
          f"{np.linalg.norm(tips[-1] - tips[0]) * 1e3:.2f} mm, {late * 1e3:.3f} mm in the last 1.5 s")
    assert late < 1e-4  # held; a command never timed out keeps the tip moving (~75 mm in 1.5 s)


def test_a_command_stream_keeps_the_watchdog_ok_on_simulated_time():
    """Control for the test above: the same command re-sent every cycle keeps moving the arm."""
    robot, sim, loop = make()
    p0 = robot.pose(sim.q)[:3, 3].copy()
    for i in range(round(1.0 / DT)):
        loop.set_twist([0.05, 0, 0, 0, 0, 0])
        s = loop.step(now=i * DT)
        assert s.watchdog == "ok"
    assert np.linalg.norm(robot.pose(sim.q)[:3, 3] - p0) > 0.03


def test_an_explicit_time_is_kept():
    """A caller that stamps its commands (the service does, with the loop thread's clock) is trusted."""
    _, _, loop = make()
    loop.set_wrench([1.0, 0, 0, 0, 0, 0], t=5.0)
    assert loop.step(now=5.0 + TIMEOUT / 2).watchdog == "ok"
    assert loop.step(now=5.0 + 2 * TIMEOUT).watchdog == "tripped"


def test_stats_count_every_stepped_cycle():
    _, _, loop = make()
    for i in range(50):
        loop.step(now=i * DT)
    s = loop.stats.summary()
    assert s["cycles"] == 50 and s["window"] == 50
    assert 0 < s["compute_p50_us"] <= s["compute_max_us"]
    assert s["period_error_max_us"] == 0.0  # nothing scheduled these cycles: no period error


MJCF = """<mujoco>
  <worldbody>
    <body name="base" pos="0.2 -0.1 0.3">
      <body name="l1">
        <joint name="j1" type="hinge" axis="0 0 1" range="-2 2"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="1"/>
        <body name="l2" pos="0.4 0 0">
          <joint name="j2" type="hinge" axis="0 1 0" range="-2 2"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
          <site name="tip" pos="0.3 0 0"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_from_mjcf_with_base_world_matches_mujoco(tmp_path):
    import mujoco

    f = tmp_path / "arm.xml"
    f.write_text(MJCF)
    robot = RobotModel.from_mjcf(f, base="world", tip="tip", velocity_limits=2.0)
    m = mujoco.MjModel.from_xml_path(str(f))
    d = mujoco.MjData(m)
    q = np.array([0.7, -0.4])
    d.qpos[:] = q
    mujoco.mj_kinematics(m, d)
    np.testing.assert_allclose(robot.pose(q)[:3, 3], d.site_xpos[0], atol=1e-12)  # includes the base offset
    on_base = RobotModel.from_mjcf(f, base="base", tip="tip", velocity_limits=2.0)
    np.testing.assert_allclose(on_base.pose(q)[:3, 3], d.site_xpos[0] - [0.2, -0.1, 0.3], atol=1e-12)
