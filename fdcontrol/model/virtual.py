"""VirtualModel: the robot's kinematics with γ-conditioned masses (seed 004, eqs. 9–14).

The end-effector (tip) body has mass m_e = 1 kg and isotropic rotational inertia
ip_e = 1 kg·m², centred at the tip frame origin — the Jacobian's reference point. Every
other moving link has m_l = m_e/γ and ip_l = ip_e/γ centred at its joint frame origin
(eq. 13: γ = m_e/m_l = ip_e/ip_l). Then the joint-space inertia is

    H(q) = Jᵀ J + H_l(q)/γ,   H_l = Σ_links J_bᵀ diag(I₃, I₃) J_b,

so forward dynamics q̈ = H⁻¹ Jᵀ f (eq. 10) is damped least squares with
configuration-dependent damping H_l(q)/γ, and J H⁻¹ Jᵀ → I as γ grows (eq. 12, Λ⁻¹ → I).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pinocchio as pin
import scipy.linalg

from fdcontrol.model.conditioning import _cholesky_shifted
from fdcontrol.model.linalg import symmetric_upper
from fdcontrol.model.robot import ModelError, RobotModel
from fdcontrol.model.spatial import cross
from fdcontrol.params import Param, ParamError

Algorithm = Literal["cholesky", "aba", "qr"]
ALGORITHMS: tuple[str, ...] = ("cholesky", "aba", "qr")


#: Largest γ per algorithm whose q̈ stays within 1e-6 (relative) of a 50-digit reference at
#: random, near-singular (σmin(J) down to 4e-9) and exactly singular UR10 configurations,
#: with a 10× margin below the measured limit for Cholesky and ABA
#: (`fdcontrol experiments numerics`, docs/experiments/numerics/summary.md).
GAMMA_MAX: dict[str, float] = {"cholesky": 1e9, "aba": 1e10, "qr": 1e12}

#: γ, declared once: its default, its widest bound (the QR algorithm's) and its lower bound (1/γ
#: must stay a normal float: a subnormal γ makes the virtual links' inertia infinite)
GAMMA = Param("gamma", "float", 1e3, "mass dominance γ = m_e/m_l of the virtual model: near singularities (the "
              "paper's regularizing value) with gamma_schedule 'conditioning', everywhere with 'fixed' (the bound "
              "depends on the algorithm: cholesky ≤ 1e9, aba ≤ 1e10, qr ≤ 1e12)", ge=1e-6, le=max(GAMMA_MAX.values()))
#: the floats check_gamma(γ) returns as they are (GAMMA's bounds, the widest algorithm's limit; GAMMA has no gt)
_GAMMA_LO, _GAMMA_HI = GAMMA.ge, min(GAMMA.le, max(GAMMA_MAX.values()))
assert GAMMA.gt is None and _GAMMA_LO is not None
#: γ away from singularities under the conditioning schedule (:func:`scheduled_gamma`)
GAMMA_STRAIGHT = Param("gamma_straight", "float", 1e6, "γ away from singularities when gamma_schedule is "
                       "'conditioning': the virtual model's coupling J H⁻¹ Jᵀ − I falls as 1/γ, so the tool moves "
                       "along the push (≤ the algorithm's bound, like gamma)", ge=1e-6, le=max(GAMMA_MAX.values()))
GAMMA_SCHEDULE = Param("gamma_schedule", "choice", "conditioning", "'conditioning': γ = gamma_straight away from "
                       "singularities, falling to gamma near them so that FD's gain never exceeds its peak at gamma "
                       "(docs/physics.md); 'fixed': γ = gamma everywhere (the paper's setting)",
                       choices=("conditioning", "fixed"))
#: the schedule keeps FD's gain along each singular direction at ≤ GAIN_MARGIN × the peak gain of the
#: fixed γ wherever it raises γ above it (the peak itself, at σ = √(h/γ), is reached only at γ)
GAIN_MARGIN = 0.9
#: σ_k of J (m, or rad for rotation) from which on the schedule is at gamma_straight in any case: the
#: schedule's band never reaches past it, so FD's gain there is ≤ 1/REGULAR_SIGMA = 20 (a regular pose)
REGULAR_SIGMA = 0.05

ALGORITHM = Param("algorithm", "choice", "cholesky", "how q̈ = H⁻¹Jᵀf is solved: CRBA + Cholesky, ABA, "
                  "or QR of the square-root form", choices=ALGORITHMS)


def check_gamma(gamma: float, algorithm: str = "qr", param: Param = GAMMA) -> float:
    """γ within its declaration (:data:`GAMMA`, or :data:`GAMMA_STRAIGHT` for ``param``) and
    ≤ GAMMA_MAX[algorithm] — the one check of γ, used by the virtual model, the FD mapping and the
    service's settings alike; the message names ``param``."""
    try:
        g = param.check(gamma)
    except ParamError as exc:
        raise ModelError(str(exc)) from None
    limit = GAMMA_MAX.get(algorithm, max(GAMMA_MAX.values()))
    if g > limit:
        raise ModelError(f"{param.name} = {g:g} exceeds the accurate range of the {algorithm} algorithm "
                         f"(≤ {limit:g}; q̈ would lose more than 1e-6 relative accuracy near "
                         f"singularities); use algorithm='qr' (≤ 1e12) or a smaller {param.name}")
    return g


