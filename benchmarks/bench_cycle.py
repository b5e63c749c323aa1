"""Cost of one FD control cycle relative to the lean FD core, measured in one run, one process.

    python benchmarks/bench_cycle.py [--cycles 4000] [--rounds 8] [--robots ur10 panda]

Per robot, per call (µs, p50 and p99), interleaved in rounds so that machine load hits all alike:

* ``core``  — the lean FD core: CRBA (WORLD convention, fills the joint Jacobians), the frame
  Jacobian, pinocchio's Cholesky, q̈ = H⁻¹Jᵀf − c q̇ and one semi-implicit Euler step;
* ``loop``  — ``ControlLoop.step``: FD solver (Coriolis, joint-limit constraints), kinematic
  ``SimulatedRobot`` (its read + send are in the cycle), a wrench applied, safety limits,
  decimated telemetry; ``set_wrench`` — what a fresh streamed wrench adds per cycle;
  ``sim_driver`` — the simulator's read + send alone;
* ``proto`` — the same cycle written as issue 14 intends: one :class:`Configuration` update
  (pose, J, H, H⁻¹ in one pass) shared by the law, the FD step, the limits and the telemetry
  (checked here to give the same references as ``loop``);
* ``limits`` — ``SafetyLimits.apply`` alone, and ``limits_np`` — the same four limits written
  with numpy calls (the alternative the plain-float code is measured against);
* ``shm_today`` / ``shm_derived`` — publishing a state into shared memory with server/worker.py's
  hand-written writer and with fdcontrol.state's derived layout; ``dict_derived`` — the
  JSON/MessagePack dict.

Ratios loop/core and proto/core are printed for p50 and p99. Not a test: numbers depend on
the machine and its load.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pinocchio as pin

from fdcontrol import RobotModel, make_mapping
from fdcontrol.configuration import Configuration
from fdcontrol.control import ControlInput
from fdcontrol.drivers import SimulatedRobot
from fdcontrol.loop import ControlLoop, LoopState
from fdcontrol.robot import HOME
from fdcontrol.safety import BRAKING_MARGIN, SafetyLimits
from fdcontrol.solvers import ForwardDynamicsSolver, make_solver

DT = 0.002
WRENCH = np.array([5.0, -3.0, 2.0, 0.1, 0.0, 0.2])


class LeanCore:
    """CRBA + frame Jacobian + Cholesky + Euler on the virtual model: the floor of a cycle."""

    def __init__(self, solver: ForwardDynamicsSolver) -> None:
        vm = solver.virtual
        self.m, self.d, self.tip, self.c = vm.model, vm.model.createData(), vm.tip_id, solver.decay

    def __call__(self, q: np.ndarray, qd: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m, d = self.m, self.d
        pin.crba(m, d, q, pin.Convention.WORLD)
        J = pin.getFrameJacobian(m, d, self.tip, pin.LOCAL_WORLD_ALIGNED)
        pin.cholesky.decompose(m, d)
        a = pin.cholesky.solve(m, d, J.T @ f) - self.c * qd
        qd1 = qd + DT * a
        return q + DT * qd1, qd1


class ProtoLoop:
    """ControlLoop.step (admittance, streamed wrench, FD) with one Configuration per cycle."""

    def __init__(self, loop: ControlLoop) -> None:
        self.loop = loop
        self.solver: ForwardDynamicsSolver = loop.solver  # type: ignore[assignment]
        self.conf = Configuration(loop.robot, virtual=self.solver.virtual)
        self.zero = np.zeros(loop.robot.dof)

    def fd_step(self, q: np.ndarray, qd: np.ndarray, f: np.ndarray) -> np.ndarray:
        """Seed eq. 10 with damping and Coriolis (solvers.py), one Euler sub-step, from the
        configuration's H⁻¹ and J; joints at a limit fall back to the solver's active set."""
        s, conf = self.solver, self.conf
        up, lo = s.constraints.at_limit(q)
        if up.any() or lo.any():
            return s.step(q, qd, f, DT)[1]
        s.constraints.active[:] = False
        a = conf.acceleration(f, -s.joint_damping * qd, conf.bias(qd)) - s.decay * qd
        qd1 = qd + DT * a
        return s.constraints.project(q + DT * qd1, qd1)[1]

    def step(self, now: float) -> LoopState:
        lp, conf = self.loop, self.conf
        js = lp.driver.read()
        q = js.q
        conf.update(q)
        pose, J = conf.pose, conf.jacobian
        cmd = lp._command
        watchdog, f_applied = "idle", self.zero
        if cmd is not None:
            watchdog, f_applied = ("tripped", self.zero) if now - cmd.t > lp.command_timeout else ("ok", cmd.wrench)
        holding = watchdog == "tripped" or lp.fault is not None
        fc = lp.law(ControlInput(pose, conf.twist(js.qd), self.zero, f_applied, lp._target))
        qd_des = self.zero if holding else self.fd_step(q, lp.qd_state, fc)
        qd_ref = lp.limits.apply(q, qd_des, lp.qd_ref, J, DT)
        if lp.cycle == 0:
            qd_ref = self.zero.copy()
        q_ref = q + DT * qd_ref
        lp.driver.send(q_ref, qd_ref)
        lp.qd_ref = lp.qd_state = qd_ref
        lp.cycle += 1
        prev = lp.state
        s, kh = (conf.sigma_min, conf.kappa_h) if lp.cycle % 10 == 1 else (prev.sigma_min_j, prev.kappa_h)
        active = dict(lp.limits.active)
        active["virtual_joint_limit"] = bool(self.solver.constraints.active.any())
        lp.state = LoopState(js.t, lp.cycle, q, js.qd, q_ref, qd_ref, pose, fc, self.zero, lp.law.mode, True,
                             holding, watchdog, cmd.seq if cmd else 0, lp.fault, s, active, kh)  # type: ignore
        return lp.state


def numpy_limits(lim: SafetyLimits):
    """The same four limits written with numpy calls (for the plain-float comparison)."""
    def apply(q, qd, prev, J, dt):
        tw = J @ qd
        s = min(1.0, lim.max_linear_speed / max(np.linalg.norm(tw[:3]), 1e-300),
                lim.max_angular_speed / max(np.linalg.norm(tw[3:]), 1e-300))
        out = qd * s
        du, dl = lim.upper - q, q - lim.lower
        a = lim.max_acceleration
        hi = np.minimum(np.sqrt(2 * BRAKING_MARGIN * a * np.maximum(du, 0)), np.maximum(du, 0) / dt)
        lo = -np.minimum(np.sqrt(2 * BRAKING_MARGIN * a * np.maximum(dl, 0)), np.maximum(dl, 0) / dt)
        out = np.clip(out, lo, hi)
        r = np.max(np.abs(out) / lim.max_velocity)
        if r > 1:
            out = out / r
        step = a * dt
        r = np.max(np.abs(out - prev) / step)
        if r > 1:
            out = prev + (out - prev) / r
        out = np.clip(np.clip(out, lo, hi), prev - step, prev + step)
        hard_hi = np.minimum(lim.max_velocity, np.maximum(du, 0) / dt)
        hard_lo = np.maximum(-lim.max_velocity, -np.maximum(dl, 0) / dt)
        return np.clip(out, hard_lo, hard_hi)
    return apply


def make_loop(robot: RobotModel) -> ControlLoop:
    sim = SimulatedRobot(robot, dt=DT, q0=np.array(HOME[robot.name]))
    return ControlLoop(robot, sim, make_solver(make_mapping("fd", robot)), rate=1 / DT)


def stream(loop: ControlLoop, now: float) -> None:
    """A live stream: a fresh wrench arrives before every cycle."""
    loop.set_wrench(WRENCH * math.cos(now), t=now)


def hold_wrench(loop: ControlLoop) -> None:
    """One wrench that never goes stale (arrival time far ahead): the cycle without input cost."""
    loop.set_wrench(WRENCH, t=1e12)


def check_equivalent(robot: RobotModel, cycles: int = 300) -> float:
    """Max |q̇_ref(loop) − q̇_ref(proto)| over a run from the same start and inputs."""
    a, b = make_loop(robot), make_loop(robot)
    proto = ProtoLoop(b)
    worst = 0.0
    for i in range(cycles):
        now = i * DT
        stream(a, now)
        stream(b, now)
        worst = max(worst, float(np.max(np.abs(a.step(now=now).qd_ref - proto.step(now).qd_ref))))
    return worst


def publish_calls(loop: ControlLoop) -> dict:
    """Publishing a state: today's hand-written shared-memory writer vs the derived layout."""
    from fdcontrol import state as st

    calls = {}
    try:
        from server.worker import Channel
    except ImportError:  # the service is not installed: skip today's writer
        Channel = None
    layout = st.SharedLayout(extra=("last_cycle_at",))
    buf, shm = layout.empty(), layout.empty()
    s = st.LoopState(**{f.name: getattr(loop.state, f.name) for f in st.FIELDS})

    def pack() -> None:
        layout.pack(s, buf, last_cycle_at=1.0)
        shm[1:] = buf[1:]  # the seqlock's copy into shared memory

    calls["shm_derived"] = pack
    calls["dict_derived"] = lambda: st.to_dict(s)
    if Channel is not None:
        ch = Channel()
        import atexit

        atexit.register(ch.close, unlink=True)
        calls["shm_today"] = lambda: ch.write_state(loop.state, 1.0)
    return calls


