"""Shared plumbing: output folders, JSON, markdown tables, matplotlib without a display."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from fdcontrol.model.robot import RobotModel


@dataclass
class Context:
    robot: RobotModel
    out: Path
    seed: int
    quick: bool
    samples: int | None = None
    progress: bool = True

    def n(self, full: int, quick: int) -> int:
        """Sample count: --samples if given, else the paper's (full) or the quick one."""
        if self.samples is not None:
            return self.samples
        return quick if self.quick else full

    def rng(self, salt: int = 0) -> np.random.Generator:
        return np.random.default_rng([self.seed, salt])

    def folder(self, name: str) -> Path:
        d = self.out / name
        d.mkdir(parents=True, exist_ok=True)
        return d


def _clean(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return _clean(x.tolist())
    if isinstance(x, np.floating | float):
        f = float(x)
        return f if np.isfinite(f) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def write_results(folder: Path, results: dict[str, Any], summary: str) -> None:
    (folder / "results.json").write_text(json.dumps(_clean(results), indent=1))
    (folder / "summary.md").write_text(summary)


def table(header: list[str], rows: list[list[Any]]) -> str:
    def fmt(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float | np.floating) else str(v)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def save(fig: plt.Figure, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
