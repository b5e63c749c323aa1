"""Reactions that switch the law or parameters (`then switch law or parameters`): refused at arming
time unless the loop can make the change in place mid-motion; on the MuJoCo arm a rule that
fires mid-motion changes the gains in its own cycle, ramped, so no reference step needs a limit
(the same rule with a step does); through the real service a switch of the law and one of the
parameters reach /state, /config, /ws/state and the metrics, within the reference limits."""

from __future__ import annotations

import itertools
import json
import time

import httpx
import numpy as np
import pytest
from websockets.sync.client import connect

from fdcontrol.control.law import ControlLaw, MotionTerm
from fdcontrol.control.reactions import Rule, rules_from_config
from fdcontrol.control.switch import SwitchError, check_switch
from fdcontrol.control.task import TaskSpace
from fdcontrol.experiments import physics as P
from fdcontrol.loop.parameters import declared
from fdcontrol.model.robot import RobotModel
from fdcontrol.server.settings import ControlParams
from tests.service import Service

K0, D0 = np.array([50.0] * 3 + [20.0] * 3), np.array([10.0] * 3 + [5.0] * 3)
K1, D1 = [500.0] * 3 + [100.0] * 3, [40.0] * 3 + [10.0] * 3


@pytest.mark.parametrize("changes, reason", [
    ({"mode": "motion"}, "policy 'holding'"),
    ({"rate": 100.0}, "policy 'stopped'"),
    ({"gamma": 10.0}, "rebuilds a part"),
    ({"velocity_scale": 0.2}, "rebuilds a part"),
    ({"keep_out": []}, "rebuilds a part"),
    ({"stiffness": [1e4] * 6}, "outside"),
    ({"stiffness": [1.0] * 5}, "stiffness"),
    ({"damping": [float("nan")] * 6}, "damping"),
    ({"max_force": 1000.0}, "never loosened"),
    ({"nope": 1}, "unknown parameter"),
])
def test_switches_the_loop_cannot_make_mid_motion_are_refused(changes, reason):
    p = ControlParams()
    with pytest.raises(SwitchError, match=reason):
        check_switch(changes, declared(), p.model_dump(), np.array(p.max_stiffness), np.array(p.max_damping))


def test_allowed_switches_pass_checked():
    p = ControlParams()
    out = check_switch({"stiffness": [10] * 6, "max_force": 100, "filter_cutoff": 5.0, "approach_speed": 0.01},
                       declared(), p.model_dump(), np.array(p.max_stiffness), np.array(p.max_damping))
    assert out["stiffness"] == [10.0] * 6 and out["max_force"] == 100.0
    with pytest.raises(ValueError, match="mode and/or params"):
        rules_from_config([{"signal": "fz", "op": ">", "value": 1, "action": "switch"}])
    with pytest.raises(ValueError, match="cannot be switched"):
        rules_from_config([{"signal": "fz", "op": ">", "value": 1, "action": "switch", "params": {"gamma": 1}}])
    with pytest.raises(ValueError, match="stiffness"):  # the library checks each value against its declaration
        rules_from_config([{"signal": "fz", "op": ">", "value": 1, "action": "switch", "params": {"stiffness": [1]}}])


def test_a_rule_from_plain_data_fires_without_an_error_in_the_loop_thread():
    """Numbers given as strings (a YAML or JSON file) are made numbers when the rule is built, not
    when it fires: the firing's description and the ramp run in the loop thread."""
    from fdcontrol.control.reactions import Signals

    (r,) = rules_from_config([{"name": "s", "signal": "fz", "op": ">", "value": "1", "action": "switch",
                               "params": {"stiffness": [10.0] * 6}, "ramp_time": "0.3"}])
    assert isinstance(r.ramp_time, float) and r.ramp_time == 0.3
    s = Signals(np.eye(4), np.zeros(6), np.array([0, 0, 2.0, 0, 0, 0]))
    assert r.check(s) and "stiffness=[10, 10, 10, 10, 10, 10] over 0.3 s" in r.describe(s)
    with pytest.raises(ValueError, match="ramp_time"):
        rules_from_config([{"signal": "fz", "op": ">", "value": 1, "action": "switch",
                            "params": {"stiffness": [10.0] * 6}, "ramp_time": True}])
    with pytest.raises(ValueError, match="unknown mode 'bogus'"):  # (the law would refuse it at the firing)
        rules_from_config([{"signal": "fz", "op": ">", "value": 1, "action": "switch", "mode": "bogus"}])


