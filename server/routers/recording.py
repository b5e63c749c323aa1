"""Recording the loop to MCAP files in ``settings.record_dir``.

Files are addressed by name only: a name is one path component matching ``NAME_RE`` and
ending in ``.mcap``; it is joined to the configured directory and the result is checked to
stay inside it. Nothing from the network becomes a path.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Body, HTTPException, Request
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field

router = APIRouter(tags=["recording"])
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,94}\.mcap$")


class RecordStart(BaseModel):
    name: str | None = Field(None, description="file name (letters, digits, . _ -, ending .mcap); "
                             "default fdcontrol-YYYYmmdd-HHMMSS.mcap", examples=["push-test.mcap"])


class RecordingStatus(BaseModel):
    active: bool
    name: str | None = None
    bytes: int | None = Field(None, description="file size so far")
    states: int | None = Field(None, description="loop states written")
    messages: int | None = Field(None, description="messages written (states, tip poses, commands, configs)")
    dropped: int | None = Field(None, description="states dropped because the writer fell behind")
    queued: int | None = None
    errors: int | None = Field(None, description="write errors (the recording goes on)")
    duration_s: float | None = None
    counts: dict[str, int] | None = Field(None, description="messages per topic")
    loop_cycles: int | None = Field(None, description="cycles the loop ran from start to stop (after stop)")


class RecordingFile(BaseModel):
    name: str
    bytes: int
    modified: float = Field(description="UNIX time")
    active: bool = Field(description="being written now")


def record_dir(request: Request) -> Path:
    d = Path(request.app.state.settings.record_dir).resolve()
    d.mkdir(parents=True, exist_ok=True)
    return d


def safe_path(directory: Path, name: str) -> Path:
    if not NAME_RE.fullmatch(name):
        raise HTTPException(422, "a recording name is letters, digits, '.', '_' or '-' ending in .mcap "
                                 "(no directories)")
    p = (directory / name).resolve()
    if p.parent != directory:
        raise HTTPException(422, "a recording name must not leave the recording directory")
    return p


def default_name() -> str:
    return time.strftime("fdcontrol-%Y%m%d-%H%M%S.mcap", time.localtime())


@router.post("/recording/start", response_model=RecordingStatus,
             responses={409: {"description": "already recording, or the file exists"}, 422: {}})
def start(request: Request, body: RecordStart = Body(default_factory=RecordStart)) -> dict[str, Any]:  # noqa: B008
    worker = request.app.state.worker
    path = safe_path(record_dir(request), body.name or default_name())
    if worker.recorder.active:
        raise HTTPException(409, "already recording; POST /recording/stop first")
    if path.exists():
        raise HTTPException(409, f"{path.name} exists; choose another name")
    try:
        return worker.record_start(path)
    except (RuntimeError, FileExistsError) as exc:  # a concurrent start won the race
        raise HTTPException(409, str(exc)) from exc


@router.post("/recording/stop", response_model=RecordingStatus, responses={409: {"description": "not recording"}})
def stop(request: Request) -> dict[str, Any]:
    try:
        return request.app.state.worker.recorder.stop()
    except RuntimeError as exc:
        raise HTTPException(409, "not recording") from exc


@router.get("/recording", response_model=RecordingStatus)
def status(request: Request) -> dict[str, Any]:
    return request.app.state.worker.recorder.status()


@router.get("/recordings", response_model=list[RecordingFile])
def list_recordings(request: Request) -> list[dict[str, Any]]:
    d = record_dir(request)
    current = request.app.state.worker.recorder.status()
    out = []
    for p in sorted(d.glob("*.mcap"), key=lambda x: x.stat().st_mtime, reverse=True):
        if p.is_file() and NAME_RE.fullmatch(p.name):
            st = p.stat()
            out.append({"name": p.name, "bytes": st.st_size, "modified": st.st_mtime,
                        "active": bool(current.get("active") and current.get("name") == p.name)})
    return out


@router.get("/recordings/{name}", response_class=FileResponse,
            responses={200: {"description": "the MCAP file", "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}, 404: {}, 422: {}})
def download(request: Request, name: str) -> FileResponse:
    p = safe_path(record_dir(request), name)
    if not p.is_file():
        raise HTTPException(404, f"no recording named {name}")
    return FileResponse(p, media_type="application/octet-stream", filename=p.name)
