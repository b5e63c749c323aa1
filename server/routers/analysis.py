"""POST /analysis/singular-values: σ(J), κ(H) and the singular values of each mapping at q.

Robots are named, never given as paths: the loaded one or a shipped one (nothing file-system
shaped from the network). The cached models share pinocchio Data, so one request computes at
a time (``ANALYSIS_LOCK``); batches are bounded by ``settings.max_batch``.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
from fastapi import APIRouter, HTTPException, Request

from fdcontrol import ForwardDynamics, RobotModel, VirtualModel, analyze, make_mapping
from fdcontrol.mappings import settings_kwargs
from fdcontrol.model.robot import SHIPPED
from fdcontrol.server import schemas
from fdcontrol.server.errors import ERRORS
from fdcontrol.server.routers.deps import current_robot, shipped, worker

router = APIRouter(tags=["analysis"])
ANALYSIS_LOCK = threading.Lock()


@router.post("/analysis/singular-values", response_model=schemas.AnalysisResponse, responses=ERRORS)
def singular_values(req: schemas.AnalysisRequest, request: Request) -> dict[str, Any]:
    if req.robot is None or req.robot == worker(request).params["robot"]:
        robot = current_robot(request)
    elif req.robot in SHIPPED:
        robot = shipped(req.robot)
    else:  # never a server path: nothing file-system shaped from the network
        raise HTTPException(422, f"robot must be the loaded one or shipped: {', '.join(SHIPPED)}")
    qs = req.q if req.q and isinstance(req.q[0], list) else [req.q]
    max_batch = request.app.state.settings.max_batch
    if len(qs) > max_batch:
        raise HTTPException(413, f"batch of {len(qs)} configurations exceeds max_batch = {max_batch}")
    with ANALYSIS_LOCK:  # the cached models' pinocchio Data are not thread-safe
        try:
            return _analysis(robot, qs, req)
        except (RuntimeError, ArithmeticError, np.linalg.LinAlgError) as exc:  # pinocchio, overflow
            raise HTTPException(422, f"not computable at these values: {exc}") from exc


def _analysis(robot: RobotModel, qs: list, req: schemas.AnalysisRequest) -> dict[str, Any]:
    specs = [schemas.MappingSpec(name=m) if isinstance(m, str) else m for m in req.mappings]
    maps = [make_mapping(s.name, robot, **settings_kwargs(s.name, s)) for s in specs]
    fd = [m for m in maps if isinstance(m, ForwardDynamics)]
    vm = fd[0].virtual if fd else VirtualModel(robot)
    points = []
    for q in qs:
        qv = robot.check_q(np.asarray(q, dtype=float))
        results = []
        for m in maps:
            M = m.joint_space(qv) if req.type == "joint" else m.cartesian(qv)
            a = analyze(M).as_dict()
            results.append({"mapping": m.name, "params": m.params(), **_finite(a)})
        sj = np.linalg.svd(robot.jacobian(qv), compute_uv=False)
        kh = analyze(vm.inertia(qv)).condition
        points.append(_finite({"q": qv.tolist(), "manipulability_j": float(np.prod(sj)),
                               "sigma_min_j": float(sj[-1]), "kappa_h": kh if math.isfinite(kh) else None,
                               "results": results}))
    return {"robot": robot.name, "type": req.type, "points": points}


def _finite(a: dict[str, Any]) -> dict[str, Any]:
    """inf/NaN are not JSON: κ is None when singular (``analyze``); any other non-finite number
    means the inputs overflowed the computation, an error (ArithmeticError → 422)."""
    if a.get("condition") is not None and not math.isfinite(a["condition"]):
        a = {**a, "condition": None}
    numbers = [v for v in a.values() if isinstance(v, float)] + [*a.get("singular_values", ()), *a.get("q", ())]
    if not all(math.isfinite(x) for x in numbers):
        raise ArithmeticError("a result is not finite")
    return a