def scheduled_gamma(sigma: np.ndarray, h: np.ndarray, gamma: float, gamma_straight: float,
                    margin: float = GAIN_MARGIN, regular: float = REGULAR_SIGMA) -> np.ndarray:
    """γ scheduled on the conditioning of J (docs/physics.md, "The default γ").

    Per singular direction k of J (σ_k, right singular vector v_k, light-link inertia at unit link
    mass h_k = v_kᵀ H_l v_k) FD's gain along it is g_k = σ_k / (σ_k² + h_k/γ). At the fixed γ₀ =
    `gamma` it peaks at G = ½√(γ₀/h) where σ_k = s = √(h/γ₀); with h the smallest h_k here (the
    direction with the largest such peak), the gain stays ≤ ρG (ρ = `margin`) for every γ up to

        f_k(σ) = h_k / (σ (2s/ρ − σ))   (σ < 2s/ρ; any γ beyond).

    The band ends at σ = 2s/ρ; where that would lie beyond σ_reg = `regular` (a heavily loaded
    direction, whose peak gain at γ₀ is below 1/σ_reg) s/ρ is lowered to σ_reg/2, so the gain there
    stays ≤ 1/σ_reg instead. The schedule is γ₀ up to σ_k = s/ρ (the minimum of f_k: the singular
    neighbourhood keeps the paper's regularization), then rises continuously and never above f_k,

        γ_k = γ₀ + max(0, f_k(σ_k) − max(f_k(s/ρ), γ₀)),   γ_k = ∞ from σ_k ≥ 2s/ρ on,
        γ   = min(γ_straight, max(γ₀, min_k γ_k)).

    `sigma` and `h` are (..., k) arrays; returns (...).
    """
    sigma, h = np.asarray(sigma, dtype=float), np.asarray(h, dtype=float)
    s = np.minimum(np.sqrt(np.maximum(h.min(axis=-1, keepdims=True), 0.0) / gamma) / margin, regular / 2)  # s/ρ
    with np.errstate(divide="ignore", invalid="ignore"):
        f = h / (sigma * (2 * s - sigma))
        knee = np.maximum(h / (s * s), gamma)  # max(f_k(s/ρ), γ₀)
        g = np.where(sigma >= 2 * s, np.inf,
                     np.where(sigma <= s, gamma, gamma + np.maximum(0.0, f - knee)))
    g = np.where(np.isnan(g), gamma, g)
    return np.minimum(gamma_straight, np.maximum(gamma, g.min(axis=-1)))


def scheduled_gamma_at(sigma: list[float], h: list[float], gamma: float, gamma_straight: float,
                       margin: float = GAIN_MARGIN, regular: float = REGULAR_SIGMA) -> float:
    """:func:`scheduled_gamma` of one pose, in plain floats (the same operations in the same order, so the
    same bits — tests/test_straight.py; a fifth of the numpy form's cost for k ≤ 7): `sigma` and `h` lists."""
    if not (math.isfinite(sum(sigma)) and math.isfinite(sum(h))):
        return float(scheduled_gamma(np.array(sigma), np.array(h), gamma, gamma_straight, margin, regular))
    hmin = min(h)
    s = math.sqrt((hmin if hmin > 0.0 else 0.0) / gamma) / margin
    if not s < regular / 2:  # np.minimum(x, r/2)
        s = regular / 2
    out = math.inf
    for sk, hk in zip(sigma, h, strict=True):
        if sk >= 2 * s:
            continue  # γ_k = ∞
        if sk <= s:
            g = gamma
        else:
            try:
                f = hk / (sk * (2 * s - sk))
            except ZeroDivisionError:  # numpy: ±inf or nan, ignored
                return float(scheduled_gamma(np.array(sigma), np.array(h), gamma, gamma_straight, margin, regular))
            knee = hk / (s * s)
            if not knee > gamma:
                knee = gamma
            d = f - knee
            g = gamma + (d if d > 0.0 else 0.0)
            if g != g:
                g = gamma
        if g < out:
            out = g
    if not out > gamma:
        out = gamma
    return gamma_straight if not gamma_straight > out else out