def timed(fn, n: int) -> list[float]:
    clock, out = time.perf_counter_ns, []
    for _ in range(n):
        t0 = clock()
        fn()
        out.append(clock() - t0)
    return out


def bench(robot: RobotModel, cycles: int, rounds: int) -> dict[str, np.ndarray]:
    loop, ploop = make_loop(robot), make_loop(robot)
    proto, core = ProtoLoop(ploop), LeanCore(loop.solver)  # type: ignore[arg-type]
    q, qd = np.array(HOME[robot.name]), np.zeros(robot.dof)
    lim = SafetyLimits.from_robot(robot)
    lim_np = numpy_limits(lim)
    J = robot.jacobian(q)
    qd_des, prev = np.full(robot.dof, 0.3), np.zeros(robot.dof)
    hold_wrench(loop)
    hold_wrench(ploop)
    drv = SimulatedRobot(robot, dt=DT, q0=q)
    calls = {"core": lambda: core(q, qd, WRENCH), "loop": lambda: loop.step(now=0.0),
             "proto": lambda: proto.step(0.0), "set_wrench": lambda: loop.set_wrench(WRENCH, t=1e12),
             "sim_driver": lambda: drv.send(drv.read().q, qd),
             "limits": lambda: lim.apply(q, qd_des, prev, J, DT),
             "limits_np": lambda: lim_np(q, qd_des, prev, J, DT)}
    calls.update(publish_calls(loop))
    for fn in calls.values():  # warm up
        timed(fn, 200)
    samples: dict[str, list[float]] = {k: [] for k in calls}
    per = max(1, cycles // rounds)
    for _ in range(rounds):
        for k, fn in calls.items():
            samples[k] += timed(fn, per)
    return {k: np.array(v) / 1e3 for k, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=4000, help="timed calls per item (bounded)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--robots", nargs="+", default=["ur10", "panda"])
    args = ap.parse_args()
    cycles = min(args.cycles, 100_000)
    for name in args.robots:
        robot = RobotModel.load(name)
        diff = check_equivalent(robot)
        r = bench(robot, cycles, args.rounds)
        p = {k: (np.percentile(v, 50), np.percentile(v, 99)) for k, v in r.items()}
        print(f"\n{name} ({robot.dof} joints), {cycles} calls each; proto vs loop max |Δq̇_ref| = {diff:.1e} rad/s")
        print(f"{'item':>10} {'p50 µs':>8} {'p99 µs':>8} {'p50/core':>9} {'p99/core':>9}")
        for k, (a, b) in p.items():
            print(f"{k:>10} {a:8.1f} {b:8.1f} {a / p['core'][0]:9.1f} {b / p['core'][1]:9.1f}")


if __name__ == "__main__":
    main()
