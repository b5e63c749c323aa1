"""Pressing 10 N on the table: why a velocity-resolved mapping (DLS, J⁻¹) rings, and its best settings.

The rig of :mod:`fdcontrol.experiments.physics` (tool end 2 cm above the compliant table, force
mode, f_target = 10 N down, force gain ``PRESS_GAIN``, 500 Hz) with the knobs the ringing may
come from: the mapping's damping α, the admittance's decay c, the force gain, the tool's mass
(its inertia is read by the flange sensor), the servo's bandwidth, and the sensor model's
first-order low-pass (``WrenchFilter.cutoff``). Metrics on the MuJoCo contact force (ground
truth): settling into ±0.2 N of 10 N, the mean and the ripple (half the peak-to-peak) over the
last second, the ripple's dominant frequency, the peak.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from fdcontrol.drivers.mujoco import EnvObject, MujocoRobot, Tool
from fdcontrol.experiments import physics as P
from fdcontrol.loop.solvers import DEFAULT_DECAY, make_solver
from fdcontrol.mappings import make_mapping
from fdcontrol.model.robot import RobotModel

#: DLS's best fair settings on contact (docs/physics.md): the comparison's force gain, decay and
#: α unchanged, plus a first-order low-pass on the sensed wrench. DLS maps the sensed force to a
#: velocity with no dynamics in between; pressed against the table the servo's own force
#: answers the velocity step within the cycle, and the loop gain per cycle exceeds 1: a
#: 250 Hz (Nyquist) limit cycle. The low-pass adds the pole that FD's virtual mass has
#: (at c/2π = 1.6 Hz it is exactly FD's admittance 1/(s + c)); 5 Hz settles as fast as 20 Hz
#: and stays 4× below the onset of ringing (50 Hz rings again).
DLS_CUTOFF_HZ = 5.0
DLS_ALPHA = 0.1


@dataclass(frozen=True)
class Press:
    mapping: str = "dls"
    gain: float = P.PRESS_GAIN
    alpha: float = DLS_ALPHA
    decay: float = DEFAULT_DECAY
    cutoff: float = 0.0  # Hz, 0: no low-pass
    tool_mass: float = P.TOOL.mass
    bandwidth: float = 20.0

    def label(self) -> str:
        base = Press(mapping=self.mapping)
        diff = {k: v for k, v in asdict(self).items() if v != getattr(base, k) and k != "mapping"}
        return self.mapping + (" " + ", ".join(f"{k}={v:g}" for k, v in diff.items()) if diff else "")


def press(robot: RobotModel, p: Press = Press(), seconds: float = 3.0, gap: float = P.GAP) -> dict:
    """Settling, mean, ripple and its frequency over the last second, peak (module doc)."""
    tool = Tool(mass=p.tool_mass, com=P.TOOL.com, length=P.TOOL.length, radius=P.TOOL.radius)
    probe = MujocoRobot(robot, dt=P.DT, tool=tool)
    end = probe.tool_end()
    top = end[2] - tool.radius - gap
    tbl = EnvObject("table", (end[0], end[1], top - 0.05), (0.6, 0.6, 0.1), stiffness=100.0, damping=20.0)
    law = P.force_law(np.array([0, 0, -P.PRESS_N, 0, 0, 0]), p.gain)
    r = P.rig(robot, p.mapping, law=law, objects=[tbl], tool=tool)
    if p.bandwidth != 20.0:  # the same arm with a stiffer (or softer) servo
        r.drv._set_gains(r.drv.read().q, p.bandwidth)
    r.loop.filter.cutoff = p.cutoff
    kw = {"alpha": p.alpha} if p.mapping == "dls" else (
        {"gamma": 1e3, "gamma_schedule": "fixed"} if p.mapping == "fd" else {})
    r.loop.solver = make_solver(make_mapping(p.mapping, robot, **kw), decay=p.decay)
    r.loop.config = r.loop._configuration()
    F = np.empty(round(seconds / P.DT))
    for i in range(len(F)):
        r.loop.set_wrench(np.zeros(6), t=i * P.DT)  # an operator's live stream: the setpoint acts on live input
        r.loop.step(now=i * P.DT)
        F[i] = r.drv.contact_force()[2]
    last = F[-round(1.0 / P.DT):]
    out = np.abs(F - P.PRESS_N) > 0.2
    k = int(np.nonzero(out)[0][-1]) + 1 if out.any() else 0
    x = last - last.mean()
    amp = np.abs(np.fft.rfft(x))
    freq = np.fft.rfftfreq(len(x), P.DT)
    return {"settle_s": k * P.DT if k < len(F) else None, "mean_N": float(last.mean()),
            "ripple_N": float((last.max() - last.min()) / 2), "ripple_hz": float(freq[1 + amp[1:].argmax()]),
            "peak_N": float(F.max()), "fault": r.loop.fault}


#: one knob at a time from DLS at the comparison's settings
CAUSES: tuple[Press, ...] = (
    Press(mapping="fd"),
    Press(),
    Press(alpha=0.01), Press(alpha=0.5),
    Press(gain=0.01), Press(gain=0.04),
    Press(decay=20.0), Press(decay=5.0),
    Press(tool_mass=0.05),
    Press(bandwidth=10.0), Press(bandwidth=40.0),
    Press(cutoff=DEFAULT_DECAY / (2 * math.pi)), Press(cutoff=5.0), Press(cutoff=20.0), Press(cutoff=50.0),
    Press(mapping="ji"), Press(mapping="ji", cutoff=DLS_CUTOFF_HZ),
)