def _scheduled_gamma_kernel(AV: np.ndarray, sigma: np.ndarray, gamma: float, gamma_straight: float,
                            margin: float, regular: float) -> float:  # pragma: no mutate block
    """The γ schedule of one pose from AV = A V (A the light links' Jacobians, V J's right singular vectors; a
    C-ordered array, as a matrix product is) and σ: h_k = Σ_i AV[i, k]² (summed over i in order, as numpy's
    ``(AV * AV).sum(axis=0)`` does on that layout), the band's end test of
    ``ForwardDynamics.gamma_at``, then :func:`scheduled_gamma_at` — the same float operations in the same order,
    so the same bits. NaN where the plain-float forms would hand over to numpy (a value not finite, a zero
    division): the caller then takes those forms."""
    n, k = AV.shape[0], AV.shape[1]
    h = np.empty(k)
    total_h, total_s = 0.0, 0.0
    for j in range(k):
        acc = 0.0
        for i in range(n):
            acc += AV[i, j] * AV[i, j]
        h[j] = acc
        total_h += acc
        total_s += sigma[j]
    if not (math.isfinite(total_h) and math.isfinite(total_s)):
        return math.nan
    hmin = h[0]
    for j in range(1, k):
        if h[j] < hmin:
            hmin = h[j]
    # ForwardDynamics.gamma_at: every σ_k past the band's end 2s/ρ (or σ_reg): gamma_straight
    end = 2.0 * math.sqrt((hmin if hmin > 0.0 else 0.0) / gamma) / margin
    if not end < regular:
        end = regular
    if sigma[k - 1] >= end:
        return gamma_straight
    # scheduled_gamma_at
    s = math.sqrt((hmin if hmin > 0.0 else 0.0) / gamma) / margin
    if not s < regular / 2:
        s = regular / 2
    out = math.inf
    for j in range(k):
        sk, hk = sigma[j], h[j]
        if sk >= 2 * s:
            continue
        if sk <= s:
            g = gamma
        else:
            den = sk * (2 * s - sk)
            if den == 0.0:
                return math.nan
            f = hk / den
            knee = hk / (s * s)
            if not knee > gamma:
                knee = gamma
            d = f - knee
            g = gamma + (d if d > 0.0 else 0.0)
            if g != g:
                g = gamma
        if g < out:
            out = g
    if not out > gamma:
        out = gamma
    return gamma_straight if not gamma_straight > out else out


def _at_band_start_kernel(M: np.ndarray, J: np.ndarray, sigma: np.ndarray, Vt: np.ndarray, free: np.ndarray,
                          gamma_m: float, gamma: float, margin: float,
                          regular: float) -> bool:  # pragma: no mutate block
    """True only when it is certain that the γ schedule from this SVD of J (σ, Vᵀ: the Configuration's, as
    ``ForwardDynamics.gamma_at`` reads them) is at its lowest value — σ_N ≤ s = min(√(h_min/γ)/ρ, σ_reg/2), where every
    γ_k is γ₀ at most and γ_N is γ₀ (:func:`scheduled_gamma`) — without the light links' Jacobians A: h_k = ‖A v_k‖² ≥
    λ_min(H_l') ‖v_k'‖², v_k' the entries of v_k on the joints that move a light link (``free``; the others' columns of
    A are zero) and H_l' = AᵀA on them, which is γ_M (H − JᵀJ) there (H = JᵀJ + AᵀA/γ_M, seed 004 eq. 13: ``M``, CRBA's
    upper triangle at γ_M). λ_min(H_l') above what h_min needs by a Cholesky test of (H − JᵀJ)' less that over γ_M, with
    room for CRBA's and this rounding (≥ 1e-12 of H's size, against the ~1e-16 of double precision) and for that of the
    h_k the SVD path would sum. False: not certain."""
    k = sigma.shape[0]
    p = free.shape[0]
    if p == 0 or k < 1 or not (gamma_m > 0.0 and gamma > 0.0):
        return False
    sn = sigma[k - 1]
    if not (sn >= 0.0 and sn < regular / 2 * (1.0 - 1e-9)):  # (s ≤ σ_reg/2 in any case; NaN: not certain)
        return False
    # the smallest ‖v_k'‖² over the rows of Vᵀ
    wmin = math.inf
    for r in range(k):
        w = 0.0
        for c in range(p):
            x = Vt[r, free[c]]
            w += x * x
        if w < wmin:
            wmin = w
    return _start_certain(M, J, sn, wmin, free, gamma_m, gamma, margin)


