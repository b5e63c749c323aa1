"""The dashboard follows the live configuration, and no page of the service reaches off the host
(a real headless chromium via Playwright against the real server)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import httpx
import pytest

from .service import Service
from .test_dashboard import CHROMIUM, sync_playwright

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or sync_playwright is None,
    reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it) and playwright",
)


@pytest.fixture(scope="module")
def service():
    svc = Service()
    yield svc
    svc.stop()


def test_form_follows_a_mode_changed_elsewhere_and_apply_sends_only_the_edit(service, browser):
    http = httpx.Client(base_url=service.url)
    start = http.get("/config").json()
    other = next(m for m in ("force", "motion", "compliance", "admittance") if m != start["mode"])
    page = browser.new_page()
    patches: list[dict] = []
    page.on("request", lambda r: patches.append(json.loads(r.post_data or "{}"))
            if r.method == "PATCH" and r.url.endswith("/config") else None)
    try:
        page.goto(service.url + "/")
        page.wait_for_function("window.dashboard.config !== null && window.dashboard.shown.mode !== undefined")
        assert page.input_value("#mode") == start["mode"]
        assert http.patch("/config", json={"mode": other}).status_code == 200  # another client
        page.wait_for_function(f"document.querySelector('#mode').value === {json.dumps(other)}", timeout=15_000)
        page.wait_for_function(f"document.querySelector('#mode-badge').textContent.includes({json.dumps(other)})")
        gamma = start["gamma"] * 2
        page.fill("#gamma", str(gamma))
        page.click("#btn-apply")
        page.wait_for_function("document.querySelector('#config-msg').textContent.startsWith('applied')")
        assert patches == [{"gamma": gamma}]  # the edit only: the mode, mapping, integrator are not sent back
        now = http.get("/config").json()
        assert now["mode"] == other and now["gamma"] == gamma and now["mapping"] == start["mapping"]
        # an edit in progress survives a poll that brings other news
        page.select_option("#integrator", next(i for i in _integrators(http) if i != now["integrator"]))
        mine = page.input_value("#integrator")
        assert http.patch("/config", json={"mode": start["mode"]}).status_code == 200
        page.wait_for_function(f"document.querySelector('#mode').value === {json.dumps(start['mode'])}",
                               timeout=15_000)
        assert page.input_value("#integrator") == mine
    finally:
        page.close()
        http.patch("/config", json={"mode": start["mode"], "gamma": start["gamma"],
                                    "integrator": start["integrator"]})


def _integrators(http: httpx.Client) -> list[str]:
    from fdcontrol.loop.integrators import INTEGRATORS

    return list(INTEGRATORS.names())


def test_singular_badge_shows_below_the_warning_level(service, browser):
    page = browser.new_page()
    try:
        page.goto(service.url + "/")
        page.wait_for_function("window.dashboard.received > 3")
        assert page.is_hidden("#singular-badge")  # the default pose is well conditioned
        # the badge's rule on a near-singular value (the next state from the live arm hides it again)
        shown = page.evaluate("""() => { singularBadge({sigma_min_j: 0.006}); const b = document.querySelector(
            '#singular-badge'); return [getComputedStyle(b).display !== 'none', b.textContent]; }""")
        assert shown[0] and "0.006" in shown[1], shown
    finally:
        page.close()


@pytest.mark.parametrize("path", ["/", "/docs", "/redoc", "/login.html"])
def test_no_page_requests_anything_off_the_host(service, browser, path):
    page = browser.new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.on("websocket", lambda ws: requested.append(ws.url))
    try:
        page.goto(service.url + path)
        page.wait_for_load_state("load")  # the dashboard polls for ever: never network-idle
        if path == "/docs":
            page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)  # rendered from the shipped files
        if path == "/redoc":
            page.wait_for_function("document.body.innerText.includes('/control/wrench')", timeout=20_000)
        page.wait_for_timeout(2000)  # the pages' own requests after loading (polls, sockets, images)
    finally:
        page.close()
    hosts = {urlsplit(u).hostname for u in requested if not u.startswith(("data:", "blob:"))}
    print(path, len(requested), "requests to", hosts)
    assert requested and hosts == {"127.0.0.1"}, sorted(set(requested))
