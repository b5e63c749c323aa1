"""The dashboard's parameter form in a real browser: generated from GET /params, it follows a change
made by another client and sends only what the user edited."""

from __future__ import annotations

import httpx
import pytest

from fdcontrol.loop.parameters import declared

from .service import Service
from .test_dashboard import CHROMIUM, FLAGS, sync_playwright

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or sync_playwright is None,
    reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it) and playwright",
)


def test_the_form_is_the_declarations_follows_other_clients_and_sends_only_edits():
    svc = Service("--driver", "simulated")
    try:
        http = httpx.Client(base_url=svc.url, timeout=20)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            patches: list[str] = []
            page.on("request", lambda r: patches.append(r.post_data or "") if r.method == "PATCH" else None)
            page.goto(svc.url + "/")
            page.wait_for_function("document.querySelectorAll('#params-table tr').length > 0")
            names = page.evaluate("[...document.querySelectorAll('#params-table [data-param]')]"
                                  ".map(e => e.dataset.param)")
            assert names == list(declared())  # one field per declared parameter, in declaration order
            assert page.evaluate("document.getElementById('param-driver').disabled")  # startup: read-only
            assert page.evaluate("document.getElementById('param-gamma').max") == "1000000000000"
            # another client changes the mode: the form follows (polled)
            assert http.patch("/config", json={"mode": "force", "decay": 12.0}).status_code == 200
            page.wait_for_function("document.getElementById('param-mode').value === 'force'", timeout=10000)
            assert page.evaluate("document.getElementById('param-decay').value") == "12"
            # the user edits one field; Apply sends that field only (not the stale rest)
            page.evaluate("document.querySelector('#params-panel details').open = true")
            page.fill("#param-max_force", "321")
            page.click("#params-apply")
            page.wait_for_function("document.getElementById('params-msg').textContent.startsWith('applied')")
            assert patches and patches[-1] == '{"max_force":321}', patches
            cfg = http.get("/config").json()
            assert cfg["max_force"] == 321 and cfg["mode"] == "force" and cfg["decay"] == 12.0
            # a refused value shows the service's reason, naming the policy
            page.fill("#param-max_force", "900")
            page.click("#params-apply")
            page.wait_for_function("document.getElementById('params-msg').textContent.includes('tighten')")
            browser.close()
    finally:
        svc.stop()
