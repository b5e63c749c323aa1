"""/docs (Swagger UI) and /redoc (ReDoc) from files the service ships (server/static/vendor/),
so the API pages work on a robot cell's network without internet access: no page of the
service requests anything from another host."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

router = APIRouter(include_in_schema=False)
TITLE = "fdcontrol API"


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title=TITLE,
                               swagger_js_url="/vendor/swagger-ui/swagger-ui-bundle.js",
                               swagger_css_url="/vendor/swagger-ui/swagger-ui.css",
                               swagger_favicon_url="/vendor/swagger-ui/favicon-32x32.png")


@router.get("/redoc")
def redoc() -> HTMLResponse:
    return get_redoc_html(openapi_url="/openapi.json", title=TITLE, redoc_js_url="/vendor/redoc/redoc.standalone.js",
                          redoc_favicon_url="/vendor/swagger-ui/favicon-32x32.png", with_google_fonts=False)