def _start_certain(M: np.ndarray, J: np.ndarray, sn: float, wmin: float, free: np.ndarray, gamma_m: float,
                   gamma: float, margin: float) -> bool:  # pragma: no mutate block
    """:func:`_at_band_start_kernel`'s test from σ_N (or a bound above it) and the smallest ‖v_k'‖² (or a bound
    below it): λ_min of (H − JᵀJ) on the free joints above what h_min ≥ (σ_N ρ)² γ needs."""
    p = free.shape[0]
    if not wmin > 1e-6:
        return False
    # D = (H − JᵀJ) on the free joints, its size, and tr(H_l) = ‖A‖_F²
    D = np.empty((p, p))
    size, trl = 0.0, 0.0
    for a in range(p):
        i = free[a]
        for b in range(a + 1):
            j = free[b]
            g = 0.0
            for r in range(J.shape[0]):
                g += J[r, i] * J[r, j]
            h = M[j, i] if j <= i else M[i, j]  # CRBA fills the upper triangle
            D[a, b] = h - g
            D[b, a] = h - g
            size += abs(h) + abs(g)
        trl += D[a, a]
    err = 1e-12 * size + 1e-300
    af = math.sqrt(max(trl, 0.0) * gamma_m) * (1.0 + 1e-6) + math.sqrt(err * gamma_m)  # ≥ ‖A‖_F
    # s ≥ σ_N needs h_min ≥ (σ_N ρ)² γ (with room for the rounding of s), and the SVD path's h_k are sums of
    # A V's squares, each entry within ~n ε ‖A‖ of A v_k's: √h_k ≥ that + 1e-12 ‖A‖_F
    root = sn * margin * (1.0 + 1e-9) * math.sqrt(gamma) + 1e-12 * af
    t = root * root * (1.0 + 1e-9) / wmin  # λ_min(H_l') must exceed this
    shift = t / gamma_m + err * (p + 1)
    # Cholesky of D − shift·I: positive definite ⇔ λ_min(D) > shift
    return _cholesky_shifted(D, p, shift, np.zeros((p, p)))


#: the room of one SVD of J (svd_jacobi's rotations or LAPACK's, both backward stable): its singular values and
#: vectors are those of a matrix within this · ‖J‖_F of J (orders of magnitude above their ~1e-15)
SVD_ROOM = 1e-11


def _cluster_bound(val: np.ndarray, eps: float, zero: bool, factor: float, Vt0: np.ndarray,
                   isfree: np.ndarray) -> float:  # pragma: no mutate block
    """min over the new singular vectors v of ‖v'‖², bounded below (:func:`_near_band_start_kernel`): ``val`` the
    old values (descending) whose perturbation is at most ``eps``, clusters of consecutive values within 4 eps at δ_C
    from the others (and from 0 where ``zero``), sin θ ≤ ``factor`` · eps / (δ_C − eps); −1: no bound."""
    k, n = val.shape[0], Vt0.shape[1]
    wmin = math.inf
    a = 0
    while a < k:  # the clusters (descending values): consecutive values within 4 eps
        b = a
        while b + 1 < k and val[b] - val[b + 1] <= 4.0 * eps:
            b += 1
        delta = math.inf  # δ_C: from the cluster to the other values
        if a > 0:
            delta = min(delta, val[a - 1] - val[a])
        if b + 1 < k:
            delta = min(delta, val[b] - val[b + 1])
        if zero:
            delta = min(delta, val[b])
        if not delta > 3.0 * eps:
            return -1.0
        sin = 0.0 if delta == math.inf else factor * eps / (delta - eps) * (1.0 + 1e-9)
        cos = math.sqrt(max(1.0 - sin * sin, 0.0))
        wz = 0.0  # Σ over C and the joints that move no light link of v_i[z]²
        for i in range(a, b + 1):
            for j in range(n):
                if not isfree[j]:
                    wz += Vt0[i, j] * Vt0[i, j]
        wc = (1.0 - wz) * (1.0 - 1e-9) - 1e-12  # (the computed vectors' norms and orthogonality: within ~1e-14)
        if not wc > 0.0:
            return -1.0
        root = math.sqrt(wc) * cos - sin
        if not root > 0.0:
            return -1.0
        if root * root < wmin:
            wmin = root * root
        a = b + 1
    return wmin


