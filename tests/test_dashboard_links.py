"""The dashboard shows the links' smallest distance and its link/volume pair (a real headless chromium via
Playwright against the real server and its MuJoCo UR10): a keep-out box set beside the resting forearm
through the API appears in the page's task badge with the distance and the pair `/state` carries (and a
brute-force capsule–box distance agrees), follows when the box moves nearer, and leaves with it."""

from __future__ import annotations

import re

import httpx
import numpy as np
import pytest

from .service import Service
from .test_collision_service import _box, _forearm, _sampled
from .test_dashboard import CHROMIUM, sync_playwright

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or sync_playwright is None,
    reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it) and playwright",
)

#: the badge's link part: "links 123 mm (forearm_link ↔ fixture)"
LINKS = re.compile(r"links (-?\d+) mm \(([^)]*)\)")
TIMEOUT_MS = 120_000  # a deadline on the page's own content (a loaded machine), never a sleep


@pytest.fixture(scope="module")
def service():
    svc = Service()
    yield svc
    svc.stop()


def shown(page) -> tuple[int, str] | None:
    m = LINKS.search(page.inner_text("#task"))
    return None if m is None else (int(m.group(1)), m.group(2))


def wait_badge(page, pair: str | None, mm: int | None = None) -> None:
    """Until the badge names ``pair`` (None: no link part) and, given, shows ``mm`` (±1 mm: rounding)."""
    page.wait_for_function(
        """([pair, mm]) => {
             const t = (document.getElementById('task') || {}).textContent || '';
             const m = t.match(/links (-?\\d+) mm \\(([^)]*)\\)/);
             if (pair === null) return window.dashboard && window.dashboard.config !== null && !m;
             return m !== null && m[2] === pair && (mm === null || Math.abs(Number(m[1]) - mm) <= 1);
           }""", arg=[pair, mm], timeout=TIMEOUT_MS)


def test_the_badge_shows_the_smallest_link_distance_and_its_pair(service, browser):
    http = httpx.Client(base_url=service.url, timeout=30)
    page = browser.new_page()
    try:
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(service.url + "/", wait_until="domcontentloaded")
        page.wait_for_function("window.dashboard && window.dashboard.config !== null "
                               "&& window.dashboard.shown.mode !== undefined")
        s0 = http.get("/state").json()
        assert s0["link_pair"] is None
        wait_badge(page, None)  # nothing configured: no link part (the check below can fail)

        mid, r, e, a, b = _forearm(s0["q"])
        for gap_set in (0.12, 0.08):  # beyond the 5 cm margin: the arm stays at rest
            fixture = _box(mid + (r + gap_set + 0.05) * e)
            gap = _sampled(a, b, r, fixture)
            assert http.patch("/config", json={"keep_out": [fixture]}).status_code == 200
            wait_badge(page, "forearm_link ↔ fixture", round(1000 * gap))
            mm, pair = shown(page)  # type: ignore[misc]
            s = http.get("/state").json()
            assert pair == s["link_pair"] == "forearm_link ↔ fixture"
            assert abs(mm - 1000 * s["link_distance"]) <= 1.0, (mm, s["link_distance"])  # shown: rounded to mm
            assert abs(mm - 1000 * gap) <= 2.0, (mm, gap)  # against the brute-force distance
            assert np.allclose(s["q"], s0["q"], atol=1e-3)  # the arm rests: the distance is the one set up
            assert "warn" not in (page.get_attribute("#task", "class") or "")  # beyond 5 cm: no warning

        assert http.patch("/config", json={"keep_out": []}).status_code == 200
        wait_badge(page, None)
        assert http.get("/state").json()["link_pair"] is None
    finally:
        page.close()
        http.patch("/config", json={"keep_out": []})
        http.close()
