"""Forward dynamics of the virtual model (seed 004 eq. 10, 13–14), with γ scheduled on J's conditioning."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from fdcontrol.mappings.base import MAPPINGS, Mapping
from fdcontrol.model.conditioning import past_band_end, sigma_min_above
from fdcontrol.model.configuration import Configuration
from fdcontrol.model.linalg import compiled_entry, svd_jacobi
from fdcontrol.model.robot import ModelError, RobotModel
from fdcontrol.model.virtual import (
    ALGORITHM,
    ALGORITHMS,
    GAIN_MARGIN,
    GAMMA,
    GAMMA_SCHEDULE,
    GAMMA_STRAIGHT,
    REGULAR_SIGMA,
    Algorithm,
    VirtualModel,
    at_band_start,
    check_gamma,
    near_band_start,
    scheduled_gamma_at,
    scheduled_gamma_compiled,
)
from fdcontrol.params import declare

Schedule = Literal["conditioning", "fixed"]
#: calls without past_band_end after it failed (gamma_at: where h_min is not h_N, it cannot succeed)
_WAIT = 16
#: near_band_start as imported, and its compiled function entered without numba's dispatch (gamma_at)
_NEAR, _near_call = near_band_start, compiled_entry(near_band_start)


@MAPPINGS.register("fd")
class ForwardDynamics(Mapping):
    """Seed eq. 10: q̈ = H⁻¹(q) Jᵀ f on the γ-conditioned virtual model (eq. 13–14).

    ``gamma_schedule="conditioning"`` (the default, and the service's): γ(q) =
    :func:`~fdcontrol.model.virtual.scheduled_gamma` — ``gamma_straight`` away from singularities
    (J H⁻¹ Jᵀ ≈ I: the tool moves along the push),
    falling to ``gamma`` near them (the paper's regularization), never raising FD's gain above its
    peak at ``gamma``. ``"fixed"``: γ = ``gamma`` everywhere, the paper's model. Called with a
    ``gamma`` and no ``gamma_schedule`` (``ForwardDynamics(robot, 1e4)``), the mapping is that fixed γ.

    The mapping owns the solver's one ``VirtualModel``; :meth:`schedule` sets its γ at q.
    """

    name = "fd"
    solver = "forward_dynamics"
    PARAMS = declare("mapping fd", GAMMA, ALGORITHM, GAMMA_SCHEDULE, GAMMA_STRAIGHT)

    def __init__(self, robot: RobotModel, gamma: float | None = None, algorithm: Algorithm = ALGORITHM.default,
                 gamma_schedule: Schedule | None = None, gamma_straight: float = GAMMA_STRAIGHT.default) -> None:
        super().__init__(robot)
        if gamma_schedule is None:  # a γ named in the call is that γ (the paper's experiments name theirs)
            gamma_schedule = "fixed" if gamma is not None else GAMMA_SCHEDULE.default
        gamma = GAMMA.default if gamma is None else gamma
        if algorithm not in ALGORITHMS:
            raise ModelError(f"unknown algorithm {algorithm!r}; expected 'cholesky', 'aba' or 'qr'")
        if gamma_schedule not in ("conditioning", "fixed"):
            raise ModelError(f"unknown gamma_schedule {gamma_schedule!r}; expected 'conditioning' or 'fixed'")
        self.gamma0 = check_gamma(gamma, algorithm)
        self.scheduled = gamma_schedule == "conditioning"
        self.gamma_straight = check_gamma(gamma_straight, algorithm, GAMMA_STRAIGHT) if self.scheduled else self.gamma0
        self.virtual = VirtualModel(robot, gamma)
        self.algorithm: Algorithm = algorithm
        self._scheduled_at: list[float] | None = None  # the q the loop's Configuration was last scheduled at
        #: that Configuration's J when it was (its update's own array: ``is`` tells that very update), else None
        self.scheduled_jacobian: np.ndarray | None = None
        #: past_band_end decides for J with N ≤ 6 columns (v_N an eigenvector of the N×N JᵀJ), compiled only
        self._certify = past_band_end is not None and scheduled_gamma_compiled is not None and robot.dof <= 6
        self._past = True  # the last γ was past the band (gamma_straight): try past_band_end
        #: the schedule's lowest value (scheduled_gamma's where σ_N ≤ s: γ₀, or gamma_straight if that is lower)
        self._lowest = self.gamma_straight if not self.gamma_straight > self.gamma0 else self.gamma0
        self._low = False  # the last γ was that lowest value: try at_band_start
        #: at_band_start reads H − JᵀJ as AᵀA/γ: a tip of unit mass and rotational inertia, light links of m_e/γ and
        #: ip_e/γ (the model this mapping builds; checked, not assumed)
        vm = self.virtual
        self._start_test = at_band_start is not None and vm._m_e == 1.0 and vm._ip_e == 1.0
        self._wait = 0  # calls to go before a certificate (past_band_end, at_band_start) is tried again after failing
        self._M: tuple[Any, np.ndarray] | None = None  # (pinocchio data, a view of its M): at_band_start's H
        #: (J, σ, Vᵀ): the last J at_band_start certified and its SVD (near_band_start's reference)
        self._near: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._near_age = 0  # the cycles near_band_start certified from that reference
        self._near_wait = 0  # calls to go before near_band_start is tried again (after failing on a fresh reference)
        #: :meth:`_goes_near` of the state now (kept by every method that changes the state: gamma_at, schedule_past)
        self._near_first = False

    @property
    def gamma(self) -> float:
        """γ of the virtual model now (with the schedule: its value at the last scheduled q)."""
        return self.virtual.gamma

    def gamma_at(self, q: np.ndarray, J: np.ndarray | None = None, conf: Configuration | None = None,
                 regular: bool | None = None) -> float:
        """The scheduled γ at q (``gamma`` itself when the schedule is off); `J`: J(q) if known; `conf`: a
        Configuration updated at q whose J is `J` (its SVD is taken once and shared with the limits); `regular`:
        ``sigma_min_above(J, REGULAR_SIGMA)`` if the caller took it on this J (None: taken here)."""
        if not self.scheduled:
            return self.gamma0
        try:
            return self._gamma_at(q, J, conf, regular)
        finally:  # (the state it left: whether the next call at an irregular J goes straight to the certificate)
            self._near_first = self._goes_near()

    def _goes_near(self) -> bool:
        """Whether :meth:`gamma_at`, asked at a Configuration's own q and J (updated on this virtual model) where J is
        not past every band, goes straight to near_band_start's certificate in this state — no test waiting (neither
        certificate's, nor near_band_start's), past_band_end not to be tried (the last γ not past the band, or that
        test off), the last γ the lowest, the band's-start test possible, a reference SVD and the view of H taken —
        where the Configuration is the one that view is of (:meth:`schedule_irregular` asks that)."""
        return self._near is not None and self._M is not None and self._low and not self._wait \
            and not self._near_wait and not (self._certify and self._past) and self._start_test

    def _gamma_at(self, q: np.ndarray, J: np.ndarray | None, conf: Configuration | None, regular: bool | None
                  ) -> float:
        """:meth:`gamma_at` with the schedule on."""
        J = self.robot.jacobian(q) if J is None else J
        if sigma_min_above(J, REGULAR_SIGMA) if regular is None else regular:
            # past every band (no SVD needed): a Cholesky test of J Jᵀ
            self._past, self._low = True, False
            return self.gamma_straight
        own = conf is not None and conf.jacobian is J and conf.q is q and conf.virtual is self.virtual
        A = None
        if self._wait:  # the test failed lately: the SVD for a few calls (where it is too weak, it costs ~nothing)
            self._wait -= 1
        elif self._certify and self._past:
            # the link Jacobians from the Configuration's CRBA pass at q (no second pass: the same bits), into the
            # model's buffer (read at once below); past the band's end for certain (its bound from v_N alone, with
            # room for the SVD's rounding): the SVD's answer without the SVD. Tried while the last γ was past the
            # band (inside it, where it cannot succeed, it is not tried: the last γ guides which path runs, never
            # the answer)
            A = self.virtual.link_jacobians(q, conf.data if own else None, True)  # type: ignore[union-attr]
            if past_band_end(J, A, self.gamma0, GAIN_MARGIN):
                return self.gamma_straight
            self._wait = _WAIT
        start = self._low and own and not self._wait and self._start_test
        if start:
            data = conf.data  # type: ignore[union-attr]
            if self._M is None or self._M[0] is not data:  # a view of CRBA's H in the Configuration's data
                self._M = (data, data.M)
            near = self._near
            if self._near_wait:  # it failed lately on a J one cycle from its reference: J moves too fast for it
                self._near_wait -= 1
            elif near is not None:
                # (its compiled function without numba's dispatch, ~0.5 µs of its 1.7: every argument's type is
                # certain — H and J pinocchio's float64 matrices, the reference J's copy and SVD float64, the joints
                # the model's int64 vector — unless the kernel was replaced)
                call = _near_call if near_band_start is _NEAR else near_band_start
                kappa2 = call(self._M[1], J, near[0], near[1], near[2], self.virtual.link_joints,
                              conf.gamma, self.gamma0, GAIN_MARGIN, REGULAR_SIGMA)  # type: ignore[union-attr]
                if kappa2 >= 0.0:
                    # at the band's start for certain from the SVD of a J near this one (the last at_band_start
                    # certified): the SVD's answer without the SVD (held at a singular pose, J moves little a cycle;
                    # the path speed limit, which reads J⁺ there, takes it by J's LQ factorization where that
                    # certifies κ(J), else the same SVD the Configuration would take: fdcontrol.limits.compiled)
                    self._near_age += 1
                    return self._lowest
                if self._near_age == 0:
                    self._near_wait = _WAIT
        # J's thin SVD by Jacobi rotations (fdcontrol.model.linalg.svd_jacobi: the Configuration's, shared with the
        # limits, or the same function's: either way the same bits)
        _, s, Vt = conf.svd if own else svd_jacobi(J)  # type: ignore[union-attr]
        if start and len(s) > 1:
            # at the band's start for certain (σ_N ≤ s from a lower bound of h_min by the Configuration's H: the
            # light links' inertia is γ (H − JᵀJ)): its value without the link Jacobians. Tried while the last γ
            # was that value
            if at_band_start(self._M[1], J, s, Vt, self.virtual.link_joints, conf.gamma,  # type: ignore[index]
                             self.gamma0, GAIN_MARGIN, REGULAR_SIGMA):
                # (this SVD, the one near_band_start reads while J stays near this one)
                self._near = (J.copy(), s, Vt) if near_band_start is not None else None
                self._near_age = 0
                return self._lowest
            self._wait = _WAIT
        # h, the band's end and the schedule in one compiled call (for one singular value numpy sums the one
        # contiguous column pairwise, the kernel in order: that rare case keeps the plain forms' bits)
        if scheduled_gamma_compiled is not None and len(s) > 1:
            if A is None:  # (as above)
                A = self.virtual.link_jacobians(q, conf.data if own else None, True)  # type: ignore[union-attr]
            g = scheduled_gamma_compiled(A @ Vt.T, s, self.gamma0, self.gamma_straight, GAIN_MARGIN, REGULAR_SIGMA)
            if g == g:  # NaN: a value not finite or a zero division, the plain forms below decide
                self._past, self._low = g == self.gamma_straight, g == self._lowest
                return g
        h = self.virtual.link_inertia(q, Vt.T, conf.data if own else None)  # type: ignore[union-attr]
        # the common case first: every σ_k past the schedule's band (its end 2s/ρ, scheduled_gamma)
        end = min(2.0 * math.sqrt(max(float(h.min()), 0.0) / self.gamma0) / GAIN_MARGIN, REGULAR_SIGMA)
        if s[-1] >= end:
            self._past, self._low = True, False
            return self.gamma_straight
        g = scheduled_gamma_at(s.tolist(), h.tolist(), self.gamma0, self.gamma_straight)
        self._past, self._low = False, g == self._lowest
        return g

    def schedule(self, q: np.ndarray, conf: Configuration | None = None, regular: bool | None = None) -> bool:
        """Set the virtual model's γ to its scheduled value at q; with `conf` (updated at q on this
        virtual model) refactor it when γ moved. True when γ changed. `regular`: ``sigma_min_above(conf.jacobian,
        REGULAR_SIGMA)`` if the caller took it (read only with `conf` updated at q on this virtual model)."""
        if not self.scheduled:
            return False
        own = conf is not None and conf.virtual is self.virtual and conf.q is q
        key = q.tolist() if own else None
        if own and key == self._scheduled_at:  # the cycle's Configuration, scheduled already (the read stage)
            return False
        g = self.gamma_at(q, conf.jacobian if own else None, conf if own else None,  # type: ignore[union-attr]
                          regular if own else None)
        self._scheduled_at = key
        self.scheduled_jacobian = conf.jacobian if own else None  # type: ignore[union-attr]
        if g == self.virtual.gamma:
            return False
        self.virtual.set_gamma(g)
        if own:
            conf.refactor()  # type: ignore[union-attr]  # γ moves H, never J: pose, J and its SVD stay
        return True

    def schedule_irregular(self, q: np.ndarray, conf: Configuration) -> None:
        """:meth:`schedule` at a Configuration's q (updated at this very `q` on this virtual model, the schedule on)
        where the caller found its J not past every band (``sigma_min_above(conf.jacobian, REGULAR_SIGMA)`` False):
        where :meth:`gamma_at` would go straight to near_band_start's certificate (held at a singular pose: the last
        γ the lowest, no test waiting, a reference SVD — :meth:`_goes_near`, as gamma_at left the state —, the view of
        H this Configuration's, the compiled function as imported) and it certifies, its
        answer without the Python around it — the same call with the same arguments, the same state set, the same
        γ; everywhere else :meth:`schedule` itself (a certificate that fails is taken again there, where its failure
        is handled: the same call, the same value)."""
        key = q.tolist()
        if key == self._scheduled_at:  # scheduled already at this q (schedule's own test)
            return
        if self._near_first and self._M[0] is conf.data and near_band_start is _NEAR:  # type: ignore[index]
            J, M, near = conf.jacobian, self._M, self._near
            if _near_call(M[1], J, near[0], near[1], near[2], self.virtual.link_joints,  # type: ignore[index]
                          conf.gamma, self.gamma0, GAIN_MARGIN, REGULAR_SIGMA) >= 0.0:
                self._near_age += 1
                self._scheduled_at, self.scheduled_jacobian = key, J
                if self._lowest != self.virtual.gamma:
                    self.virtual.set_gamma(self._lowest)
                    conf.refactor()
                return
        self.schedule(q, conf, False)

    def schedule_past(self) -> bool:
        """:meth:`schedule` at a Configuration's q (on this virtual model) where the caller found its J past every
        band (``sigma_min_above(conf.jacobian, REGULAR_SIGMA)``: γ is ``gamma_straight`` there): True when γ is that
        value already — nothing to change, no refactoring (the schedule's state set as :meth:`gamma_at` sets it, the
        q it was scheduled at forgotten) — or the schedule is off; False: the caller runs :meth:`schedule`."""
        if not self.scheduled:
            return True
        if self.virtual.gamma != self.gamma_straight:
            return False
        self._past, self._low, self._scheduled_at, self.scheduled_jacobian = True, False, None, None
        self._near_first = False  # (_goes_near: the last γ is not the lowest)
        return True

    def joint_space(self, q: np.ndarray) -> np.ndarray:
        self.schedule(q)
        return self.virtual.joint_space(q, self.algorithm)

    def joint_space_at(self, conf: Configuration) -> np.ndarray:
        """H⁻¹Jᵀ from the configuration's Cholesky factor when it is this mapping's virtual model
        and algorithm; otherwise by the algorithm at the configuration's q."""
        if self.algorithm == "cholesky" and conf.virtual is self.virtual:
            self.schedule(conf.q, conf)
            return conf.inertia_inverse @ conf.jacobian.T
        return self.joint_space(conf.q)

    def params(self) -> dict[str, float | str]:
        return {"gamma": self.gamma0, "algorithm": self.algorithm,
                "gamma_schedule": "conditioning" if self.scheduled else "fixed", "gamma_straight": self.gamma_straight}
