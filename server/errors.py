"""Error replies: one body shape per status, and an OpenAPI document that says so.

Every error answers ``{"detail": "text"}`` (at most ``MAX_DETAIL`` characters: replies never
echo megabytes back), except request validation (422), which answers
``{"detail": [{"loc": [...], "msg": "..."}]}`` — never the input itself, which could hold NaN
(not JSON). Routes declare these with ``responses=ERRORS`` (and ``CONFLICT`` for 409).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from fdcontrol import ModelError
from fdcontrol.loop import InputError
from fdcontrol.params import error_message
from fdcontrol.server import schemas
from fdcontrol.server.auth import MIDDLEWARE_ERRORS, UNSAFE
from fdcontrol.server.worker import WorkerError

MAX_DETAIL = 300  # characters of an error message
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": schemas.Error, "description": "malformed or too deeply nested JSON"},
    401: {"model": schemas.Error, "description": "token required"},
    403: {"model": schemas.Error, "description": "foreign Origin"},
    413: {"model": schemas.Error, "description": "body too large"},
    415: {"model": schemas.Error, "description": "a form or text body on a state change"},
    421: {"model": schemas.Error, "description": "unknown Host"},
    422: {"model": schemas.ValidationErrorOut, "description": "invalid input"},
    503: {"model": schemas.Error, "description": "the loop process is dead, stuck or restarting"},
}
CONFLICT: dict[int | str, dict[str, Any]] = {409: {"model": schemas.Error, "description": "needs the loop stopped"}}


def clip(text: str) -> str:
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"  # ≤ MAX_DETAIL in all


def error(status: int, detail: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": clip(detail)})


def detail_text(detail: Any) -> str:
    """A validation error list as one line: ``loc.path: msg; …``."""
    if isinstance(detail, list):
        return "; ".join(f"{'.'.join(map(str, e.get('loc', ()))) or 'body'}: {e.get('msg', '')}"
                         for e in detail if isinstance(e, dict))
    return str(detail)


def _loc(e: Any) -> list[str | int]:
    loc = [x if isinstance(x, int) else clip(str(x))[:80] for x in list(e.get("loc", ()))[:10]]
    if e.get("type") == "extra_forbidden" and loc:
        loc[-1] = "(unknown field)"
    return loc


def install_handlers(app: FastAPI) -> None:
    """Exception → status: library input errors are 422, worker errors by kind (409, 422, 503)."""

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        # loc + msg only: echoing the input would put NaN into JSON (a 500); an unknown field's
        # name is input too, so its place in loc says "(unknown field)" instead
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": _loc(e), "msg": clip(error_message(str(e.get("msg", ""))))} for e in exc.errors()[:20]]})

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        # one body shape for every error status: {"detail": "text"} (422 validation: a list)
        return JSONResponse(status_code=exc.status_code, content={"detail": clip(detail_text(exc.detail))},
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(ModelError)
    async def _model_error(_: Request, exc: ModelError) -> JSONResponse:
        return error(422, str(exc))

    @app.exception_handler(InputError)
    async def _input_error(_: Request, exc: InputError) -> JSONResponse:
        return error(422, str(exc))

    @app.exception_handler(WorkerError)
    async def _worker_error(_: Request, exc: WorkerError) -> JSONResponse:
        status = {"conflict": 409, "invalid": 422}.get(exc.kind, 503)
        detail = exc.detail
        if status == 422 and isinstance(detail, list):
            return JSONResponse(status_code=422, content={"detail": detail[:20]})
        return error(status, detail_text(detail))


def true_validation_schema(app: FastAPI) -> None:
    """FastAPI's default 422 schema names fields our handler does not send (type, input, ctx):
    document the body actually sent, {"detail": [{"loc": [...], "msg": "..."}]}; and the
    middleware's statuses (server/auth.py) on every route, routers included."""
    base = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = base()
            comp = spec.get("components", {}).get("schemas", {})
            if "ValidationError" in comp:
                comp["ValidationError"] = {"title": "ValidationError", "type": "object", "required": ["loc", "msg"],
                                           "properties": {"loc": {"type": "array", "items": {
                                               "anyOf": [{"type": "string"}, {"type": "integer"}]}},
                                               "msg": {"type": "string"}}}
            comp.setdefault("Error", schemas.Error.model_json_schema())
            for ops in spec.get("paths", {}).values():  # every route, routers added later too
                for method, op in ops.items():
                    for status, text in MIDDLEWARE_ERRORS.items():
                        if method.upper() in UNSAFE or status in (401, 421):
                            op.setdefault("responses", {}).setdefault(str(status), {
                                "description": text, "content": {"application/json": {
                                    "schema": {"$ref": "#/components/schemas/Error"}}}})
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