def _near_band_start_kernel(M: np.ndarray, J: np.ndarray, J0: np.ndarray, sigma0: np.ndarray, Vt0: np.ndarray,
                            free: np.ndarray, gamma_m: float, gamma: float, margin: float,
                            regular: float) -> float:  # pragma: no mutate block
    """≥ 0 only when it is certain that the γ schedule from J's SVD (whatever vectors the SVD takes in a cluster of
    nearly equal singular values) is at its lowest value, without that SVD: from the SVD (``sigma0``, ``Vt0``) of an
    earlier J0 and the distance e = ‖J − J0‖_F + SVD_ROOM (‖J‖_F + ‖J0‖_F) between the matrices both SVDs are exact
    for — as :func:`_at_band_start_kernel`, with σ_N ≤ σ0_N + e (Weyl) and each ‖v_k'‖² bounded below. The right
    singular vectors are the eigenvectors of G = JᵀJ, which moves by at most e_G = e (2‖J0‖_F + e); G0's eigenvalues
    σ0² within 4 e_G of each other form a cluster C, at δ_C from G0's others (0 among them where J is wide: its null
    space); the new vectors of C lie within sin θ ≤ e_G / (δ_C − e_G) of the old ones' span (Weyl, then the
    Davis–Kahan sin θ theorem: G. W. Stewart & J.-G. Sun, "Matrix Perturbation Theory", V.3) — or, on clusters of
    σ0 within 4e at δ_C from the others and from 0, sin θ ≤ √2 e / (δ_C − e) (Wedin's theorem, V.4), whichever bound
    is better — whose unit vectors u have ‖u'‖² ≥ w_C = 1 − Σ_{i∈C, z moving no light link} v_i[z]² (the trace bound
    of V_Cᵀ P_Z V_C), so a new vector has ‖v'‖ ≥ √w_C cos θ − sin θ. −1: not certain (the caller takes the SVD).
    Where certain, the value is a bound above tr(G)·tr(G⁻¹) ≥ κ(J)² of J's smaller Gram matrix G, ‖J‖²_F k / (σ0_N − e)²
    (∞ where σ0_N ≤ e): what tells whether another user of J's SVD (the path speed limit's J⁺) may need it."""
    m, n = J.shape
    k = sigma0.shape[0]
    p = free.shape[0]
    if p == 0 or k < 1 or J0.shape[0] != m or J0.shape[1] != n or Vt0.shape[0] != k or Vt0.shape[1] != n \
            or not (gamma_m > 0.0 and gamma > 0.0):
        return -1.0
    d2, f2, f02 = 0.0, 0.0, 0.0
    for i in range(m):
        for j in range(n):
            a, b = J[i, j], J0[i, j]
            d2 += (a - b) * (a - b)
            f2 += a * a
            f02 += b * b
    f0 = math.sqrt(f02)
    e = (math.sqrt(d2) + SVD_ROOM * (math.sqrt(f2) + f0)) * (1.0 + 1e-9)
    eg = e * (2.0 * f0 + e) * (1.0 + 1e-9)
    if not eg < math.inf:  # (NaN too)
        return -1.0
    sn = (sigma0[k - 1] + e) * (1.0 + 1e-9)
    if not (sigma0[k - 1] >= 0.0 and sn < regular / 2 * (1.0 - 1e-9)):
        return -1.0
    isfree = np.zeros(n, dtype=np.bool_)
    for c in range(p):
        isfree[free[c]] = True
    lam = np.empty(k)
    for i in range(k):
        lam[i] = sigma0[i] * sigma0[i]
    # the better of the two bounds (each on its own clusters): Davis–Kahan on G (no condition at 0 where J is square:
    # a σ_N near 0 keeps its vector) and Wedin's on J (its gap to 0 is σ, not σ²: a wide J's null space)
    wmin = max(_cluster_bound(lam, eg, n > k, 1.0, Vt0, isfree), _cluster_bound(sigma0, e, True, math.sqrt(2.0), Vt0,
                                                                                 isfree))
    if not wmin > 0.0:
        return -1.0
    if not _start_certain(M, J, sn, wmin * (1.0 - 1e-9), free, gamma_m, gamma, margin):
        return -1.0
    lo = sigma0[k - 1] - e
    return f2 * k / (lo * lo) * (1.0 + 1e-9) if lo > 0.0 else math.inf


try:  # compiled at import (cached on disk), never in the loop thread; without numba the mapping's plain forms
    import numba
    from numba import types as _t

    _start_certain = numba.njit(cache=True, boundscheck=True)(_start_certain)
    _cluster_bound = numba.njit(cache=True, boundscheck=True)(_cluster_bound)
    near_band_start = numba.njit(
        _t.float64(_t.Array(_t.float64, 2, "A"), _t.Array(_t.float64, 2, "A"), _t.Array(_t.float64, 2, "A"),
                   _t.Array(_t.float64, 1, "A"), _t.Array(_t.float64, 2, "A"), _t.Array(_t.int64, 1, "C"),
                   _t.float64, _t.float64, _t.float64, _t.float64), cache=True,
        boundscheck=True)(_near_band_start_kernel)
    at_band_start = numba.njit(
        _t.boolean(_t.Array(_t.float64, 2, "A"), _t.Array(_t.float64, 2, "A"), _t.Array(_t.float64, 1, "A"),
                   _t.Array(_t.float64, 2, "A"), _t.Array(_t.int64, 1, "C"), _t.float64, _t.float64, _t.float64,
                   _t.float64), cache=True, boundscheck=True)(_at_band_start_kernel)
    scheduled_gamma_compiled = numba.njit(
        _t.float64(_t.Array(_t.float64, 2, "C"), _t.Array(_t.float64, 1, "A"), _t.float64, _t.float64, _t.float64,
                   _t.float64), cache=True, boundscheck=True)(_scheduled_gamma_kernel)
except ImportError:  # pragma: no cover - the fast extra is installed with the tests
    scheduled_gamma_compiled = at_band_start = near_band_start = None


