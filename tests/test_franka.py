"""The franka driver through ``fdcontrol serve`` against franky-sim: a simulator of the libfranka
network protocol with MuJoCo physics, written outside this project, in its own process on a
loopback address (tests/franka_sim_peer.py), which records every command it receives.

Not tested here: real hardware, the real robot's reflexes (franky-sim accepts any command, so
the limits are checked on the recorded commands, and an abort is injected through the driver's
error path: tests/franka_inject.py), its external-wrench estimate (franky-sim reports zeros; the
conversion is unit-tested below), force–torque sensor hardware (an RDT peer on loopback stands
in: tests/rdt_peer.py).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("pylibfranka", reason="needs pylibfranka (pip install '.[franka]')")
pytest.importorskip("franky_sim", reason="needs franky-sim (pip install '.[test]')")

from tests.franka_sim_peer import COLUMN, read_record
from tests.service import ROOT, Service, process_state

# Franka Research 3, Franka's documentation ("Limits for Franka Research 3")
FR3_VMAX = np.array([2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26])  # rad/s
FR3_AMAX, FR3_JMAX = 10.0, 5000.0  # rad/s², rad/s³
DT = 1e-3
FLANGE = slice(COLUMN["flange_x"], COLUMN["flange_z"] + 1)  # recorded columns (tests/franka_sim_peer.py)
Q_C = slice(COLUMN["q_c0"], COLUMN["q_c6"] + 1)
Q_D = slice(COLUMN["q_d0"], COLUMN["q_d6"] + 1)
# s, the driver's lost-connection timeout in these tests: franky-sim misses its 1 ms pace under
# load (states 20 ms apart seen at a load average of 15 on 2 cores), a real Franka does not
STATE_TIMEOUT = 1.0
KILL_STATE_TIMEOUT = 0.05  # the kill test: the driver's default (half the default command timeout)
#: the loop's stamps are taken around the driver's read: the cycle's own work and a wake-up delay on a
#: loaded machine lie between the event and its stamp
STAMP_SLACK = 0.03
STARTUP = 300.0  # s: the service's start (13 s seen at a load average of 16 on 2 cores, 120 s at 21)
# the watchdog measures wall time between HTTP requests: generous on a loaded 2-core machine
# (and a slow simulator's gaps between states must not count as a stalled loop: stale after the same)
WATCHDOG = {"FDCONTROL_COMMAND_TIMEOUT": "2.0"}


class FrankaSim:
    """franky-sim in its own process on `host`, recording the commands it receives."""

    def __init__(self, host: str, record: Path | None = None) -> None:
        self.host, self.record = host, record
        cmd = [sys.executable, str(ROOT / "tests" / "franka_sim_peer.py"), "--hostname", host]
        if record is not None:
            cmd += ["--record", str(record)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]  # bounded: the process exits on failure
        if not line.startswith("READY"):
            self.stop()
            raise RuntimeError(f"franky-sim did not start: {line} {self.proc.stderr.read()}")  # type: ignore[union-attr]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> np.ndarray | None:
        """Stop (the recording is flushed) and return the recorded commands."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return read_record(str(self.record)) if self.record is not None and self.record.exists() else None


def loopback_host() -> str:
    """A loopback address of its own (libfranka's port is fixed: 1337), so tests never collide."""
    return f"127.23.{random.randint(1, 254)}.{random.randint(1, 254)}"


def franka_service(host: str, *args: str, env: dict[str, str] | None = None,
                   options: dict | None = None) -> Service:
    opts = {"robot_ip": host, "realtime": "ignore", "state_timeout": STATE_TIMEOUT, **(options or {})}
    return Service("--robot", "fr3", "--driver", "franka", *args, startup_timeout=STARTUP,
                   env={"FDCONTROL_DRIVER_OPTIONS": json.dumps(opts), **WATCHDOG, **(env or {})})


def stream(svc: Service, wrench: list[float], seconds: float, wall_limit: float = 30.0,
           check: bool = True) -> list[dict]:
    """PUT the wrench every 20 ms until `seconds` of the ROBOT's time passed (the simulator runs
    slower than real time on a loaded machine), bounded by `wall_limit` s of wall time. The states
    read after each PUT, in order."""
    t0, end = svc.state()["t"], time.monotonic() + wall_limit
    states = []
    for _ in range(int(wall_limit / 0.02) + 1):
        r = httpx.put(svc.url + "/control/wrench", json={"wrench": wrench}, timeout=5)
        # 503 "stalled": franky-sim starved of CPU sent no state for a while (a loaded machine)
        assert r.status_code in (200, 503) or not check, r.text
        st = svc.state()
        states.append(st)
        if st["t"] - t0 >= seconds or time.monotonic() >= end or st["fault"]:  # a faulted loop's time stands
            break
        time.sleep(0.02)
    return states