def switch_in_motion(ramp: float) -> tuple[int, float, float, bool]:
    """Motion law tracking a target 15 cm away; a rule `tip_speed > 0.05 for 150 cycles → switch
    stiffness, damping, twist_gain, max_force` fires mid-motion (after the start's own limited
    cycles). Returns the cycles any limit acted after the firing, the largest reference
    acceleration after it, the acceleration limit, and whether the firing cycle already ran on
    changed gains (strictly between old and new)."""
    robot = RobotModel.load("ur10")
    law = ControlLaw(mode="motion", motion=MotionTerm(stiffness=K0.copy(), damping=D0.copy()))
    r = P.rig(robot, law=law)
    rule = Rule("speedy", "tip_speed", ">", 0.05, "switch", cycles=150, ramp_time=ramp,
                params={"stiffness": K1, "damping": D1, "twist_gain": [1.0] * 6, "max_force": 99.0})
    task = TaskSpace(rules=[rule])
    r.loop.task = task
    T = robot.pose(r.drv.read().q)
    T[:3, 3] += [0.0, 0.15, 0.0]
    r.loop.set_target(T)
    fired, active, acc, prev, same_cycle = None, 0, 0.0, np.zeros(robot.dof), False
    for i in range(1500):
        s = r.loop.step(now=i * P.DT)
        if fired is None and s.reaction_count:
            fired = i
            k = law.motion.stiffness[0]
            same_cycle = (K0[0] < k <= K1[0]) if ramp > 0 else k == K1[0]
            assert f"cycle {s.cycle}:" in s.reaction_event and "stiffness=[500" in s.reaction_event
            assert r.loop.max_force == 99.0
        elif fired is not None:
            active += any(s.limits_active.values())
            acc = max(acc, float(np.max(np.abs(s.qd_ref - prev))) / P.DT)
        prev = s.qd_ref
    assert fired is not None and 150 < fired < 1000, fired
    assert r.loop.fault is None
    assert np.allclose(law.motion.stiffness, K1) and np.allclose(law.twist.gain, 1.0)
    assert task.take_switched()["stiffness"] == K1 and task.take_switched() == {}
    return active, acc, float(np.max(r.loop.limits.max_acceleration)), same_cycle


def test_a_switch_of_the_gains_mid_motion_changes_them_in_its_cycle_without_a_step():
    active, acc, amax, same = switch_in_motion(0.5)
    step_active, step_acc, _, step_same = switch_in_motion(0.0)
    print(f"ramped 0.5 s: limits acted in {active} cycles, peak reference acceleration {acc:.3f} rad/s²; "
          f"step: {step_active} cycles, {step_acc:.3f} rad/s² (limit {amax})")
    assert same and step_same
    assert active == 0 and acc < amax
    assert step_active > 0  # the same switch as a step would have reached the arm as a step


# ---------------------------------------------------------------------- through the service
@pytest.fixture(scope="module")
def svc():
    with Service() as s:
        yield s


def metric(svc) -> float:
    for line in httpx.get(svc.url + "/metrics", timeout=5).text.splitlines():
        if line.startswith("fdcontrol_loop_reactions_total "):
            return float(line.split()[1])
    raise AssertionError("no reaction metric")


@pytest.mark.parametrize("params, reason", [
    ({"mode": "motion"}, "policy 'holding'"),
    ({"gamma": 10.0}, "rebuilds a part"),
    ({"stiffness": [1e4] * 6}, "outside"),
    ({"max_force": 1e4}, "never loosened"),
    ({"nope": 1}, "unknown parameter"),
])
def test_a_bad_switch_gets_422_when_armed_and_the_loop_runs_on(svc, params, reason):
    before = svc.state()
    rule = {"signal": "force", "op": ">", "value": 400, "action": "switch", "params": params}
    r = httpx.put(svc.url + "/control/rules", json={"rules": [rule]}, timeout=10)
    assert r.status_code == 422 and reason in r.text, r.text
    r = httpx.post(svc.url + "/control/move", json={"position": [0, 0, 0.01], "relative": True,
                                                    "until": rule}, timeout=10)
    assert r.status_code == 422 and reason in r.text, r.text
    s = svc.state()
    assert s["running"] and s["fault"] is None and s["cycle"] > before["cycle"] and s["move_status"] != "moving"