def _supports(model: pin.Model, k: int, j: int) -> bool:
    """The joint of velocity index k is on the path from the root to joint j (it moves joint j's body)."""
    return any(model.joints[i].idx_v <= k < model.joints[i].idx_v + model.joints[i].nv for i in model.supports[j])


class VirtualModel:
    """Virtual forward-dynamics model of `robot` with end-effector mass dominance γ.

    ``gravity`` keeps g = 9.81 m/s² along −z of the world in the virtual model and
    ``coriolis`` keeps the velocity-product terms C(q, q̇) — both dropped by default, as in
    eq. 10 (section 5 discusses keeping them).
    """

    def __init__(self, robot: RobotModel, gamma: float = GAMMA.default, *, m_e: float = 1.0,
                 ip_e: float = 1.0, gravity: bool = False, coriolis: bool = False) -> None:
        self.robot = robot
        self.gamma = check_gamma(gamma)
        self._m_e, self._ip_e = m_e, ip_e
        self.gravity, self.coriolis = gravity, coriolis
        model = robot.model.copy()
        tip = model.frames[robot.tip_id]
        last = tip.parentJoint
        for j in range(1, model.njoints):
            if j == last:  # tip body: m_e at the tip origin, expressed in the last joint frame
                model.inertias[j] = pin.Inertia(m_e, tip.placement.translation, ip_e * np.eye(3))
            else:  # light link: m_l at its joint origin
                model.inertias[j] = pin.Inertia(m_e / self.gamma, np.zeros(3),
                                                ip_e / self.gamma * np.eye(3))
        # the virtual model is the γ masses only: no armature, rotor inertia, damping, friction
        for name in ("armature", "rotorInertia", "damping", "friction"):
            if hasattr(model, name):
                setattr(model, name, np.zeros(model.nv))
        model.gravity = pin.Motion.Zero() if not gravity else pin.Motion(
            np.array([0.0, 0.0, -9.81]), np.zeros(3))
        self.model, self.data = model, model.createData()
        self.tip_id, self.tip_joint = robot.tip_id, last
        self._zero = np.zeros(model.nv)
        self._fext = [pin.Force.Zero() for _ in range(model.njoints)]
        self._rot = np.zeros((3, 3))  # set_gamma's rotational inertia (its diagonal rewritten, the rest stays 0)
        #: set_gamma's light-link inertia, its mass and rotational inertia set in place (its lever stays 0): a fifth of
        #: a new pin.Inertia's cost
        self._light = pin.Inertia(1.0, np.zeros(3), np.eye(3))
        self._light_joints = [j for j in range(1, model.njoints) if j != last]
        #: the γ schedule's A, refilled each time (:meth:`link_jacobians` with ``shared``): one 6-row view per light
        #: link, so a link's Jacobian is one copy into its rows
        self._A = np.empty((6 * len(self._light_joints), model.nv))
        self._A_rows = [(self._A[6 * i:6 * i + 6], j) for i, j in enumerate(self._light_joints)]
        #: the joints (velocity indices) that move a light link: A's other columns are zero at every q (a joint
        #: outside every light link's support, as the last joint carrying only the tip)
        self.link_joints = np.array(sorted({k for j in self._light_joints for k in range(model.nv)
                                            if _supports(model, k, j)}),
                                    dtype=np.int64)

    @property
    def dof(self) -> int:
        return self.model.nv

    def set_gamma(self, gamma: float) -> None:
        """Change γ in place: the light links' mass and inertia become m_e/γ and ip_e/γ (eq. 13).

        The joint velocities are the state carried across cycles, not the momentum H q̇: changing γ
        changes H and so the next q̈, never q̇ itself (no jump in the joint velocity reference)."""
        if gamma == self.gamma:
            return
        # check_gamma's answer for a float within GAMMA's bounds is that float (the schedule's γ, every cycle it
        # moves), without its calls
        self.gamma = gamma if type(gamma) is float and _GAMMA_LO <= gamma <= _GAMMA_HI else check_gamma(gamma)
        # the same values as ip_e/γ · I₃ (d·1.0 = d, d·0.0 = +0.0): its diagonal set in a matrix of zeros made once
        d, rot, light = self._ip_e / self.gamma, self._rot, self._light
        rot[0, 0] = rot[1, 1] = rot[2, 2] = d
        light.mass = self._m_e / self.gamma  # pin.Inertia(m_e/γ, 0, rot)'s values
        light.inertia = rot
        inertias = self.model.inertias
        for j in self._light_joints:
            inertias[j] = light

    def link_inertia(self, q: np.ndarray, directions: np.ndarray, data: pin.Data | None = None) -> np.ndarray:
        """h_k = v_kᵀ H_l v_k = ‖A v_k‖² for the columns v_k of `directions` (N×k): the light links'
        inertia at unit link mass along each joint-space direction (independent of γ). `data`: pinocchio
        data of this model whose joint Jacobians are at q already (a Configuration's, after its CRBA)."""
        AV = self.link_jacobians(q, data) @ directions
        return (AV * AV).sum(axis=0)

    # ------------------------------------------------------------------ matrices
    def inertia(self, q: np.ndarray) -> np.ndarray:
        """Joint-space inertia H(q) by the composite rigid body algorithm (symmetric, N×N)."""
        q = self.robot.check_q(q)
        H = pin.crba(self.model, self.data, q, pin.Convention.WORLD)
        return symmetric_upper(H)

    def jacobian(self, q: np.ndarray) -> np.ndarray:
        """J(q) of the tip, rows [v; ω] in the base frame (same kinematics as the robot)."""
        return self.robot.jacobian(q)

    def _crba_and_jacobian(self, q: np.ndarray) -> np.ndarray:
        """Run CRBA (WORLD convention also fills data.J) and return the base-frame J."""
        pin.crba(self.model, self.data, q, pin.Convention.WORLD)
        J = pin.getFrameJacobian(self.model, self.data, self.tip_id, pin.LOCAL_WORLD_ALIGNED)
        return self.robot._to_base(J)

    def joint_space(self, q: np.ndarray, algorithm: Algorithm = "cholesky") -> np.ndarray:
        """Seed eq. 10 as a matrix: H⁻¹(q) Jᵀ (N×6).

        ``cholesky``: H by CRBA, H⁻¹ from its Cholesky factor. ``aba``: H⁻¹ by the
        articulated-body recursion (pinocchio's computeMinverse). ``qr``: the square-root form
        R⁻¹ Qᵀ [I; 0] from the QR of [J; γ^(-1/2) A] — never forms H (see ``_qr``).
        """
        q = self.robot.check_q(q)
        if algorithm == "cholesky":
            J = self._crba_and_jacobian(q)
            pin.cholesky.decompose(self.model, self.data)
            Minv = pin.cholesky.computeMinv(self.model, self.data)
        elif algorithm == "aba":
            J = self.robot.jacobian(q)
            Minv = pin.computeMinverse(self.model, self.data, q)
            Minv = symmetric_upper(Minv)
        elif algorithm == "qr":
            Q, R, J = self._qr(q)
            return scipy.linalg.solve_triangular(R, Q[:6].T)  # x = R⁻¹ Qᵀ [I₆; 0]
        else:
            raise ModelError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")
        return Minv @ J.T

    # ------------------------------------------------------------------ dynamics
    def acceleration(self, q: np.ndarray, wrench: np.ndarray, qd: np.ndarray | None = None,
                     tau: np.ndarray | None = None, algorithm: Algorithm = "cholesky") -> np.ndarray:
        """Seed eq. 9 solved for q̈: H q̈ = τ + Jᵀ f − C(q, q̇) − G(q).

        With the defaults (no gravity, no Coriolis, τ = 0) this is eq. 10, q̈ = H⁻¹ Jᵀ f.
        `wrench` is f = [F; τ] (N, N·m) applied at the tip origin, expressed in the base
        frame; `tau` is an extra joint-space load (e.g. virtual damping −D q̇).
        """
        q = self.robot.check_q(q)
        f = np.asarray(wrench, dtype=float)
        if f.shape != (6,):
            raise ModelError(f"wrench must have 6 entries [fx, fy, fz, tx, ty, tz], got {f.shape}")
        v = self._zero if (qd is None or not self.coriolis) else np.asarray(qd, dtype=float)
        t = self._zero if tau is None else np.asarray(tau, dtype=float)
        if algorithm == "cholesky":
            J = self._crba_and_jacobian(q)
            rhs = t + J.T @ f
            if self.gravity or v is not self._zero:
                rhs = rhs - pin.rnea(self.model, self.data, q, v, self._zero)
            pin.cholesky.decompose(self.model, self.data)
            return pin.cholesky.solve(self.model, self.data, rhs)
        if algorithm == "aba":
            return self._aba(q, v, t, f)
        if algorithm == "qr":
            Q, R, _ = self._qr(q)
            x = scipy.linalg.solve_triangular(R, Q[:6].T @ f)
            extra = t if (not self.gravity and v is self._zero) else (
                t - pin.rnea(self.model, self.data, q, v, self._zero))
            if np.any(extra):  # semi-normal equations for joint-space loads: R⁻¹ R⁻ᵀ τ
                x = x + scipy.linalg.solve_triangular(
                    R, scipy.linalg.solve_triangular(R, extra, trans="T"))
            return x
        raise ModelError(f"unknown algorithm {algorithm!r}; expected one of {ALGORITHMS}")

    def link_jacobians(self, q: np.ndarray, data: pin.Data | None = None, shared: bool = False) -> np.ndarray:
        """A = [J_b1; …; J_b(N−1)]: body Jacobians of the light links at their joint origins,
        so that H_l = AᵀA and H = JᵀJ + AᵀA/γ (6(N−1)×N). `data`: pinocchio data of this model whose joint
        Jacobians are at q already — CRBA with the WORLD convention fills them as computeJointJacobians
        does, the same bits (a Configuration's; tests/test_straight.py) — else they are computed here.
        ``shared``: into this model's one buffer (the same values; valid until the next shared call — for a
        caller that only reads it at once, as the γ schedule does), else a new array."""
        if data is None:
            data = self.data
            pin.computeJointJacobians(self.model, data, q)
        model, local, get = self.model, pin.LOCAL, pin.getJointJacobian
        if shared:
            for rows, j in self._A_rows:  # np.vstack's rows, without its wrapper nor a new array
                rows[...] = get(model, data, j, local)
            return self._A
        A = np.empty(self._A.shape)
        for i, j in enumerate(self._light_joints):  # np.vstack's rows, without its wrapper
            A[6 * i:6 * i + 6] = get(model, data, j, local)
        return A

    def _qr(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Square-root form (issue 7): QR of K = [J; γ^(-1/2) A], KᵀK = H — H is never formed.

        q̈ = argmin ‖J x − f‖² + γ⁻¹‖A x‖² = R⁻¹ Qᵀ [f; 0].
        """
        A = self.link_jacobians(q)
        J = self.robot._to_base(pin.getFrameJacobian(self.model, self.data, self.tip_id,
                                                     pin.LOCAL_WORLD_ALIGNED))
        Q, R = np.linalg.qr(np.vstack((J, A / np.sqrt(self.gamma))))
        return Q, R, J

    def equation(self, q: np.ndarray, wrench: np.ndarray, qd: np.ndarray | None = None,
                 tau: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(H, b) of seed eq. 9 written as H q̈ = b, b = τ + Jᵀ f − C(q, q̇) − G(q)."""
        H, b, _ = self.equation_and_jacobian(q, wrench, qd, tau)
        return H, b

    def equation_and_jacobian(self, q: np.ndarray, wrench: np.ndarray, qd: np.ndarray | None = None,
                              tau: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`equation` and the J (base frame) it used: another b at the same q is Jᵀf + τ (no gravity,
        no Coriolis term) without a second CRBA."""
        q = self.robot.check_q(q)
        v = self._zero if (qd is None or not self.coriolis) else np.asarray(qd, dtype=float)
        J = self._crba_and_jacobian(q)
        H = symmetric_upper(self.data.M)
        b = J.T @ np.asarray(wrench, dtype=float) + (self._zero if tau is None else tau)
        if self.gravity or v is not self._zero:
            b = b - pin.rnea(self.model, self.data, q, v, self._zero)
        return H, b, J

    def _aba(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray, f: np.ndarray) -> np.ndarray:
        """ABA with f as an external force on the tip body (pinocchio wants it in joint frame)."""
        pin.forwardKinematics(self.model, self.data, q)
        pin.updateFramePlacement(self.model, self.data, self.tip_id)
        R = self.robot._R_base
        F, T = R @ f[:3], R @ f[3:]  # base → world orientation
        p = self.data.oMf[self.tip_id].translation
        f_world = pin.Force(F, T + cross(p, F))  # moment about the world origin
        self._fext[self.tip_joint] = self.data.oMi[self.tip_joint].actInv(f_world)
        return pin.aba(self.model, self.data, q, v, tau, self._fext)

    def acceleration_fext(self, q: np.ndarray, forces: list[tuple[int, np.ndarray, np.ndarray]],
                          qd: np.ndarray | None = None, tau: np.ndarray | None = None) -> np.ndarray:
        """Seed 004 §5.1: ABA with external forces on single links, q̈ = aba(q, q̇, τ, fext).

        `forces` holds (frame id, p, F): a force F (N) applied at point p (m) of the frame's
        parent body, both in the base frame (e.g. ``LinkLoads.spatial_forces``).
        """
        q = self.robot.check_q(q)
        v = self._zero if (qd is None or not self.coriolis) else np.asarray(qd, dtype=float)
        t = self._zero if tau is None else np.asarray(tau, dtype=float)
        pin.forwardKinematics(self.model, self.data, q)
        fext = [pin.Force.Zero() for _ in range(self.model.njoints)]
        oMb, R = self.robot._oMb, self.robot._R_base
        for fid, p, F in forces:
            j = self.model.frames[fid].parentJoint
            Fw = R @ np.asarray(F, dtype=float)
            f_world = pin.Force(Fw, cross(oMb.act(np.asarray(p, dtype=float)), Fw))  # about the world origin
            fext[j] = fext[j] + self.data.oMi[j].actInv(f_world)
        return pin.aba(self.model, self.data, q, v, t, fext)
