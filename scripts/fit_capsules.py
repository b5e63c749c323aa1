"""Fit one collision capsule per link of the shipped arms to the manufacturers' collision meshes.

Run ``python scripts/fit_capsules.py`` (needs ``example-robot-data``, the test extra), then
``python scripts/generate_urdf.py``; both outputs are committed (``urdf/capsules.json``, the URDFs and SRDFs).

Sources (the collision meshes of example-robot-data 6, which ships the vendors' descriptions):

* UR10: ``ur_description/meshes/ur10/collision/*.stl`` (Universal Robots' ROS description),
* Panda: ``panda_description/meshes/collision/link0…7.stl`` (Franka's ``franka_description``),
* FR3: no FR3 meshes are published there; the Panda's meshes stand in (the same kinematics and link
  layout; the FR3's housings differ by a few millimetres, covered by the safety margins).

Each mesh is brought into the link frame of our generated URDF (the vendors' link frames differ from
our DH frames by a constant transform per link: it is found from the flange positions of both models
over random configurations and checked to be constant to 1e-9 m), and enclosed by the capsule of least
volume found by a Nelder–Mead search over its axis and centre line from the principal axis: for a
given axis line the radius is the largest distance of a vertex from the line and the segment is the
shortest that still covers every vertex, so every vertex lies inside the capsule (checked).

Self-collision pairs that are never checked (the SRDF's ``disable_collisions``): those of the vendors'
MoveIt SRDFs in example-robot-data (``panda_description/srdf/panda.srdf`` for the Panda and the FR3,
``ur_description/srdf/ur5.srdf`` for the UR10: the same links and layout as the UR5), which MoveIt's setup
assistant found from the meshes (adjacent, touching at the default pose, never touching), and the pairs
our capsules add as the assistant would: adjacent links, and pairs whose capsules overlap at the home
configuration or in more than 95 % of random configurations within the joint limits (they always touch).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import scipy.optimize

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fdcontrol.model.robot import HOME  # noqa: E402

SHARE = Path(pin.__file__).resolve()
while SHARE.name != "cmeel.prefix":  # pinocchio's wheel: <site-packages>/cmeel.prefix/lib/…/pinocchio
    SHARE = SHARE.parent
SHARE = SHARE / "share"
ERD = SHARE / "example-robot-data" / "robots"

SRDF = {"ur10": "ur_description/srdf/ur5.srdf", "panda": "panda_description/srdf/panda.srdf",
        "fr3": "panda_description/srdf/panda.srdf"}

ARMS = {  # ours → (vendor URDF, our link → vendor link, our flange, vendor flange)
    "ur10": ("ur_description/urdf/ur10_robot.urdf",
             {n: n for n in ("base_link", "shoulder_link", "upper_arm_link", "forearm_link", "wrist_1_link",
                             "wrist_2_link", "wrist_3_link")}, "tool0", "tool0"),
    "panda": ("panda_description/urdf/panda.urdf", {f"panda_link{i}": f"panda_link{i}" for i in range(8)},
              "panda_link8", "panda_link8"),
    "fr3": ("panda_description/urdf/panda.urdf", {f"fr3_link{i}": f"panda_link{i}" for i in range(8)},
            "fr3_link8", "panda_link8"),
}


def kabsch(a: np.ndarray, b: np.ndarray) -> pin.SE3:
    """The rigid transform X with X·a ≈ b (rows are points)."""
    ca, cb = a.mean(0), b.mean(0)
    U, _, Vt = np.linalg.svd((a - ca).T @ (b - cb))
    D = np.diag([1, 1, np.sign(np.linalg.det(Vt.T @ U.T))])
    R = Vt.T @ D @ U.T
    return pin.SE3(R, cb - R @ ca)


def enclose(P: np.ndarray, c: np.ndarray, u: np.ndarray) -> tuple[float, float, float]:
    """(radius, t0, t1) of the smallest capsule about the line c + t·u that covers every point."""
    d = P - c
    t = d @ u
    rho2 = np.maximum(np.einsum("ij,ij->i", d, d) - t * t, 0.0)
    r = float(np.sqrt(rho2.max()))
    h = np.sqrt(np.maximum(r * r - rho2, 0.0))
    t0, t1 = float((t + h).min()), float((t - h).max())  # each point is inside a cap or the cylinder
    if t0 > t1:
        t0 = t1 = 0.5 * (t0 + t1)
        r = float(np.sqrt((rho2 + (t - t0) ** 2).max()))
    return r, t0, t1


def fit(P: np.ndarray) -> dict[str, float | list[float]]:
    c0 = P.mean(0)
    _, V = np.linalg.eigh(np.cov((P - c0).T))
    u0 = V[:, -1]
    e1, e2 = V[:, 0], V[:, 1]

    def unpack(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        u = u0 + x[0] * e1 + x[1] * e2
        return c0 + x[2] * e1 + x[3] * e2, u / np.linalg.norm(u)

    def volume(x: np.ndarray) -> float:
        c, u = unpack(x)
        r, t0, t1 = enclose(P, c, u)
        return np.pi * r * r * (t1 - t0) + 4.0 / 3.0 * np.pi * r ** 3

    best = min((scipy.optimize.minimize(volume, x0, method="Nelder-Mead",
                                        options={"xatol": 1e-6, "fatol": 1e-9, "maxiter": 4000})
                for x0 in (np.zeros(4), np.array([0.3, 0, 0, 0]), np.array([0, 0.3, 0, 0]))),
               key=lambda res: res.fun)
    c, u = unpack(best.x)
    r, t0, t1 = enclose(P, c, u)
    a, b = c + t0 * u, c + t1 * u
    # check: every vertex inside (distance to the segment ≤ r)
    s = np.clip((P - a) @ (b - a) / max((b - a) @ (b - a), 1e-300), 0.0, 1.0)
    dist = np.linalg.norm(P - (a + s[:, None] * (b - a)), axis=1)
    assert dist.max() <= r + 1e-9, dist.max() - r
    return {"a": np.round(a, 6).tolist(), "b": np.round(b, 6).tolist(), "radius": round(r + 1e-6, 6)}


def vendor_vertices(urdf: Path) -> tuple[pin.Model, dict[str, np.ndarray]]:
    """The vendor model and each link's collision vertices in that link's frame."""
    model, coll, _ = pin.buildModelsFromUrdf(str(urdf), package_dirs=[str(SHARE)])
    out: dict[str, list[np.ndarray]] = {}
    for o in coll.geometryObjects:
        if not hasattr(o.geometry, "vertices"):  # e.g. the UR description's 1 cm box at ee_link
            continue
        V = np.asarray(o.geometry.vertices()) * np.asarray(o.meshScale)
        fr = model.frames[o.parentFrame]
        # the geometry's placement is relative to its parent joint; bring it into the link frame
        fMg = fr.placement.inverse() * o.placement
        out.setdefault(fr.name, []).append(V @ fMg.rotation.T + fMg.translation)
    return model, {k: np.vstack(v) for k, v in out.items()}


def frames(model: pin.Model, q: np.ndarray, names: list[str]) -> dict[str, pin.SE3]:
    q = np.concatenate((q, np.zeros(model.nq - len(q))))  # the vendor Panda's fingers at 0
    data = model.createData()
    pin.framesForwardKinematics(model, data, q)
    return {n: data.oMf[model.getFrameId(n)].copy() for n in names}


def seg_dist(a0, a1, b0, b1) -> float:
    """Distance between segments (a dense sample; only for the offline pair statistics)."""
    t = np.linspace(0, 1, 24)
    A = a0 + t[:, None] * (a1 - a0)
    B = b0 + t[:, None] * (b1 - b0)
    return float(np.min(np.linalg.norm(A[:, None] - B[None], axis=2)))


def vendor_disabled(name: str, links: dict[str, str]) -> dict[tuple[str, str], str]:
    """The vendor SRDF's disable_collisions among our links (names mapped), with their reasons."""
    import xml.etree.ElementTree as ET

    ours = {v: k for k, v in links.items()}
    out = {}
    for e in ET.parse(ERD / SRDF[name]).getroot().iter("disable_collisions"):
        a, b = ours.get(e.get("link1", "")), ours.get(e.get("link2", ""))
        if a is not None and b is not None:
            key = (a, b) if list(links).index(a) < list(links).index(b) else (b, a)
            out[key] = f"{e.get('reason')} (vendor SRDF)" if e.get("reason") else "vendor SRDF"
    return out


