"""The loop: ``cycle.ControlLoop`` runs one cycle (driver → law → solver → limits → driver),
the solvers and integrators of the virtual model, and the loop state declared once (``state``)."""
