"""Integrators: one step (q, q̇) → (q, q̇) of q̈ = a(q, q̇) over dt.

Every integrator has ``step(accel, q, qd, dt) -> (q, qd)`` and records the sub-steps it took
in ``last_substeps``. ``accel`` is the virtual model's q̈(q, q̇) with the wrench held
constant over the step (zero-order hold, as the control signal is sampled).

``INTEGRATORS`` registers them by name (like mappings, laws and limits): an integrator is one
class with a ``name`` and that ``step``; the settings, the API and the dashboard list the registry.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from fdcontrol.params import Param, declare
from fdcontrol.registry import Registry

Accel = Callable[[np.ndarray, np.ndarray], np.ndarray]


class Integrator:
    """Base of the integrators: ``step`` advances (q, q̇) by dt under q̈ = accel(q, q̇).

    ``last_substeps``: internal steps the last call took; ``last_converged``: it met its error
    tolerance (fixed-step integrators: always True, the default here)."""

    name: str = "integrator"
    last_substeps: int = 1
    last_converged: bool = True

    def step(self, accel: Accel, q: np.ndarray, qd: np.ndarray, dt: float
             ) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError


class SemiImplicitEuler(Integrator):
    """Symplectic Euler, first order: q̇⁺ = q̇ + dt·a(q, q̇);  q⁺ = q + dt·q̇⁺."""

    name = "euler"

    def __init__(self) -> None:
        self.last_substeps = 1

    def step(self, accel: Accel, q: np.ndarray, qd: np.ndarray, dt: float
             ) -> tuple[np.ndarray, np.ndarray]:
        qd1 = qd + dt * accel(q, qd)
        return q + dt * qd1, qd1


class RK4(Integrator):
    """Classic fourth-order Runge–Kutta on the state y = (q, q̇), ẏ = (q̇, a(q, q̇))."""

    name = "rk4"

    def __init__(self) -> None:
        self.last_substeps = 1

    def step(self, accel: Accel, q: np.ndarray, qd: np.ndarray, dt: float
             ) -> tuple[np.ndarray, np.ndarray]:
        h = 0.5 * dt
        k1q, k1v = qd, accel(q, qd)
        k2q, k2v = qd + h * k1v, accel(q + h * k1q, qd + h * k1v)
        k3q, k3v = qd + h * k2v, accel(q + h * k2q, qd + h * k2v)
        k4q, k4v = qd + dt * k3v, accel(q + dt * k3q, qd + dt * k3v)
        s = dt / 6.0
        return (q + s * (k1q + 2 * k2q + 2 * k3q + k4q),
                qd + s * (k1v + 2 * k2v + 2 * k3v + k4v))


class BogackiShampine(Integrator):
    """Adaptive embedded Runge–Kutta 3(2) pair (Bogacki & Shampine 1989), FSAL.

    Local error control as in seed 003 ("adaptive step size based on the embedded
    estimation of the local truncation error"): the 3rd-order solution is kept, the
    difference to the embedded 2nd-order one estimates the error, and a sub-step is
    accepted when ‖err / (atol + rtol·|y|)‖_∞ ≤ 1; the next sub-step is
    h·min(5, max(0.2, 0.9·err^(-1/3))).

    For real time the work is bounded: at most ``max_substeps`` attempted sub-steps per
    call. When the budget runs out the remainder of dt is taken in one final step and
    ``last_converged`` is False (the caller sees it, the cycle deadline is kept).
    """

    name = "bs32"
    order = 3

    def __init__(self, rtol: float = 1e-6, atol: float = 1e-8, max_substeps: int = 16) -> None:
        if not (rtol > 0 and atol > 0 and max_substeps >= 1):
            raise ValueError("rtol, atol must be > 0 and max_substeps >= 1")
        self.rtol, self.atol, self.max_substeps = rtol, atol, int(max_substeps)
        self.last_substeps = 0
        self.last_converged = True
        self._h: float | None = None  # step-size memory across calls

    def _stage(self, accel: Accel, q, qd, h, k1q, k1v):
        k2q, k2v = qd + 0.5 * h * k1v, accel(q + 0.5 * h * k1q, qd + 0.5 * h * k1v)
        k3q, k3v = qd + 0.75 * h * k2v, accel(q + 0.75 * h * k2q, qd + 0.75 * h * k2v)
        q3 = q + h * (2 * k1q + 3 * k2q + 4 * k3q) / 9
        v3 = qd + h * (2 * k1v + 3 * k2v + 4 * k3v) / 9
        k4q, k4v = v3, accel(q3, v3)
        eq = h * (-5 * k1q / 72 + k2q / 12 + k3q / 9 - k4q / 8)  # y3 − y2
        ev = h * (-5 * k1v / 72 + k2v / 12 + k3v / 9 - k4v / 8)
        return q3, v3, k4q, k4v, eq, ev

    def step(self, accel: Accel, q: np.ndarray, qd: np.ndarray, dt: float
             ) -> tuple[np.ndarray, np.ndarray]:
        t, n = 0.0, 0
        h = min(self._h or dt, dt)
        k1q, k1v = qd, accel(q, qd)
        self.last_converged = True
        while t < dt * (1 - 1e-12):
            h = min(h, dt - t)
            last_try = n == self.max_substeps - 1
            if last_try:
                h = dt - t
            q3, v3, k4q, k4v, eq, ev = self._stage(accel, q, qd, h, k1q, k1v)
            n += 1
            sq = self.atol + self.rtol * np.maximum(np.abs(q), np.abs(q3))
            sv = self.atol + self.rtol * np.maximum(np.abs(qd), np.abs(v3))
            err = max(float(np.max(np.abs(eq) / sq)), float(np.max(np.abs(ev) / sv)))
            if not math.isfinite(err):
                err = math.inf
            if err <= 1.0 or last_try:
                if err > 1.0:
                    self.last_converged = False
                t += h
                q, qd, k1q, k1v = q3, v3, k4q, k4v  # first same as last
            fac = 5.0 if err == 0 else min(5.0, max(0.2, 0.9 * err ** (-1 / 3)))
            h = h * fac
        self._h = h
        self.last_substeps = n
        return q, qd


INTEGRATORS: Registry[Integrator] = Registry("integrator")
PARAMS = declare("integrator", Param("integrator", "choice", "euler", "integrator of the virtual model "
                                     "(a registered one)", choices=lambda: INTEGRATORS.names()))
for _cls in (SemiImplicitEuler, RK4, BogackiShampine):
    INTEGRATORS.register(_cls.name)(_cls)


def make_integrator(name: str, **kwargs: float) -> Integrator:
    """Integrator by registered name (euler, rk4, bs32, …); an unknown name raises ValueError
    (:class:`~fdcontrol.registry.UnknownName`) listing the registered ones."""
    return INTEGRATORS.create(name, **kwargs)
