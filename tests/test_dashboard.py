"""The dashboard in a real headless browser (Debian's chromium driven by Playwright) against a real server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from .service import ROOT, Service
from .waits import HUNG, until

DEADLINE_MS = int(HUNG * 1000)  # a page's wait: only ends a hung test

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    sync_playwright = None

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or sync_playwright is None,
    reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it) and playwright",
)
ARTIFACTS = ROOT / "artifacts"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


#: the tip's position as the 3-D arm view poses it (its forward kinematics of the description at the shown state)
TIP_3D = """(() => {
  const a = window.arm3d; a.follow(window.dashboard.state);
  const T = a.linkPose(a.desc.tip); return [T[3], T[7], T[11]];
})()"""


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    svc = Service("--record-dir", str(tmp_path_factory.mktemp("recordings")))
    yield svc
    svc.stop()


def check_select_options(page):
    """The mapping and mode selects list exactly the registered names (filled from GET /options)."""
    from fdcontrol.control.laws import LAWS
    from fdcontrol.mappings import MAPPING_NAMES

    values = "id => [...document.querySelectorAll('#' + id + ' option')].map(o => o.value)"
    assert page.evaluate(f"({values})('mapping')") == list(MAPPING_NAMES)
    assert page.evaluate(f"({values})('mode')") == list(LAWS.names())


def test_dashboard_start_push_and_switch_mapping(service, tmp_path):
    http = httpx.Client(base_url=service.url)
    http.post("/control/stop")
    before = http.get("/stats").json()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        external = []
        page.on("request", lambda r: external.append(r.url) if not r.url.startswith(service.url.replace(
            "http", "ws")) and not r.url.startswith(service.url) else None)
        page.goto(service.url + "/")
        page.wait_for_function("window.dashboard.received > 3 && window.dashboard.config !== null && "
                               "window.arm3d && window.arm3d.desc !== null", timeout=120_000)
        assert page.evaluate("window.dashboard.state.running") is False
        check_select_options(page)

        page.click("#btn-start")
        page.wait_for_function("window.dashboard.state.running === true")
        started = page.evaluate("[window.dashboard.state.cycle, window.dashboard.state.stamp]")
        q0 = page.evaluate("window.dashboard.state.q_ref")
        tip0 = page.evaluate(TIP_3D)
        plot0 = page.evaluate("document.querySelector('#plot-q canvas').toDataURL()")

        box = page.locator("#pad").bounding_box()
        cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(cx, cy)
        page.mouse.down()
        page.mouse.move(cx + box["width"] * 0.45, cy, steps=5)  # push towards +x (the pad streams at 50 Hz) …
        # … held for 1 s of the loop's own cycles, as the page's states count them (the timeout only ends a
        # hung test)
        page.wait_for_function("c => window.dashboard.state.cycle >= c",
                               arg=started[0] + page.evaluate("window.dashboard.config.rate"), timeout=DEADLINE_MS)
        page.mouse.up()
        # the page's state 50 cycles after the release (the arm held by the watchdog)
        page.wait_for_function("c => window.dashboard.state.cycle >= c",
                               arg=page.evaluate("window.dashboard.state.cycle") + 50, timeout=DEADLINE_MS)

        q1 = page.evaluate("window.dashboard.state.q_ref")
        tip1 = page.evaluate(TIP_3D)
        plot1 = page.evaluate("document.querySelector('#plot-q canvas').toDataURL()")
        assert max(abs(a - b) for a, b in zip(q0, q1, strict=True)) > 0.02
        assert tip1[0] - tip0[0] > 0.02  # the 3-D view's tip moved along +x
        assert plot1 != plot0
        page.wait_for_function("window.dashboard.sigma !== null")
        check_labels(page, http)
        check_recording(page, http)

        page.select_option("#mapping", "dls")
        page.fill("#alpha", "0.05")
        page.click("#btn-apply")
        page.wait_for_function("document.getElementById('config-msg').textContent.startsWith('applied')")
        states_later(page, 3)  # a few frames drawn since, for the screenshot
        page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
        browser.close()
    after = http.get("/stats").json()
    cycles = after["cycles"] - before["cycles"]
    overruns = after["overruns"] - before["overruns"]
    print(f"with the page open: {overruns} overruns in {cycles} cycles, period error p99 "
          f"{after['period_error_p99_us']:.0f} µs")
    # the page does not starve the loop: it keeps its rate while the page runs (the loop was
    # started by the click, so count from the first running state the page showed), on the loop's
    # own clock (cycles over its stamps), not on this process's
    end = http.get("/state").json()
    loop_rate = (end["cycle"] - started[0]) / (end["stamp"] - started[1])
    print(f"the loop ran {loop_rate:.0f} cycles per second of its clock while the page was open")
    assert loop_rate >= 0.8 * after["rate"]
    assert overruns <= 0.25 * cycles  # this VM alone makes 0–10 % (hypervisor steal)
    cfg = http.get("/config").json()
    assert cfg["mapping"] == "dls" and cfg["alpha"] == 0.05
    assert not external, f"the page reached beyond the service: {external[:3]}"
    assert Path(ARTIFACTS / "dashboard.png").stat().st_size > 10_000


def legend(page, plot_id):
    return page.eval_on_selector_all(f"#{plot_id} .u-legend .u-series .u-label", "els => els.map(e => e.textContent)")


def check_labels(page, http):
    """Every plot has a legend naming its series (joint names from /robots) and an axis with its unit."""
    joints = [j["name"] for j in next(r for r in http.get("/robots").json() if r["name"] == "ur10")["joints"]]
    for pid in ("plot-q", "plot-qd"):
        assert legend(page, pid)[1:] == joints, pid
    assert legend(page, "plot-force")[1:] == [f"Fc {a}" for a in "xyz"] + [f"Fmeas {a}" for a in "xyz"]
    assert legend(page, "plot-torque")[1:] == [f"τc {a}" for a in "xyz"] + [f"τmeas {a}" for a in "xyz"]
    # axis labels with units (uPlot draws them on its canvas: read them from the plot's axes)
    for pid, unit in (("plot-q", "rad"), ("plot-qd", "rad/s"), ("plot-force", "N"), ("plot-torque", "N·m"),
                      ("plot-sigma", "σmin(J)")):
        labels = page.evaluate(f"window.dashboard.plots['{pid}'].axes.map(a => a.label)")
        assert labels == ["loop time (s)", unit], (pid, labels)
    # a legend value is the live value with its unit, e.g. "0.123 rad"
    page.wait_for_function("document.querySelectorAll('#plot-q .u-legend .u-series .u-value')[1]"
                           ".textContent.endsWith(' rad')")
    # one limit gauge per joint, named; the σ table has one row per mapping and the thresholds are explained
    assert page.eval_on_selector_all(".gauge .gname", "els => els.map(e => e.textContent)") == joints
    rows = page.eval_on_selector_all("#sigma-table tbody tr td:first-child", "els => els.map(e => e.textContent)")
    assert rows == ["JI", "JT", "DLS", "FD"]
    text = page.inner_text(".explain")
    assert "σmin < 0.01" in text and "σmax > 50" in text


def check_recording(page, http):
    """Record from the page: the button shows the file's name and growing size; stop lists the file."""
    page.click("#btn-record")
    page.wait_for_function("document.getElementById('rec-name').textContent.endsWith('.mcap')")
    name = page.inner_text("#rec-name")
    assert http.get("/recording").json()["active"] is True
    page.wait_for_function("/[0-9.]+ (KiB|MiB)/.test(document.getElementById('rec-size').textContent)",
                           timeout=DEADLINE_MS)
    until(lambda: http.get("/recording").json(), lambda r: r["bytes"] > 10_000, what="10 kB recorded")
    page.click("#btn-record")
    page.wait_for_function("document.getElementById('rec-name').textContent === 'not recording'")
    files = {f["name"]: f for f in http.get("/recordings").json()}
    assert name in files and files[name]["bytes"] > 10_000 and not files[name]["active"]
    page.wait_for_function(f"document.getElementById('rec-list').textContent.includes('{name}')")