def disabled_pairs(name: str, ours: pin.Model, caps: dict[str, dict], rng: np.random.Generator,
                   vendor: dict[tuple[str, str], str]) -> list[list]:
    links = list(caps)
    parent = {}
    for f in ours.frames:
        if f.name in caps:
            parent[f.name] = f.parentJoint
    pairs, why = [], dict(vendor)
    for i, a in enumerate(links):
        for b in links[i + 1:]:
            if abs(parent[a] - parent[b]) <= 1 and (a, b) not in why:
                why[(a, b)] = "Adjacent"
            pairs.append((a, b))
    lo, hi = ours.lowerPositionLimit, ours.upperPositionLimit
    qs = [np.asarray(HOME[name])] + [rng.uniform(np.maximum(lo, -np.pi), np.minimum(hi, np.pi)) for _ in range(2000)]
    hits = {p: 0 for p in pairs}
    for k, q in enumerate(qs):
        F = frames(ours, q, links)
        W = {n: (F[n].act(np.array(c["a"])), F[n].act(np.array(c["b"])), c["radius"]) for n, c in caps.items()}
        for a, b in pairs:
            if (a, b) in why:
                continue
            (a0, a1, ra), (b0, b1, rb) = W[a], W[b]
            if seg_dist(a0, a1, b0, b1) < ra + rb:
                hits[(a, b)] += 1
                if k == 0:
                    why[(a, b)] = "Default"
    for p, n in hits.items():
        if p not in why and n > 0.95 * (len(qs) - 1):
            why[p] = "Always"
    return [[a, b, r] for (a, b), r in sorted(why.items())]