def switch_during_move(svc, rule: dict, dz: float) -> tuple[list[dict], dict | None]:
    """Arm ``rule``, move the tip by dz (m, along z); the states (every cycle the feed gives) and the event."""
    assert httpx.put(svc.url + "/control/rules", json={"rules": [rule]}, timeout=10).status_code == 200
    states, event = [], None
    with connect(svc.url.replace("http", "ws") + "/ws/state?decimation=1", open_timeout=10) as ws:
        states.append(json.loads(ws.recv(timeout=5)))
        r = httpx.post(svc.url + "/control/move", json={"position": [0, 0, dz], "relative": True}, timeout=10)
        assert r.status_code == 200, r.text
        deadline, started = time.monotonic() + 20, False
        while time.monotonic() < deadline:
            msg = json.loads(ws.recv(timeout=5))
            if "event" in msg:
                event = msg["event"]
            else:
                states.append(msg)
                started = started or msg["move_status"] in ("moving", "paused")
                if started and (msg["move_status"] == "done" or (msg["move_status"] == "cancelled" and event is not None
                                                                   and msg["mode"] != states[0]["mode"])):
                    break  # a cancelled move: once the switched mode applied (at standstill)
    return states, event


def assert_within_limits(svc, states: list[dict]) -> None:
    amax = httpx.get(svc.url + "/config", timeout=5).json()["max_joint_acceleration"]
    worst = 0.0
    for a, b in itertools.pairwise(states):
        dt = b["t"] - a["t"]
        if dt > 0:
            worst = max(worst, float(np.max(np.abs(np.subtract(b["qd_ref"], a["qd_ref"])))) / dt)
    assert worst <= amax * 1.001, (worst, amax)


def test_a_rule_switches_the_law_mid_move_in_its_cycle(svc):
    mode0, count0, metric0 = svc.state()["mode"], svc.state()["reaction_count"], metric(svc)
    new = "motion" if mode0 != "motion" else "compliance"
    rule = {"name": "to-" + new, "signal": "tip_speed", "op": ">", "value": 0.01, "action": "switch", "mode": new}
    try:
        states, event = switch_during_move(svc, rule, -0.04)
        assert event is not None and f"to-{new}" in event["text"] and f"mode {new}" in event["text"], event
        fired = [s for s in states if s["reaction_count"] > count0]
        # a change of what the law means never comes under a moving arm: the switch brakes the move to
        # standstill, ends it (its goal was a request for the old mode) and applies the mode at rest
        assert fired and fired[-1]["move_status"] == "cancelled"
        switched = [s for s in states if s["mode"] == new]
        assert switched and not any(switched[0]["qd_ref"]), switched[:1]
        assert all(s["reaction_count"] > count0 for s in switched)  # never before the rule fired
        assert svc.state()["mode"] == new
        assert httpx.get(svc.url + "/config", timeout=5).json()["mode"] == new  # the configuration says so
        assert metric(svc) == metric0 + 1
        assert_within_limits(svc, states)
        rules = httpx.get(svc.url + "/control/rules", timeout=5).json()
        assert rules[0]["fired"] == 1 and not rules[0]["armed"]
    finally:
        assert httpx.patch(svc.url + "/config", json={"mode": mode0}, timeout=30).status_code == 200
        httpx.delete(svc.url + "/control/rules", timeout=5)


def test_a_rule_switches_parameters_mid_move(svc):
    cfg0 = httpx.get(svc.url + "/config", timeout=5).json()
    count0, metric0 = svc.state()["reaction_count"], metric(svc)
    k1 = [0.5 * k for k in cfg0["stiffness"]]
    rule = {"name": "soften", "signal": "tip_speed", "op": ">", "value": 0.01, "action": "switch",
            "params": {"stiffness": k1, "max_force": 0.5 * cfg0["max_force"]}, "ramp_time": 0.2}
    try:
        states, event = switch_during_move(svc, rule, 0.04)
        assert event is not None and "soften" in event["text"] and "stiffness=[" in event["text"], event
        assert any(s["reaction_count"] > count0 for s in states) and states[-1]["move_status"] == "done"
        # the tightened input guard is in force at once (before anything reads the configuration):
        # a wrench above it is refused, not accepted by the API and dropped by the loop
        r = httpx.put(svc.url + "/control/wrench", json={"wrench": [0.75 * cfg0["max_force"], 0, 0, 0, 0, 0]},
                      timeout=5)
        assert r.status_code == 422, r.text
        cfg = httpx.get(svc.url + "/config", timeout=5).json()
        assert cfg["stiffness"] == k1 and cfg["max_force"] == 0.5 * cfg0["max_force"]
        assert metric(svc) == metric0 + 1
        assert_within_limits(svc, states)
    finally:
        httpx.delete(svc.url + "/control/rules", timeout=5)
        httpx.patch(svc.url + "/config", json={"stiffness": cfg0["stiffness"], "max_force": cfg0["max_force"]},
                    timeout=30)
