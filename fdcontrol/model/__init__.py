"""The model: the robot description (RobotModel), the per-cycle Configuration (pose, J, H), the
γ-conditioned virtual model, joint-limit constraints and spatial helpers."""
