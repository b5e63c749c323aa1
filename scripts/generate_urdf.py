"""Write the shipped URDFs in ``urdf/`` from published kinematic tables.

Run ``python scripts/generate_urdf.py`` after editing a table; the output is committed.

* UR10 (CB3): Universal Robots' published standard DH parameters, joint limits and link
  masses / centres of mass ("DH parameters for calculations of kinematics and dynamics").
  Link frames are DH frames: ``base_link`` is DH frame 0, ``tool0`` is DH frame 6.
  Link rotational inertias are not published; we use a solid-cylinder estimate.
* Franka Panda: Franka's published modified (Craig) DH table, flange at d = 0.107 m,
  joint position / velocity / effort limits. Link masses: identified values of Gaz et al.
  (RA-L 2019); inertias are an isotropic estimate.
* Franka Research 3 (FR3): the Panda's modified DH table (the same kinematics, flange at
  d = 0.107 m) with the FR3's own joint position and velocity limits from Franka's
  documentation ("Limits for Franka Research 3"). The FR3's link masses are not published
  as a table; the Panda's identified values (Gaz et al.) stand in for them.
* planar2: two revolute joints about z, l1 = 1.0 m, l2 = 0.8 m, point-like masses at the
  link ends, for closed-form tests.

Collision geometry (ur10, panda, fr3): one capsule per link from ``urdf/capsules.json``, fitted to
the vendors' collision meshes by ``scripts/fit_capsules.py`` (its docstring says which meshes).
URDF has no capsule element: each is written as a ``<cylinder>`` (the capsule's segment, along the
cylinder's z axis) marked as a capsule in ``<collision_checking>``, which pinocchio's URDF reader
turns into a capsule (``coal.Capsule``); a capsule of zero length is written as a ``<sphere>``.
The same capsule is written as ``<visual>`` elements too (a cylinder and two spheres), for viewers.
The self-collision pairs never checked go to ``<name>.srdf`` (``disable_collisions``, as MoveIt's SRDF).
"""

from __future__ import annotations

import json
from math import pi
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "urdf"


def _rpy(R: np.ndarray) -> tuple[float, float, float]:
    """URDF fixed-axis roll-pitch-yaw of R = Rz(y) Ry(p) Rx(r)."""
    p = np.arcsin(-np.clip(R[2, 0], -1.0, 1.0))
    if abs(np.cos(p)) > 1e-9:
        r = np.arctan2(R[2, 1], R[2, 2])
        y = np.arctan2(R[1, 0], R[0, 0])
    else:
        r = np.arctan2(-R[1, 2], R[1, 1])
        y = 0.0
    return float(r), float(p), float(y)


