"""GET /robot/description: the robot's links, joints and link shapes, for the 3-D views.

One source for the dashboard's 3-D view and Foxglove (server/foxglove.py): the URDF read by
:class:`fdcontrol.viz.description.Description`, with generated shapes for links that have none.
"""

from __future__ import annotations

import functools
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field

from fdcontrol.server.routers.deps import worker
from fdcontrol.viz.description import Description

router = APIRouter(tags=["status"])


class JointInfo(BaseModel):
    name: str
    type: str = Field(description="revolute, continuous, prismatic or fixed (URDF)")
    parent: str
    child: str
    origin: list[list[float]] = Field(description="the child link's frame at q = 0 in the parent's (4×4, m)")
    axis: list[float]


class ShapeInfo(BaseModel):
    link: str
    kind: str = Field(description="box (size x, y, z), cylinder or capsule (radius, length along z), sphere "
                      "(radius)")
    origin: list[list[float]] = Field(description="the shape's frame in the link's (4×4, m)")
    size: list[float] = Field(description="m")
    rgba: list[float]
    generated: bool = Field(description="drawn between joint origins: the URDF has no shape for this link")


class RobotDescription(BaseModel):
    name: str
    root: str = Field(description="the URDF's root link")
    base: str = Field(description="the chain's base frame (the state's frame)")
    tip: str
    links: list[str]
    joints: list[JointInfo] = Field(description="in tree order: each parent before its children")
    shapes: list[ShapeInfo]
    urdf: str = Field(description="the URDF, generated shapes added as <visual> elements")


@functools.lru_cache(maxsize=8)
def _describe(robot: str, base: str | None, tip: str | None) -> dict[str, Any]:
    from fdcontrol.model.robot import RobotModel

    return Description.from_robot(RobotModel.resolve(robot, base, tip)).to_dict()


@router.get("/robot/description", response_model=RobotDescription, responses={404: {"description": "no URDF"}})
def robot_description(request: Request) -> dict[str, Any]:
    """The running robot's description: links, joints (tree order), link shapes and the URDF."""
    p = worker(request).params
    try:
        return _describe(p["robot"], p.get("base"), p.get("tip"))
    except ValueError as exc:
        raise HTTPException(404, str(exc)) from None