def wait_until(svc: Service, pred, seconds: float = 10.0) -> dict:
    """Poll /state until pred(state) (bounded: `seconds`)."""
    st = svc.state()
    for _ in range(int(seconds / 0.05)):
        if pred(st):
            break
        time.sleep(0.05)
        st = svc.state()
    return st


def at_rest(st: dict) -> bool:
    return st["holding"] and not any(st["qd_ref"])


def post(svc: Service, path: str, body: dict | None = None) -> httpx.Response:
    return httpx.post(svc.url + path, json=body, timeout=10)


def motions(rec: np.ndarray) -> list[np.ndarray]:
    """The recorded commands split motion by motion (each ended by motion_finished), one command per
    robot state (motion_finished repeats its id: the first is kept)."""
    out = []
    for seg in np.split(rec, np.flatnonzero(rec[:, 2]) + 1):
        seg = seg[np.r_[True, np.diff(seg[:, 1]) > 0]] if len(seg) else seg
        if len(seg):
            out.append(seg)
    return out


def executed(ids: np.ndarray, values: np.ndarray, rest: np.ndarray, order: int) -> np.ndarray:
    """The signal the robot executes, tick by tick at 1 kHz, from the commands it received (one row
    of `values` per robot state id in `ids`): a state without a command (a lost packet) is filled
    with the last command extrapolated at constant acceleration — libfranka's rate_limiting.h:
    "When a packet is lost, FCI assumes a constant acceleration model" — i.e. a zero third
    difference of positions (`order` 3) or a zero second difference of velocities (`order` 2). The
    motion starts at rest at `rest` (`order` ticks of it before the first command)."""
    sig = [rest] * order
    fill = (lambda s: 3 * s[-1] - 3 * s[-2] + s[-3]) if order == 3 else (lambda s: 2 * s[-1] - s[-2])
    at = {int(i): k for k, i in enumerate(ids)}
    for i in range(int(ids[0]), int(ids[-1]) + 1):
        sig.append(values[at[i]] if i in at else fill(sig))
    return np.array(sig)


