"""Control: the laws that make the Cartesian control signal f_c (one class per mode in ``laws``,
composed by ``law.ControlLaw``), the sensor model, the twist input, the null-space posture task
and link loads."""
