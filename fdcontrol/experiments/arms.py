"""The arms of the physics experiments: the shipped URDFs and third-party ones.

``ur10`` and ``panda`` are the shipped descriptions. ``xarm7`` is UFACTORY's 7-DoF xArm from
the ``example-robot-data`` package (PyPI; optional extra ``experiments``): its URDF is read
from the package, stripped of visual and collision geometry (MuJoCo would look for the
meshes; the dynamics need only the inertials) and written to a cache folder, so that
pinocchio (the controller's model) and MuJoCo (the simulated arm) compile the same file.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fdcontrol.model.robot import HOME, ModelError, RobotModel

#: third-party arms: package-relative URDF path, base link, tip link, a home pose (rad)
EXTERNAL: dict[str, tuple[str, str, str, tuple[float, ...]]] = {
    "xarm7": ("robots/xarm_description/urdf/xarm7.urdf", "link_base", "link7",
              (0.0, 0.3, 0.0, 1.2, 0.0, 0.9, 0.0)),
    # Unitree Z1 (6-DoF); no default of fdcontrol was tuned on it
    "z1": ("robots/z1_description/urdf/z1.urdf", "link00", "link06", (0.0, 1.0, -1.2, 0.2, 0.0, 0.0)),
    # Kinova Jaco2 6-DoF (j2s6s200): joints 1, 4 and 6 are continuous
    "kinova": ("robots/kinova_description/robots/kinova.urdf", "j2s6s200_link_base", "j2s6s200_end_effector",
               (0.0, 2.9, 1.3, -2.07, 1.4, 0.0)),
}
ARMS: tuple[str, ...] = ("ur10", "panda", "xarm7")


@dataclass(frozen=True)
class Arm:
    """A robot model, the URDF both pinocchio and MuJoCo load, and a home pose."""

    name: str
    robot: RobotModel
    urdf: str | None  # None: the shipped URDF (MujocoRobot finds it)
    home: np.ndarray


def example_robot_data_dir() -> Path:
    """The ``share/example-robot-data`` folder installed by the PyPI package ``example-robot-data``."""
    import importlib.metadata as md

    try:
        dist = md.distribution("example-robot-data")
    except md.PackageNotFoundError as exc:
        raise ModelError("the xarm7 arm needs the package example-robot-data "
                         "(pip install 'fdcontrol[experiments]')") from exc
    key = "share/example-robot-data/robots/"
    for f in dist.files or []:
        i = str(f).replace("\\", "/").find(key)
        if i >= 0:
            return Path(str(dist.locate_file(str(f)[:i + len(key) - len("/robots/")])))
    raise ModelError("example-robot-data is installed but its share/example-robot-data folder is missing")


def stripped_urdf(src: Path, name: str) -> Path:
    """`src` without <visual> and <collision> elements, cached under the temp folder."""
    txt = re.sub(r"<visual\b.*?</visual>|<collision\b.*?</collision>", "", src.read_text(), flags=re.S)
    out = Path(tempfile.gettempdir()) / "fdcontrol-arms" / f"{name}.urdf"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.is_file() or out.read_text() != txt:
        out.write_text(txt)
    return out


def load_arm(name: str) -> Arm:
    """One of :data:`ARMS`."""
    if name in HOME:
        return Arm(name, RobotModel.load(name), None, np.array(HOME[name], dtype=float))
    if name not in EXTERNAL:
        raise ModelError(f"unknown arm {name!r}; expected one of {', '.join(ARMS)}")
    rel, base, tip, home = EXTERNAL[name]
    path = stripped_urdf(example_robot_data_dir() / rel, name)
    return Arm(name, RobotModel.from_urdf(path, base, tip, name), str(path), np.array(home))
