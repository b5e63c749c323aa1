"""Where the virtual model starts each cycle: at the measured q, or at the previous reference.

A velocity servo such as UR's speedj integrates the velocity reference into its own position
reference, q_s = q₀ + ∫q̇_ref, and drives the joints towards it; the joints lag q_s by the
servo's tracking error. A controller that starts each cycle of the virtual model at the
*measured* q evaluates J and H⁻¹ (Scherzinger et al., "Virtual Forward Dynamics Models for
Cartesian Robot Control", eq. 10) at a configuration behind the one the servo applies the
velocity at, and the commanded joint path is no longer the virtual model's straight
Cartesian path: the tip bends away from the pushed direction while the servo lags
(docs/physics.md, "Sideways drift in hand guiding").

:class:`ReferenceIntegration` wraps any solver and starts it at the integrated reference
instead, q_v,k = q_v,k−1 + dt q̇_ref,k−1 (the limited reference the loop sent), so the
servo's q_s *is* the virtual model's trajectory. The tracking error stays bounded, q_v =
q + clip(q_v − q, ±``max_tracking_error``) (rad): an arm held back by contact or a torque
limit pulls the virtual model with it instead of winding it up, and a new start (or a
reference that was not sent, e.g. while holding) re-anchors it at the measured q.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from fdcontrol.loop.solvers import Solver
from fdcontrol.model.configuration import Configuration

ReferenceSource = Literal["measured", "reference"]
REFERENCE_SOURCES: tuple[str, ...] = ("measured", "reference")


class ReferenceIntegration(Solver):
    """A solver whose virtual model starts at the integrated reference (see the module doc).

    ``step(q, q̇_state, f, dt, τ, config)`` — the loop's solver protocol; q̇_state is the
    reference the loop sent last (its anti-windup feedback), which is exactly the velocity the
    servo integrated over the last period.
    """

    shares_configuration = True

    def __init__(self, solver: object, max_tracking_error: float = 0.05) -> None:
        e = float(max_tracking_error)
        if not (math.isfinite(e) and e > 0):
            raise ValueError("max_tracking_error must be finite and > 0 (rad)")
        self.inner, self.max_tracking_error = solver, e
        self._q: np.ndarray | None = None

    # the optional parts of a Solver are the inner solver's (the base class's defaults would hide them)
    virtual = property(lambda self: self.inner.virtual)  # type: ignore[assignment]
    constraints = property(lambda self: self.inner.constraints)  # type: ignore[assignment]
    last_converged = property(lambda self: self.inner.last_converged)  # type: ignore[assignment]

    def __getattr__(self, name: str) -> object:  # mapping, virtual, constraints, decay … of the inner solver
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def reset(self) -> None:
        """Start the next cycle at the measured q."""
        self._q = None

    def step(self, q: np.ndarray, qd: np.ndarray, wrench: np.ndarray, dt: float,
             tau: np.ndarray | None = None, config: Configuration | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        qv = q.copy() if self._q is None else self._q + dt * np.asarray(qd)
        e = self.max_tracking_error
        qv = q + np.clip(qv - q, -e, e)
        inner = self.inner
        if getattr(inner, "shares_configuration", False):
            out = inner.step(qv, qd, wrench, dt, tau, config=None)  # type: ignore[attr-defined]
        else:
            out = inner.step(qv, qd, wrench, dt) if tau is None else inner.step(qv, qd, wrench, dt, tau)  # type: ignore[attr-defined]
        self._q = qv
        return out