def _rotx(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _fmt(v) -> str:
    return " ".join(f"{0.0 if abs(x) < 1e-15 else x:.17g}" for x in v)


def _origin(xyz, R) -> str:
    return f'<origin xyz="{_fmt(xyz)}" rpy="{_fmt(_rpy(R))}"/>'


CAPSULES: dict = {}  # robot → {"capsules": {link: {a, b, radius}}, "disable_collisions": [...]}


def _collision(name: str) -> str:
    """The link's fitted capsule as URDF collision elements (see the module doc), and the same capsule
    as visual elements (a cylinder and a sphere at each end) for viewers; or ''."""
    cap = CAPSULES.get("capsules", {}).get(name)
    if cap is None:
        return ""
    a, b, r = np.array(cap["a"]), np.array(cap["b"]), float(cap["radius"])
    axis = b - a
    length = float(np.linalg.norm(axis))
    c = (a + b) / 2
    sphere = f'<geometry><sphere radius="{r:.6g}"/></geometry>'
    if length < 1e-9:
        at = f'<origin xyz="{_fmt(c)}" rpy="0 0 0"/>'
        return (f'    <visual>\n      {at}\n      {sphere}\n    </visual>\n'
                f'    <collision name="{name}_capsule">\n      {at}\n      {sphere}\n    </collision>\n')
    z = axis / length
    x = np.cross([0.0, 1.0, 0.0] if abs(z[1]) < 0.9 else [1.0, 0.0, 0.0], z)
    x /= np.linalg.norm(x)
    R = np.column_stack((x, np.cross(z, x), z))
    cyl = f'<geometry><cylinder radius="{r:.6g}" length="{length:.6g}"/></geometry>'
    vis = f'    <visual>\n      {_origin(c, R)}\n      {cyl}\n    </visual>\n'
    for end in (a, b):
        vis += f'    <visual>\n      <origin xyz="{_fmt(end)}" rpy="0 0 0"/>\n      {sphere}\n    </visual>\n'
    return (vis + f'    <collision name="{name}_capsule">\n      {_origin(c, R)}\n      {cyl}\n    </collision>\n'
            f'    <collision_checking><capsule name="{name}_capsule"/></collision_checking>\n')


def _link(name: str, mass: float | None = None, com=(0, 0, 0), inertia=None) -> str:
    col = _collision(name)
    if mass is None:
        return f'  <link name="{name}">\n{col}  </link>\n' if col else f'  <link name="{name}"/>\n'
    ixx, iyy, izz = inertia
    return (
        f'  <link name="{name}">\n    <inertial>\n      <origin xyz="{_fmt(com)}" rpy="0 0 0"/>\n'
        f'      <mass value="{mass:.10g}"/>\n'
        f'      <inertia ixx="{ixx:.6g}" ixy="0" ixz="0" iyy="{iyy:.6g}" iyz="0" izz="{izz:.6g}"/>\n'
        f"    </inertial>\n{col}  </link>\n"
    )


def _srdf(name: str) -> str:
    s = f'<?xml version="1.0"?>\n<robot name="{name}">\n'
    for a, b, reason in CAPSULES.get("disable_collisions", []):
        s += f'  <disable_collisions link1="{a}" link2="{b}" reason="{reason}"/>\n'
    return s + "</robot>\n"


def _joint(name, parent, child, xyz, R, lower=None, upper=None, vel=None, effort=None) -> str:
    if lower is None:
        return (
            f'  <joint name="{name}" type="fixed">\n    <parent link="{parent}"/>\n'
            f'    <child link="{child}"/>\n    {_origin(xyz, R)}\n  </joint>\n'
        )
    return (
        f'  <joint name="{name}" type="revolute">\n    <parent link="{parent}"/>\n'
        f'    <child link="{child}"/>\n    {_origin(xyz, R)}\n    <axis xyz="0 0 1"/>\n'
        f'    <limit lower="{lower:.17g}" upper="{upper:.17g}" velocity="{vel:.10g}" '
        f'effort="{effort:.10g}"/>\n  </joint>\n'
    )


def ur10() -> str:
    # standard DH: T_i = Rz(q_i) Tz(d_i) Tx(a_i) Rx(alpha_i)
    d = [0.1273, 0.0, 0.0, 0.163941, 0.1157, 0.0922]
    a = [0.0, -0.612, -0.5723, 0.0, 0.0, 0.0]
    alpha = [pi / 2, 0.0, 0.0, pi / 2, -pi / 2, 0.0]
    mass = [7.1, 12.7, 4.27, 2.0, 2.0, 0.365]
    com = [  # in DH frame i (published)
        [0.021, 0.0, 0.027], [0.38, 0.0, 0.158], [0.24, 0.0, 0.068],
        [0.0, 0.007, 0.018], [0.0, 0.007, 0.018], [0.0, 0.0, -0.026],
    ]
    names = ["shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3"]
    links = ["shoulder_link", "upper_arm_link", "forearm_link", "wrist_1_link", "wrist_2_link",
             "wrist_3_link"]
    vel = [2.0944, 2.0944, 3.1416, 3.1416, 3.1416, 3.1416]
    effort = [330.0, 330.0, 150.0, 56.0, 56.0, 56.0]
    s = '<?xml version="1.0"?>\n<robot name="ur10">\n' + _link("base_link", 4.0, (0, 0, 0.05),
                                                                  (0.0061, 0.0061, 0.0056))
    parent, xyz, R = "base_link", np.zeros(3), np.eye(3)
    for i in range(6):
        # URDF link i frame = DH frame i-1 rotated by q_i; DH frame i = it * Tz(d) Tx(a) Rx(alpha)
        off_R = _rotx(alpha[i])
        off_p = np.array([a[i], 0.0, d[i]])
        c = off_p + off_R @ np.array(com[i])
        r, length = 0.06 if i < 3 else 0.045, max(abs(a[i]), 0.12)
        ix = mass[i] * (3 * r**2 + length**2) / 12
        s += _joint(f"{names[i]}_joint", parent, links[i], xyz, R, -2 * pi, 2 * pi, vel[i],
                    effort[i])
        s += _link(links[i], mass[i], c, (ix, ix, mass[i] * r**2 / 2))
        parent, xyz, R = links[i], off_p, off_R
    s += _joint("wrist_3-tool0_fixed_joint", parent, "tool0", xyz, R) + _link("tool0")
    return s + "</robot>\n"


def panda(name: str = "panda", lower: list[float] | None = None, upper: list[float] | None = None,
          vel: list[float] | None = None) -> str:
    # modified DH: T_i = Rx(alpha_{i-1}) Tx(a_{i-1}) Rz(q_i) Tz(d_i)
    rows = [  # a_{i-1}, d_i, alpha_{i-1}
        (0.0, 0.333, 0.0), (0.0, 0.0, -pi / 2), (0.0, 0.316, pi / 2), (0.0825, 0.0, pi / 2),
        (-0.0825, 0.384, -pi / 2), (0.0, 0.0, pi / 2), (0.088, 0.0, pi / 2),
    ]
    lower = lower or [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973]
    upper = upper or [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973]
    vel = vel or [2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100]
    effort = [87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0]
    mass = [4.970684, 0.646926, 3.228604, 3.587895, 1.225946, 1.666555, 0.735522]
    com = [
        [0.003875, 0.002081, -0.04762], [-0.003141, -0.02872, 0.003495],
        [0.027518, 0.039252, -0.066502], [-0.05317, 0.104419, 0.027454],
        [-0.011953, 0.041065, -0.038437], [0.060149, -0.014117, -0.010517],
        [0.010517, -0.004252, 0.061597],
    ]
    s = f'<?xml version="1.0"?>\n<robot name="{name}">\n' + _link(f"{name}_link0", 0.629769,
                                                                   (-0.041018, -0.00014, 0.049974),
                                                                   (0.003, 0.003, 0.003))
    for i, (a, d, al) in enumerate(rows):
        R = _rotx(al)
        xyz = R @ np.array([0.0, 0.0, d]) + np.array([a, 0.0, 0.0])
        s += _joint(f"{name}_joint{i + 1}", f"{name}_link{i}", f"{name}_link{i + 1}", xyz, R,
                    lower[i], upper[i], vel[i], effort[i])
        ii = 0.4 * mass[i] * 0.06**2
        s += _link(f"{name}_link{i + 1}", mass[i], com[i], (ii, ii, ii))
    s += _joint(f"{name}_joint8", f"{name}_link7", f"{name}_link8", (0, 0, 0.107), np.eye(3))
    s += _link(f"{name}_link8")
    return s + "</robot>\n"


def fr3() -> str:
    """Franka Research 3: the Panda's kinematics, the FR3's position and velocity limits."""
    return panda("fr3", lower=[-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159],
                 upper=[2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159],
                 vel=[2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26])


def planar2() -> str:
    l1, l2, m1, m2 = 1.0, 0.8, 2.0, 1.0
    eps = 1e-6  # near-point masses, so closed-form tests can treat them as points
    s = '<?xml version="1.0"?>\n<robot name="planar2">\n' + _link("base")
    s += _joint("joint1", "base", "link1", (0, 0, 0), np.eye(3), -pi, pi, 2.0, 50.0)
    s += _link("link1", m1, (l1, 0, 0), (eps, eps, eps))
    s += _joint("joint2", "link1", "link2", (l1, 0, 0), np.eye(3), -pi, pi, 2.0, 50.0)
    s += _link("link2", m2, (l2, 0, 0), (eps, eps, eps))
    s += _joint("tip_joint", "link2", "tip", (l2, 0, 0), np.eye(3)) + _link("tip")
    return s + "</robot>\n"


if __name__ == "__main__":
    fitted = json.loads((OUT / "capsules.json").read_text()) if (OUT / "capsules.json").is_file() else {}
    for name, make in {"ur10": ur10, "panda": panda, "fr3": fr3, "planar2": planar2}.items():
        CAPSULES = fitted.get(name, {})
        (OUT / f"{name}.urdf").write_text(make())
        print("wrote", OUT / f"{name}.urdf")
        if CAPSULES:
            (OUT / f"{name}.srdf").write_text(_srdf(name))
            print("wrote", OUT / f"{name}.srdf")
