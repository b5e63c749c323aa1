"""The reach of a chain: an upper bound on the distance of the tip from the base origin.

By the triangle inequality the tip lies within the sum of the lengths of the fixed offsets
along the chain (joint placements and the tip frame's placement; prismatic joints add their
upper travel). A target beyond it cannot be reached by any configuration.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from fdcontrol.model.robot import RobotModel


def reach(robot: RobotModel) -> float:
    """An upper bound (m) on ‖p_tip‖ in the base frame over every configuration."""
    m = robot.model
    tip = m.frames[robot.tip_id]
    total = float(np.linalg.norm(tip.placement.translation))
    j = tip.parentJoint
    while j > 0:
        total += float(np.linalg.norm(m.jointPlacements[j].translation))
        if m.joints[j].shortname().startswith("JointModelP"):  # prismatic: its travel
            i = m.joints[j].idx_q
            total += float(max(abs(m.lowerPositionLimit[i]), abs(m.upperPositionLimit[i])))
        j = m.parents[j]
    data = m.createData()  # the base's own offset from the model's root (fixed: off the chain)
    pin.framesForwardKinematics(m, data, pin.neutral(m))
    return total + float(np.linalg.norm(data.oMf[robot.base_id].translation))
