"""The mapping base, its registry, and the SVD analysis of seed 004 Fig. 5.

Every mapping has the same small interface:

* ``joint_space(q)`` — M(q), N×6, type (a) of Fig. 5: joint quantity = M · Cartesian quantity;
* ``cartesian(q)`` — J(q) M(q), 6×6, type (b): how a Cartesian input reappears in Cartesian
  space (the identity is ideal decoupling).

A mapping is one class in one file of this package, registered with
``@MAPPINGS.register("name")``; its parameters are declared once in ``PARAMS``
(:mod:`fdcontrol.params`: the keywords of its ``__init__``, which ``make_mapping`` checks), and
``solver`` names the solver family that drives it in the loop (``fdcontrol.loop.solvers.SOLVERS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from fdcontrol.model.configuration import Configuration
from fdcontrol.model.robot import ModelError, RobotModel
from fdcontrol.params import Param, ParamError, unknown_names
from fdcontrol.registry import Registry, UnknownName


class MappingProtocol(Protocol):
    name: str
    robot: RobotModel

    def joint_space(self, q: np.ndarray) -> np.ndarray: ...

    def cartesian(self, q: np.ndarray) -> np.ndarray: ...


class Mapping:
    """Base class: M from the Jacobian (``from_jacobian``), at a q (``joint_space``) or from the
    cycle's :class:`~fdcontrol.model.configuration.Configuration` (``joint_space_at``: its J, and
    its H for FD — no second kinematics pass); ``cartesian`` is J · joint_space."""

    name = "mapping"
    #: solver family in ``fdcontrol.loop.solvers.SOLVERS``: "velocity", "transpose" or "forward_dynamics"
    solver = "velocity"
    #: ``solve(q, e)`` / ``solve_at(conf, e)`` give the joint step for a Cartesian displacement e
    #: (SDLS: Buss & Kim's nonlinear step), which the velocity solver then uses instead of M·e
    solves_displacement: bool = False

    def __init__(self, robot: RobotModel) -> None:
        self.robot = robot

    def from_jacobian(self, J: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        """M (N×6) from the tip Jacobian J (6×N, base frame)."""
        raise NotImplementedError

    def joint_space(self, q: np.ndarray) -> np.ndarray:
        """Type (a) of Fig. 5: M(q), N×6."""
        return self.from_jacobian(self.robot.jacobian(q))

    def joint_space_at(self, conf: Configuration) -> np.ndarray:
        """M at the configuration's q, from its Jacobian (and H where the mapping needs it); a
        mapping that only defines ``joint_space(q)`` is evaluated at the configuration's q."""
        if type(self).from_jacobian is Mapping.from_jacobian:
            return self.joint_space(conf.q)
        return self.from_jacobian(conf.jacobian)

    def solve(self, q: np.ndarray, error: np.ndarray) -> np.ndarray:
        """The joint step for a Cartesian displacement (``solves_displacement`` mappings)."""
        return self.joint_space(q) @ error

    def solve_at(self, conf: Configuration, error: np.ndarray) -> np.ndarray:
        """:meth:`solve` from the cycle's Configuration."""
        return self.joint_space_at(conf) @ error

    def cartesian(self, q: np.ndarray) -> np.ndarray:
        """Type (b) of Fig. 5: J(q) M(q), 6×6."""
        return self.robot.jacobian(q) @ self.joint_space(q)

    def params(self) -> dict[str, float | str]:
        return {}

    def __repr__(self) -> str:
        p = ", ".join(f"{k}={v}" for k, v in self.params().items())
        return f"{type(self).__name__}({p})"


MAPPINGS: Registry[Mapping] = Registry("mapping")


def check_positive(name: str, value: float) -> float:
    v = float(value)
    if not math.isfinite(v) or v <= 0.0:
        raise ModelError(f"{name} must be finite and > 0, got {value!r}")
    return v


def mapping_params(name: str) -> tuple[Param, ...]:
    """The parameters the mapping registered as `name` declares (``PARAMS``; none for J⁻¹ and Jᵀ)."""
    try:
        return tuple(getattr(MAPPINGS.get(name), "PARAMS", ()))
    except UnknownName as exc:
        raise ModelError(str(exc)) from exc


def check_param(p: Param, value: Any) -> Any:
    """`value` checked against its declaration, as the mapping's ModelError."""
    try:
        return p.check(value)
    except ParamError as exc:
        raise ModelError(str(exc)) from None


def make_mapping(name: str, robot: RobotModel, **params: Any) -> Mapping:
    """Build the mapping registered as `name` with its declared parameters (by setting name, e.g.
    ``sdls_length``, or constructor keyword, e.g. ``length``). A name the mapping does not declare
    raises, listing the valid ones: ``make_mapping("fd", robot, gama=5)`` is an error, not γ = 1000."""
    declared = mapping_params(name)
    by_name = {p.name: p for p in declared} | {p.keyword: p for p in declared}
    if set(params) - by_name.keys():
        raise ModelError(str(unknown_names(params, [p.name for p in declared], f"parameter of mapping {name!r}:")))
    try:
        kwargs = {by_name[k].keyword: by_name[k].check(v) for k, v in params.items()}
    except ParamError as exc:
        raise ModelError(str(exc)) from None
    return MAPPINGS.get(name)(robot, **kwargs)


def settings_kwargs(name: str, values: Any) -> dict[str, Any]:
    """The declared parameters of mapping `name` read from `values` (settings or a request: any object
    or mapping holding the setting names), for :func:`make_mapping`."""
    get = values.get if isinstance(values, dict) else lambda k: getattr(values, k)
    return {p.name: get(p.name) for p in mapping_params(name)}


@dataclass(frozen=True)
class Analysis:
    """SVD summary of a mapping matrix (seed eq. 1, M = U Σ Vᵀ)."""

    singular_values: np.ndarray
    sigma_min: float
    sigma_max: float
    condition: float  # κ = σmax/σmin, inf when numerically singular
    manipulability: float  # Π σ_i = √det(M Mᵀ) for a wide M (Yoshikawa for M = J)

    @property
    def singular(self) -> bool:
        return math.isinf(self.condition)

    def as_dict(self) -> dict[str, object]:
        """JSON-safe: κ = inf becomes None with ``singular: true``."""
        return {
            "singular_values": self.singular_values.tolist(),
            "sigma_min": self.sigma_min,
            "sigma_max": self.sigma_max,
            "condition": None if self.singular else self.condition,
            "singular": self.singular,
            "manipulability": self.manipulability,
        }


def analyze(matrix: np.ndarray) -> Analysis:
    """Singular values (descending), σmin, σmax, κ and manipulability of `matrix`.

    κ is infinite when σmin ≤ σmax · max(m, n) · ε (numpy's rank tolerance).
    """
    M = np.asarray(matrix, dtype=float)
    if M.ndim != 2 or not np.all(np.isfinite(M)):
        raise ModelError("analyze needs a finite 2-D matrix")
    s = np.linalg.svd(M, compute_uv=False)
    smax, smin = float(s[0]), float(s[-1])
    tol = smax * max(M.shape) * np.finfo(float).eps
    kappa = math.inf if smin <= tol else smax / smin
    return Analysis(s, smin, smax, kappa, float(np.prod(s)))
