"""The loop: :func:`build_loop` assembles a :class:`ControlLoop` from the declared parameters (the one
assembly: the service, the gymnasium env and the experiments use it too); one cycle is a list of
:mod:`stages <fdcontrol.loop.stages>` (read, sense, law and task, map, limits, send, publish) composed from
the configured parts; the solvers and integrators of the virtual model; the loop state declared once
(:mod:`fdcontrol.loop.state`)."""

from fdcontrol.loop.build import build_loop, build_parts, loop_params
from fdcontrol.loop.cycle import ControlLoop, InputError, LoopIO, Stats, check_wrench
from fdcontrol.loop.integrators import INTEGRATORS, Integrator, make_integrator
from fdcontrol.loop.parameters import declared, defaults
from fdcontrol.loop.solvers import (
    SOLVERS,
    ForwardDynamicsSolver,
    Solver,
    TransposeSolver,
    VelocitySolver,
    make_solver,
)
from fdcontrol.loop.stages import PHASES, Frame, Stage
from fdcontrol.loop.state import LoopState

__all__ = ["INTEGRATORS", "PHASES", "SOLVERS", "ControlLoop", "ForwardDynamicsSolver", "Frame", "InputError",
           "Integrator", "LoopIO", "LoopState", "Solver", "Stage", "Stats", "TransposeSolver", "VelocitySolver",
           "build_loop", "build_parts", "check_wrench", "declared", "defaults", "loop_params", "make_integrator",
           "make_solver"]