def main() -> None:
    rng = np.random.default_rng(0)
    out: dict[str, dict] = {}
    for name, (src, links, flange, vflange) in ARMS.items():
        ours = pin.buildModelFromUrdf(str(ROOT / "urdf" / f"{name}.urdf"))
        vendor, verts = vendor_vertices(ERD / src)
        qs = [rng.uniform(-2, 2, ours.nq) for _ in range(20)]
        pts_o = np.array([frames(ours, q, [flange])[flange].translation for q in qs])
        pts_v = np.array([frames(vendor, q, [vflange])[vflange].translation for q in qs])
        A = kabsch(pts_v, pts_o)  # vendor world → our world
        assert np.abs(np.array([A.act(p) for p in pts_v]) - pts_o).max() < 1e-9, name
        caps = {}
        for ln, vn in links.items():
            Xs = [(frames(ours, q, [ln])[ln].inverse() * A * frames(vendor, q, [vn])[vn]) for q in qs[:5]]
            for X in Xs[1:]:
                assert np.abs(X.homogeneous - Xs[0].homogeneous).max() < 1e-9, (name, ln)
            X = Xs[0]
            P = verts[vn] @ X.rotation.T + X.translation
            caps[ln] = fit(P)
            print(f"{name} {ln}: r = {caps[ln]['radius']:.3f} m, length "
                  f"{np.linalg.norm(np.subtract(caps[ln]['b'], caps[ln]['a'])):.3f} m ({len(P)} vertices)")
        out[name] = {"source": f"example-robot-data {src.split('/')[0]} collision meshes",
                     "capsules": caps, "disable_collisions": disabled_pairs(name, ours, caps, rng,
                                                             vendor_disabled(name, links))}
        print(name, "disabled pairs:", out[name]["disable_collisions"])
    (ROOT / "urdf" / "capsules.json").write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", ROOT / "urdf" / "capsules.json")


if __name__ == "__main__":
    main()