def commanded_derivatives(rec: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Velocity, acceleration and jerk of the joint velocities the robot executes (the commands it
    received, lost ones filled by constant-acceleration extrapolation: :func:`executed`), by finite
    differences at 1 kHz, motion by motion; each motion starts from rest (the robot's desired
    velocity and acceleration are zero)."""
    vs, accs, jerks = [], [], []
    for seg in motions(rec):
        v = executed(seg[:, 1], seg[:, 3:10], np.zeros(7), 2)
        a = np.diff(v, axis=0) / DT
        vs.append(v)
        accs.append(a)
        jerks.append(np.diff(a, axis=0) / DT)
    return np.vstack(vs), np.vstack(accs), np.vstack(jerks)


def commanded_position_derivatives(rec: np.ndarray, start: bool = False
                                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Velocity, acceleration and jerk of the joint POSITIONS the robot executes (position
    interface: the commands it received, lost ones filled by constant-acceleration extrapolation,
    :func:`executed`) by finite differences at 1 kHz, motion by motion: each motion starts at rest at
    the robot's desired position q_d (recorded with its first command). ``start``: only the first
    START_TICKS ticks of each motion's acceleration and jerk (else all after them)."""
    vs, accs, jerks = [], [], []
    for seg in motions(rec):
        q = executed(seg[:, 1], seg[:, Q_C], seg[0, Q_D], 3)
        v = np.diff(q, axis=0) / DT
        a = np.diff(v, axis=0) / DT
        j = np.diff(a, axis=0) / DT
        cut = slice(None, START_TICKS) if start else slice(START_TICKS, None)
        vs.append(v)
        accs.append(a[cut])
        jerks.append(j[cut])
    return np.vstack(vs), np.vstack(accs), np.vstack(jerks)


#: the position interface's first ticks of a motion: the q_d the simulator records with a motion's first
#: command (its q_d when the command arrives, not that of the state the command answers) lies up to ~5e-8 rad
#: from the q_d of the state the driver started the motion at, as the simulator's desired position still
#: settles after the previous motion; with the machine loaded the first command arrives ticks later and the
#: gap reaches ~1.1e-7 rad (2.2 % of the jerk limit at 1 ms³: 5107–5110 rad/s³ seen in 2 of 14 runs beside
#: 3–4 CPU-bound processes). A relative START_SLACK there; 1e-6 for every other tick
START_TICKS = 3
START_SLACK = 5e-2


def lost_ticks(rec: np.ndarray) -> int:
    """Robot states inside a motion that passed without a command."""
    return int(sum(np.sum(np.diff(seg[:, 1]) - 1) for seg in motions(rec)))


@pytest.fixture
def sim(tmp_path):
    s = FrankaSim(loopback_host(), tmp_path / "commands.bin")
    yield s
    s.stop()


def test_robot_paced_run_moves_the_flange_along_the_wrench(sim):
    """3 s robot-paced at the robot's 1 kHz through fdcontrol serve: +x wrench → the flange (read
    on the simulator's side) moves along +x; the statistics report the robot's clock."""
    svc = franka_service(sim.host)
    try:
        assert post(svc, "/control/start").status_code == 200
        states = stream(svc, [-0.5, 0, 0, 0, 0, 0], 3.0)  # 0.05 m/s along −x, away from the workspace's edge
        st = svc.state()
        stats = httpx.get(svc.url + "/stats", timeout=5).json()
        assert post(svc, "/control/stop").status_code == 200
    finally:
        svc.stop()
    rec = sim.stop()
    assert rec is not None and len(rec) > 500
    moved = rec[-1, FLANGE] - rec[0, FLANGE]
    assert moved[0] < -0.03, moved  # m along −x
    assert abs(moved[1]) < 0.2 * abs(moved[0]) and abs(moved[2]) < 0.3 * abs(moved[0]), moved
    # the robot's mode while the stream was fresh (a state read later, once the stream's watchdog held the arm
    # and the motion ended, may say Idle: a GET after the stream can come late on a loaded machine)
    fresh = [s for s in states if s["watchdog"] == "ok"]
    assert st["fault"] is None and fresh and fresh[-1]["safety_mode"] == "Move", [s["safety_mode"] for s in fresh]
    assert stats["rate"] == 1000.0 and stats["cycles"] > 500
    # franky-sim always reports a command success rate of 1.0: the value the robot sent, passed on
    # (that the driver passes on whatever the robot reports: tests/test_franka_stats.py)
    assert stats["robot_success_rate"] == 1.0
    assert isinstance(stats["robot_missed_cycles"], int) and stats["robot_missed_cycles"] >= 0
    assert rec[-1, 2] == 1.0  # the last command the robot received ended the motion (motion_finished)


SCENARIO_ENV = {"FDCONTROL_MAX_JOINT_ACCELERATION": "8"}  # a lab's setting (the FR3 allows 10)
FRANKA_LIMITS = ["cartesian", "position", "velocity", "acceleration", "jerk"]  # the franka driver's (settings)


@pytest.mark.parametrize("jerk", [
    True,
    pytest.param(False, marks=pytest.mark.xfail(
        strict=True, raises=AssertionError,  # the limits assertion, not a service that failed to start
        reason="without the jerk limit (today's limits) a wrench step and a stop in mid-motion exceed the "
               "FR3's jerk limit")),
])
def test_every_command_stays_within_the_fr3_limits(sim, jerk):
    """A wrench step, a stop in mid-motion, a watchdog trip and a hold: every command the
    simulator received is within the FR3's velocity, acceleration and jerk limits."""
    if jerk:
        svc = franka_service(sim.host, env=SCENARIO_ENV)
    else:  # today's limits: the same driver by import path (the franka defaults — jerk limit, 1 kHz — are
        # not applied) and without its last rate-limiting check
        opts = {"robot_ip": sim.host, "realtime": "ignore", "state_timeout": STATE_TIMEOUT, "rate_limit": False}
        svc = Service("--robot", "fr3", "--driver", "fdcontrol.drivers.franka:FrankaDriver", "--rate", "1000",
                      startup_timeout=STARTUP,
                      env={"FDCONTROL_DRIVER_OPTIONS": json.dumps(opts), **WATCHDOG, **SCENARIO_ENV})
    try:
        assert post(svc, "/control/start").status_code == 200
        stream(svc, [40.0, 0, 0, 0, 0, 0], 0.4)  # step
        assert post(svc, "/control/stop").status_code == 200  # stop in mid-motion
        assert post(svc, "/control/start").status_code == 200
        stream(svc, [-40.0, 0, 0, 0, 0, 0], 0.4)
        st = wait_until(svc, at_rest)  # the stream stops: the watchdog trips, the loop brakes and holds
        assert st["watchdog"] == "tripped" and at_rest(st)
        assert post(svc, "/control/hold", {"hold": False}).status_code == 200
        stream(svc, [0, 0, 40.0, 0, 0, 0], 0.3)
        assert post(svc, "/control/hold", {"hold": True}).status_code == 200  # hold in motion
        st = wait_until(svc, at_rest)
        assert at_rest(st) and st["fault"] is None
        assert post(svc, "/control/stop").status_code == 200
    finally:
        svc.stop()
    rec = sim.stop()
    assert rec is not None and len(rec) > 500
    finished = np.flatnonzero(rec[:, 2])
    starts = np.flatnonzero(np.diff(rec[:, 1]) > 1) + 1
    assert len(finished) >= 3, (len(rec), finished, starts)  # stop, watchdog hold, hold: each ended the motion
    dq, a, j = commanded_derivatives(rec)
    assert np.all(np.abs(dq) <= FR3_VMAX)
    assert np.max(np.abs(a)) <= FR3_AMAX * (1 + 1e-9)
    assert np.max(np.abs(j)) <= FR3_JMAX * (1 + 1e-6), f"max jerk {np.max(np.abs(j)):.0f} rad/s³"
    assert np.all(rec[finished, 3:10] == 0.0)  # motion_finished only at rest


@pytest.mark.parametrize("options", [
    pytest.param({"interface": "position"}, id="position-interface"),
    pytest.param({"interface": "position", "late_every": 40}, id="position-interface-missed-cycles"),
    pytest.param({"late_every": 40}, id="velocity-interface-missed-cycles"),
    pytest.param({"controller_mode": "cartesian"}, id="cartesian-impedance"),
])
def test_position_interface_and_cartesian_impedance(sim, options):
    """The position interface (JointPositions), the Cartesian impedance controller, and missed robot
    cycles in both interfaces, through fdcontrol serve: a streamed wrench moves the flange (read on
    the simulator's side) along it; through a wrench step, a stop in mid-motion and a hold, the signal
    the robot executes — the commands the simulator received, each lost one filled as FCI does, by
    constant-acceleration extrapolation — stays within the FR3's velocity, acceleration and jerk
    limits at every 1 kHz tick (positions: by finite differences), and the simulator ran the impedance
    controller asked for."""
    # missed cycles: every 40th command answers 2.5 ms late (tests/franka_inject.py), so the robot's clock
    # goes on without it — what a loaded machine does now and then
    late = ("--driver", "tests.franka_inject:LateFranka", "--rate", "1000") if "late_every" in options else ()
    # by import path the franka driver's defaults are not applied: its jerk limit named as a user would
    env = {**SCENARIO_ENV, "FDCONTROL_LIMITS": json.dumps(FRANKA_LIMITS)} if late else SCENARIO_ENV
    svc = franka_service(sim.host, *late, env=env, options=options)
    try:
        assert post(svc, "/control/start").status_code == 200
        stream(svc, [-20.0, 0, 0, 0, 0, 0], 0.4)  # step
        assert post(svc, "/control/stop").status_code == 200  # stop in mid-motion
        assert post(svc, "/control/start").status_code == 200
        stream(svc, [0, 0, 20.0, 0, 0, 0], 0.3)
        assert post(svc, "/control/hold", {"hold": True}).status_code == 200  # hold in motion
        st = wait_until(svc, at_rest)
        assert at_rest(st) and st["fault"] is None
        assert post(svc, "/control/stop").status_code == 200
    finally:
        svc.stop()
    rec = sim.stop()
    assert rec is not None and len(rec) > 300
    finished = np.flatnonzero(rec[:, 2])
    assert len(finished) >= 2, finished  # the stop and the hold each ended the motion
    first = rec[: finished[0] + 1]
    moved = first[-1, FLANGE] - first[0, FLANGE]
    assert moved[0] < -0.02 and abs(moved[1]) < 0.3 * abs(moved[0]), moved  # along the −x wrench
    moving = rec[rec[:, 2] == 0.0]
    expected = 1.0 if options.get("controller_mode") == "cartesian" else 0.0
    assert np.all(moving[:, COLUMN["impedance"]] == expected)
    if late:  # the robot's clock went on without a command: commands answered later states
        assert np.sum(np.diff(rec[rec[:, 2] == 0.0, 1]) > 1) >= 5
        assert lost_ticks(rec) >= 5
    if options.get("interface") == "position":
        dq, a, j = commanded_position_derivatives(rec)
        _, a0, j0 = commanded_position_derivatives(rec, start=True)
        assert np.max(np.abs(a0)) <= FR3_AMAX * (1 + START_SLACK), f"first ticks: {np.max(np.abs(a0)):.2f} rad/s²"
        assert np.max(np.abs(j0)) <= FR3_JMAX * (1 + START_SLACK), f"first ticks: {np.max(np.abs(j0)):.0f} rad/s³"
    else:
        dq, a, j = commanded_derivatives(rec)
    assert np.all(np.abs(dq) <= FR3_VMAX * (1 + 1e-6)), np.max(np.abs(dq), axis=0)
    assert np.max(np.abs(a)) <= FR3_AMAX * (1 + 1e-6), f"max acceleration {np.max(np.abs(a)):.2f} rad/s²"
    assert np.max(np.abs(j)) <= FR3_JMAX * (1 + 1e-6), f"max jerk {np.max(np.abs(j)):.0f} rad/s³"


def test_a_wrong_model_is_refused_with_one_line(sim, tmp_path):
    """A model whose flange is 1 cm off (d8 = 0.117 m instead of 0.107 m) against the simulated FR3."""
    urdf = (ROOT / "urdf" / "fr3.urdf").read_text()
    assert urdf.count('xyz="0 0 0.107"') == 1
    wrong = tmp_path / "fr3_wrong.urdf"
    wrong.write_text(urdf.replace('xyz="0 0 0.107"', 'xyz="0 0 0.117"'))
    opts = {"robot_ip": sim.host, "realtime": "ignore"}
    cmd = [sys.executable, "-m", "fdcontrol.server", "serve", "--host", "127.0.0.1", "--port", "0",
           "--robot", str(wrong), "--driver", "franka"]
    env = {"FDCONTROL_DRIVER_OPTIONS": json.dumps(opts), "FDCONTROL_BASE": "fr3_link0", "FDCONTROL_TIP": "fr3_link8"}

    out = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, out.stderr
    assert "does not match the robot" in lines[0] and "10.0 mm" in lines[0] and "refusing to start" in lines[0]


def health_while(svc: Service, seconds: float) -> list[tuple[int, dict]]:
    """/health polled for `seconds` (bounded in count and time)."""
    out, end = [], time.monotonic() + seconds
    for _ in range(int(seconds / 0.05) + 1):
        if time.monotonic() >= end:
            break
        r = httpx.get(svc.url + "/health", timeout=5)
        out.append((r.status_code, r.json()))
        time.sleep(0.05)
    return out


def stopped(pid: int, seconds: float = 10.0) -> None:
    """Until process `pid` is stopped (SIGSTOP) or dead (SIGKILL: a zombie, or gone), read from /proc (bounded)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process_state(pid) in (None, "T", "t", "Z", "X"):  # (None: gone)
            return
        time.sleep(0.0005)
    raise AssertionError(f"process {pid} neither stopped nor died in {seconds} s")


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_lost_robot_is_a_robot_fault_and_reconnects(sim, how):
    """The robot is lost in mid-motion — it stops sending (SIGSTOP: a pulled cable, its TCP connection
    stays open) or it closes the connection (SIGKILL: powered off). The loop faults into hold with
    "robot connection lost" within state_timeout + one cycle of the robot's last state, on the loop's
    own clock; it stays alive: /health answers 200 throughout with that reason (its heartbeat and its
    cycles are fresh: a stale heartbeat answers 503), the supervisor replaces nothing; reconnecting is
    explicit (POST /control/reconnect), refused while the robot is gone, and works once it is back —
    the same simulator resumed, or a new one — without restarting the service."""
    host = sim.host
    # the heartbeat and the loop's cycles count as stale after the watchdog period (WATCHDOG: 2 s)
    svc = franka_service(host, options={"state_timeout": KILL_STATE_TIMEOUT})
    sims = [sim]
    try:
        for _ in range(5):  # bounded: a simulator starved of CPU may miss 50 ms before the loss (a loaded
            # machine): that loss is real but not the one under test — reconnect and move again
            assert post(svc, "/control/start").status_code == 200
            stream(svc, [15.0, 0, 0, 0, 0, 0], 0.3, check=False)
            st = svc.state()
            if st["fault"] is None and any(st["qd_ref"]):
                break
            post(svc, "/control/stop")
            post(svc, "/control/reconnect")
            post(svc, "/control/hold", {"hold": False})
        assert st["fault"] is None and any(st["qd_ref"]), st  # moving, before the loss
        pid = httpx.get(svc.url + "/health", timeout=5).json()
        loop_process = svc.children()
        before = time.monotonic()
        os.kill(sim.proc.pid, signal.SIGSTOP if how == "stop" else signal.SIGKILL)
        stopped(sim.proc.pid)  # kill() returns before the signal takes effect: a state may still leave meanwhile
        after = time.monotonic()
        st = wait_until(svc, lambda s: s["fault"], seconds=5.0)
        assert st["fault"] and "robot connection lost" in st["fault"], st["fault"]
        assert st["holding"] and st["safety_mode"] == "disconnected"
        stats = httpx.get(svc.url + "/stats", timeout=5).json()
        last, lost = stats["robot_last_state_at"], stats["robot_lost_at"]
        # the loss is the signal's (time.monotonic() is one clock on this host): no state after the robot stopped
        # but one already on its way (read by a loop that a loaded machine may delay: STAMP_SLACK) ...
        assert last <= after + STAMP_SLACK and lost >= before, (before, after, last, lost)
        # ... declared within state_timeout + one cycle of the robot's last state, on the loop's clock (the
        # cycle's own work and a wake-up on a loaded machine come on top: STAMP_SLACK)
        assert lost - last <= KILL_STATE_TIMEOUT + DT + STAMP_SLACK, f"fault {1e3 * (lost - last):.1f} ms after"
        # the loop's record agrees: the fault (fault_at) one wait for a state after the last cycle that had one
        noticed = st["fault_at"] - st["stamp"]
        assert KILL_STATE_TIMEOUT <= noticed <= KILL_STATE_TIMEOUT + DT + STAMP_SLACK, noticed
        # alive and holding: /health 200 with the reason, for 3 s — longer than a stale heartbeat takes to
        # show (2 s): a loop process stuck in libfranka holding the GIL (as before) answers 503 and is replaced
        seen = health_while(svc, 3.0)
        assert all(code == 200 for code, _ in seen), [b for c, b in seen if c != 200][:1]
        assert all(b["status"] == "fault" and "robot connection lost" in b["fault"] for _, b in seen), seen[-1]
        assert all(b["restarts"] == 0 for _, b in seen) and pid["restarts"] == 0
        assert seen[-1][1]["cycles"] == seen[0][1]["cycles"]  # no robot state since: the cycle count stands
        assert seen[-1][1]["last_cycle_age_s"] < 0.5  # … but the loop thread goes on (holding)
        assert svc.state()["holding"] and svc.children() == loop_process  # the same loop process
        # reconnecting is explicit, and refused while the robot is gone (the loop goes on holding)
        if how == "kill":
            r = post(svc, "/control/reconnect")
            assert r.status_code >= 400 and "robot connection lost" in r.text, r.text
            assert httpx.get(svc.url + "/health", timeout=5).status_code == 200
            sims.append(FrankaSim(host))  # a new robot on the same address
        else:
            os.kill(sim.proc.pid, signal.SIGCONT)  # the same robot is back
        for _ in range(3):  # bounded: a simulator starved of CPU may miss a state right after it resumes, and
            # a starved test process may leave its wrench stream quiet for a watchdog period (a hold)
            asked = time.monotonic()
            r = post(svc, "/control/reconnect")
            if r.status_code != 200:
                time.sleep(0.5)
                continue
            lost = httpx.get(svc.url + "/stats", timeout=5).json()["robot_lost_at"]
            assert lost is None or lost > asked  # the old loss is cleared (a new one would be after it)
            assert post(svc, "/control/hold", {"hold": False}).status_code == 200
            stream(svc, [15.0, 0, 0, 0, 0, 0], 0.5, check=False)
            st = svc.state()
            if st["fault"] is None and not st["holding"]:
                break
        assert st["fault"] is None and st["safety_mode"] == "Move" and not st["holding"], \
            (st["fault"], st["watchdog"], st["holding"])
        assert httpx.get(svc.url + "/health", timeout=5).json()["restarts"] == 0 and svc.children() == loop_process
        assert post(svc, "/control/stop").status_code == 200
    finally:
        svc.stop()
        if how == "stop" and sim.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(sim.proc.pid, signal.SIGCONT)
        for s in sims[1:]:
            s.stop()


def metric_lines(svc: Service, prefix: str) -> list[str]:
    body = httpx.get(svc.url + "/metrics", timeout=10).text
    return [x for x in body.splitlines() if x.startswith(prefix)]


def test_libfranka_error_names_and_the_robot_mode_in_state_health_and_metrics(sim):
    """The robot aborts a motion with libfranka's joint_velocity_violation (injected: franky-sim has
    no reflexes, tests/franka_inject.py): the loop faults into hold, /state and /health name the
    error, /metrics counts it by name and marks it active, with the robot mode as a label;
    POST /control/recover clears the active error, the count stays."""
    opts = {"robot_ip": sim.host, "realtime": "ignore", "state_timeout": STATE_TIMEOUT, "abort_after": 200}
    svc = Service("--robot", "fr3", "--driver", "tests.franka_inject:AbortingFranka", "--rate", "1000",
                  startup_timeout=STARTUP, env={"FDCONTROL_DRIVER_OPTIONS": json.dumps(opts), **WATCHDOG})
    try:
        assert metric_lines(svc, "fdcontrol_robot_errors_total") == []  # none before the first
        assert post(svc, "/control/start").status_code == 200
        stream(svc, [-5.0, 0, 0, 0, 0, 0], 0.5, check=False)
        st = wait_until(svc, lambda s: s["fault"], seconds=10.0)
        assert st["fault"] and "ControlException" in st["fault"] and "joint_velocity_violation" in st["fault"]
        assert st["holding"]
        health = httpx.get(svc.url + "/health", timeout=5).json()
        assert health["status"] == "fault" and "joint_velocity_violation" in health["fault"]
        assert metric_lines(svc, "fdcontrol_robot_errors_total") == [
            'fdcontrol_robot_errors_total{error="joint_velocity_violation"} 1.0']
        assert metric_lines(svc, "fdcontrol_robot_error_active") == [
            'fdcontrol_robot_error_active{error="joint_velocity_violation"} 1.0']
        assert metric_lines(svc, "fdcontrol_robot_safety_mode{") == [
            f'fdcontrol_robot_safety_mode{{mode="{svc.state()["safety_mode"]}"}} 1.0']
        assert post(svc, "/control/recover").status_code == 200
        assert metric_lines(svc, "fdcontrol_robot_error_active") == []
        assert metric_lines(svc, "fdcontrol_robot_errors_total") == [
            'fdcontrol_robot_errors_total{error="joint_velocity_violation"} 1.0']
        assert post(svc, "/control/stop").status_code == 200
    finally:
        svc.stop()


def test_an_external_force_torque_sensor_is_the_wrench_source(sim):
    """wrench_source: sensor — an RDT force–torque sensor on the flange (a loopback peer that speaks
    ATI's protocol, tests/rdt_peer.py) reads a hand pushing the tool along the base's −x, in the
    sensor frame and ATI's convention (the load on the tool side: sensor_sign tool_on_robot):
    /state's f_measured is the tool's push on the environment, +x; force mode with a zero target
    yields to the hand: the flange (read on the simulator's side) moves along −x."""
    from tests.rdt_peer import RdtPeer

    peer = RdtPeer(sim.host)
    # the sensor watchdog at 2 s: the peer is a thread of this test process, starved now and then on a
    # loaded machine (the watchdog itself: tests/test_netft.py, a sensor gone quiet holds the arm); the
    # reading is fresh all the same: the client drops a reading older than its own 50 ms (f_measured then 0)
    env = {"FDCONTROL_SENSOR_SIGN": "tool_on_robot", "FDCONTROL_MODE": "force", "FDCONTROL_SENSOR_TIMEOUT": "2.0"}
    svc = franka_service(sim.host, env=env, options={
        "wrench_source": "sensor", "sensor": {"address": sim.host, "counts_per_force": 1e6,
                                              "counts_per_torque": 1e6}})
    try:
        R = np.array(svc.state()["tip_pose"])[:3, :3]  # the flange = the sensor frame (fr3_link8)
        push = np.array([-2.0, 0.0, 0.0])  # N, base frame: the hand on the tool (a hand is a live input above 1 N)
        peer.counts = [round(c) for c in np.r_[R.T @ push * 1e6, np.zeros(3)]]
        assert post(svc, "/control/start").status_code == 200
        # the sensor's first reading: its stream starts with the service (bounded: a starved peer thread)
        wait_until(svc, lambda s: np.linalg.norm(s["f_measured"]) > 1.6, seconds=30.0)
        t0 = svc.state()["t"]
        st = wait_until(svc, lambda s: s["t"] - t0 >= 1.5, seconds=30.0)  # 1.5 s of the robot's time
        assert st["fault"] is None and st["watchdog"] != "sensor_stale", st
        f = np.array(st["f_measured"])
        # in the sensor frame the reading is the peer's constant counts, whatever the flange turned as the arm
        # yielded; in the base frame it started as the tool's push on the environment, +x
        R1 = np.array(st["tip_pose"])[:3, :3]
        assert np.allclose(R1.T @ f[:3], R.T @ -push, atol=0.02) and np.allclose(f[3:], 0), st["f_measured"]
        assert f[0] > 1.9, st["f_measured"]
        assert post(svc, "/control/stop").status_code == 200
    finally:
        svc.stop()
        peer.close()
    rec = sim.stop()
    assert rec is not None and len(rec) > 300
    moved = rec[-1, FLANGE] - rec[0, FLANGE]
    assert moved[0] < -0.02 and abs(moved[1]) < 0.3 * abs(moved[0]), moved
    assert peer.requests[0] == (0x1234, 2, 0) and (0x1234, 0, 0) in peer.requests  # started, then stopped


def test_recover_without_the_capability_is_409():
    svc = Service("--robot", "panda", "--driver", "simulated")
    try:
        r = post(svc, "/control/recover")
        assert r.status_code == 409 and "has no recover" in r.text
    finally:
        svc.stop()


def test_external_wrench_estimate_in_the_sensor_convention():
    """O_F_ext_hat_K (environment on the robot, at K, base frame) → the raw reading of a sensor at
    the flange in the robot_on_tool convention, checked against the rigid-body transformation
    written out independently: a point force at K seen from the flange."""
    from fdcontrol.drivers.franka import estimate_to_sensor

    rng = np.random.default_rng(3)
    for _ in range(20):
        a = rng.normal(size=3)
        c, s = math.cos(np.linalg.norm(a)), math.sin(np.linalg.norm(a))
        k = a / np.linalg.norm(a)
        K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        R = np.eye(3) + s * K + (1 - c) * K @ K  # Rodrigues
        flange = np.eye(4)
        flange[:3, :3], flange[:3, 3] = R, rng.normal(size=3)
        F_T_EE = np.eye(4)
        F_T_EE[:3, 3] = [0, 0, 0.1034]
        O_T_EE = flange @ F_T_EE
        EE_T_K = np.eye(4)
        EE_T_K[:3, 3] = rng.normal(size=3) * 0.05
        F_env = rng.normal(size=3) * 10
        wrench = np.r_[F_env, np.zeros(3)]  # a pure force at K's origin
        got = estimate_to_sensor(wrench, O_T_EE, EE_T_K, flange)
        p_K_in_flange = (F_T_EE @ EE_T_K)[:3, 3]
        f_local = R.T @ F_env
        expected = -np.r_[f_local, np.cross(p_K_in_flange, f_local)]
        assert np.allclose(got, expected, atol=1e-12)


def test_error_names_are_libfrankas_flag_names():
    """error_names reads the flags of libfranka's own Errors type: none set on a fresh one, and every
    flag name it has is one of libfranka's documented error names (a few checked by name)."""
    import pylibfranka

    from fdcontrol.drivers.franka import error_names

    assert error_names(pylibfranka.Errors()) == ()
    flags = {n for n in dir(pylibfranka.Errors) if not n.startswith("_")}
    assert {"joint_velocity_violation", "cartesian_reflex", "joint_motion_generator_acceleration_discontinuity",
            "communication_constraints_violation"} <= flags
    from types import SimpleNamespace

    assert error_names(SimpleNamespace(joint_reflex=True, cartesian_reflex=False, power_limit_violation=True)) == (
        "joint_reflex", "power_limit_violation")
