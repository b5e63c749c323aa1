"""Issue 7 accuracy study: q̈ = H⁻¹Jᵀf by CRBA+Cholesky, ABA and QR against an
extended-precision reference, for γ from 1 to 1e12.

Reference: with J and A (the light links' body Jacobians) from pinocchio in float64, the
exact q̈ of that model is (JᵀJ + AᵀA/γ)⁻¹ Jᵀ f; it is solved in mpmath with 50 digits.
Each float64 method computes the same model its own way (Cholesky forms H by CRBA; ABA
never forms H; QR factors [J; γ^(-1/2) A]); Cholesky is also run in float32.
Configurations: random (q ~ U[−π, π]), near-singular (wrist: q5 = 10^-k, σmin(J) from
about 1e-2 to 1e-8) and exactly singular (q = 0).

Constrained (a joint at its limit, seed 001 eq. 7): each single joint locked in turn, the
locked-joint q̈ of each algorithm (``fdcontrol.model.constraints.LockedDynamics``) against the same
reference with the locked columns dropped.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import mpmath
import numpy as np

from fdcontrol.experiments.batch import uniform_q
from fdcontrol.experiments.common import Context, save, table, write_results
from fdcontrol.model.constraints import LockedDynamics
from fdcontrol.model.virtual import VirtualModel

GAMMAS = 10.0 ** np.arange(0, 13)
METHODS = ("cholesky", "aba", "qr", "cholesky-float32")


def reference(J: np.ndarray, A: np.ndarray, gamma: float, f: np.ndarray) -> np.ndarray:
    mpmath.mp.dps = 50
    Jm, Am, fm = mpmath.matrix(J.tolist()), mpmath.matrix(A.tolist()), mpmath.matrix(f.tolist())
    H = Jm.T * Jm + (Am.T * Am) / mpmath.mpf(gamma)
    x = mpmath.lu_solve(H, Jm.T * fm)
    return np.array([float(v) for v in x])


def solve(vm: VirtualModel, q: np.ndarray, f: np.ndarray, method: str) -> np.ndarray:
    if method == "cholesky-float32":
        H = vm.inertia(q).astype(np.float32)
        b = (vm.robot.jacobian(q).T @ f).astype(np.float32)
        L = np.linalg.cholesky(H)
        return np.linalg.solve(L.T, np.linalg.solve(L, b)).astype(np.float64)
    return vm.acceleration(q, f, algorithm=method)  # type: ignore[arg-type]


def configurations(ctx: Context) -> dict[str, list[np.ndarray]]:
    robot = ctx.robot
    rnd = list(uniform_q(robot, ctx.n(20, 6), ctx.rng(71)))
    near = []
    base = np.array([0.3, -1.2, 1.6, -1.9, 0.0, 0.2, 0.0][: robot.dof])
    for k in range(2, 9):
        q = base.copy()
        q[min(4, robot.dof - 1)] = 10.0 ** -k
        near.append(q)
    return {"random": rnd, "near-singular": near, "singular": [np.zeros(robot.dof)]}


def run(ctx: Context) -> dict:
    rng = ctx.rng(72)
    configs = configurations(ctx)
    err: dict = {cls: {m: np.zeros((len(qs), len(GAMMAS))) for m in METHODS} for cls, qs in configs.items()}
    sigma: dict = {cls: [float(np.linalg.svd(ctx.robot.jacobian(q), compute_uv=False)[-1]) for q in qs]
                   for cls, qs in configs.items()}
    for g_i, gamma in enumerate(GAMMAS):
        vm = VirtualModel(ctx.robot, gamma)
        for cls, qs in configs.items():
            for i, q in enumerate(qs):
                f = rng.normal(size=6)
                A = vm.link_jacobians(q)
                J = ctx.robot.jacobian(q)
                x = reference(J, A, gamma, f)
                for m in METHODS:
                    with np.errstate(all="ignore"):
                        try:
                            y = solve(vm, q, f, m)
                            e = float(np.linalg.norm(y - x) / np.linalg.norm(x))
                        except np.linalg.LinAlgError:
                            e = np.inf
                    err[cls][m][i, g_i] = e if np.isfinite(e) else np.inf
    worst = {cls: {m: np.max(v, axis=0) for m, v in d.items()} for cls, d in err.items()}
    locked_worst = constrained(ctx, configs, rng)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4), sharey=True)
    for ax, cls in zip(axes, configs, strict=True):
        for m in METHODS:
            ax.loglog(GAMMAS, np.clip(worst[cls][m], 1e-17, 1e2), "o-", ms=3, label=m)
        ax.set_title(f"{cls} (worst of {len(configs[cls])})")
        ax.set_xlabel("γ")
        ax.axhline(1e-6, color="k", ls=":", lw=0.8)
    axes[0].set_ylabel("relative error of q̈")
    axes[0].legend()
    folder = ctx.folder("numerics")
    save(fig, folder / "numerics_error_vs_gamma.png")
    bound = {m: float(max([g for g_i, g in enumerate(GAMMAS)
                           if all(worst[c][m][g_i] < 1e-6 for c in configs)] or [0.0])) for m in METHODS}
    locked_bound = {m: float(max([g for g_i, g in enumerate(GAMMAS) if v[g_i] < 1e-6] or [0.0]))
                    for m, v in locked_worst.items()}
    res = {"gamma": GAMMAS, "sigma_min_J": sigma, "worst_error": worst, "error": err,
           "largest_gamma_with_error_below_1e-6": bound, "constrained_worst_error": locked_worst,
           "constrained_largest_gamma_with_error_below_1e-6": locked_bound}
    lrows = [[m, *[float(v[g_i]) for g_i in (3, 6, 9, 10, 12)]] for m, v in locked_worst.items()]
    rows = [[m, *[float(worst[c][m][g_i]) for c in configs for g_i in (3, 6, 9, 12)]] for m in METHODS]
    hdr = ["method"] + [f"{c} γ=1e{k}" for c in configs for k in (3, 6, 9, 12)]
    write_results(folder, res, f"""# Numerics: accuracy of q̈ vs γ — {ctx.robot.name}