def responder(status, body, answered=None):
    def answer(route):
        route.fulfill(status=status, content_type="application/json", body=body)
        if answered is not None:
            answered.append(status)
    return answer


def states_later(page, n: int) -> None:
    """Until the page has received `n` more states (its own count): it has handled what came before."""
    page.wait_for_function("n => window.dashboard.received >= n",
                           arg=page.evaluate("window.dashboard.received") + n, timeout=DEADLINE_MS)


def test_environment_objects_are_drawn_when_the_service_has_them(service):
    """GET /environment (another part of the service) answered by the browser's router: 200 → the boxes
    are drawn and named, 404 → nothing; the arm is at rest, so the canvases differ by the box only."""
    http = httpx.Client(base_url=service.url)
    http.post("/control/stop")
    env = {"objects": [{"name": "table", "kind": "box", "position": [0.6, 0.0, 0.2],
                        "quaternion": [0, 0, 0.3827, 0.9239], "size": [0.4, 0.6, 0.05]}], "push": [0] * 6}
    images = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        for status in (404, 200):
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            body = json.dumps(env if status == 200 else {"detail": "Not Found"})
            answered: list[int] = []
            page.route("**/environment", responder(status, body, answered))
            page.goto(service.url + "/")
            page.wait_for_function("window.dashboard.received > 3")
            if status == 200:
                page.wait_for_function("window.dashboard.environment !== null")
                assert page.inner_text("#env-info") == "environment: table"
                states_later(page, 3)  # drawn with the box
                page.locator("#arm-panel").screenshot(path=str(ARTIFACTS / "dashboard-environment.png"))
            else:
                # (each evaluate is a round trip in which Playwright runs the route's handler)
                until(lambda a=answered, pg=page: (pg.evaluate("0"), list(a))[1], lambda a: a == [404],
                      what="GET /environment answered 404")
                states_later(page, 5)  # the page went on after the 404: it had handled it
                assert page.evaluate("window.dashboard.environment") is None
                assert page.inner_text("#env-info") == ""
            states_later(page, 3)  # a few frames drawn since
            images[status] = page.evaluate("document.getElementById('arm').toDataURL()")
            page.close()
        browser.close()
    assert images[200] != images[404]

