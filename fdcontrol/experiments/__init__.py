"""The seed paper's experiments (sections 4.1–4.5), one module each, run by ``fdcontrol experiments``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fdcontrol.extras import missing
from fdcontrol.model.robot import RobotModel

try:
    from fdcontrol.experiments import (
        conditioning,
        decoupling,
        drift,
        integrators,
        limits,
        numerics,
        physics,
        sdls_rate,
        singular_path,
        singular_sweep,
        timing,
    )
    from fdcontrol.experiments.common import Context
except ImportError as exc:
    raise missing("experiments", "the experiments", exc) from exc

EXPERIMENTS = {
    "decoupling": decoupling.run,
    "conditioning": conditioning.run,
    "singular-path": singular_path.run,
    "singular-sweep": singular_sweep.run,
    "timing": timing.run,
    "numerics": numerics.run,  # issue 7's accuracy study (not in the paper)
    "limits": limits.run,  # issue 7: joint limits as constraints vs clamping
    "integrators": integrators.run,  # issue 7: error vs CPU time
    "sdls-rate": sdls_rate.run,  # issue 17: SDLS in the loop is rate-independent
    "physics": physics.run,  # issue 11: the mappings on the MuJoCo arm
    "drift": drift.run,  # hand guiding's sideways drift at random poses, source by source
}


def run(names: list[str], robot: RobotModel, out: Path, seed: int = 0, quick: bool = False,
        samples: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Run experiments by name (or "all"); each writes PNGs, results.json and summary.md."""
    if names == ["all"]:
        names = list(EXPERIMENTS)
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        raise ValueError(f"unknown experiment {unknown[0]!r}; expected one of all, {', '.join(EXPERIMENTS)}")
    ctx = Context(robot, Path(out), seed, quick, samples, progress)
    ctx.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in names:
        t0 = time.perf_counter()
        results[name] = EXPERIMENTS[name](ctx)
        if progress:
            print(f"{name}: {time.perf_counter() - t0:.1f} s → {ctx.out / name}")
    return results