Reference: mpmath (50 digits) on the same float64 kinematics (see the module docstring).
σmin(J): near-singular {", ".join(f"{s:.1e}" for s in sigma["near-singular"])}; singular {sigma["singular"][0]:.1e}.

Worst relative error:

{table(hdr, rows)}
Largest γ of the grid with every worst error < 1e-6: {bound}.

Constrained (one joint locked, each in turn; worst over all configurations):

{table(["method", "γ=1e3", "γ=1e6", "γ=1e9", "γ=1e10", "γ=1e12"], lrows)}
Largest γ of the grid with every worst constrained error < 1e-6: {locked_bound}.
""")
    return res


def constrained(ctx: Context, configs: dict[str, list[np.ndarray]], rng: np.random.Generator) -> dict:
    """Worst relative error of the locked-joint q̈ per algorithm and γ (each single joint locked)."""
    robot = ctx.robot
    qs = [q for qs in configs.values() for q in qs[:3]] + configs["near-singular"][3:]
    out = {m: np.zeros(len(GAMMAS)) for m in ("cholesky", "aba", "qr")}
    zero = np.zeros(robot.dof)
    for g_i, gamma in enumerate(GAMMAS):
        vm = VirtualModel(robot, gamma)
        solvers = {m: LockedDynamics(vm, m) for m in out}
        for q in qs:
            J, A = robot.jacobian(q), vm.link_jacobians(q)
            for j in range(robot.dof):
                locked = np.zeros(robot.dof, dtype=bool)
                locked[j] = True
                f = rng.normal(size=6)
                x = np.zeros(robot.dof)
                x[~locked] = reference(J[:, ~locked], A[:, ~locked], gamma, f)
                for m, solve in solvers.items():
                    with np.errstate(all="ignore"):
                        try:
                            e = float(np.linalg.norm(solve(q, f, zero, locked) - x) / np.linalg.norm(x))
                        except (np.linalg.LinAlgError, ValueError):
                            e = np.inf
                    out[m][g_i] = max(out[m][g_i], e if np.isfinite(e) else np.inf)
    return out
