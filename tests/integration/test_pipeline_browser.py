"""The Pipelines page in a real browser (Playwright driving Debian's ``chromium``, as
``test_demo_browser.py`` does), over the recorded two-query chain stored by the daemon's own path
(tests/pipeline_seed.py) 30 s into ``chain_a``'s stall, the dashboard started as ``tidegauge dashboard -c``
starts it (its ``pipelines:`` and target passed in the environment).

Asserted: the page says the pipeline is stale and that the staleness enters at ``chain_a``, shows both jobs
with what they add, the graph, both charts and the stored findings; no exception element, no console
error. The screenshot is kept under the test's temp dir (``pipelines.png``). Over the hand-written pipeline
with a freshness SLO (``seed_pipeline_slo``): the SLO block (error budget left, burn rate, page, where the
staleness enters), screenshot ``pipelines-slo.png``.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from monitor.commands.dashboard import launch, pipelines_json
from tests.integration.test_demo_browser import _chromium, _free_port, _settle
from tests.pipeline_seed import PipelineSeed, seed_pipeline, seed_pipeline_slo

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _wait_healthy(port: int, proc: subprocess.Popen[bytes]) -> None:
    """Until Streamlit answers its health check (at most 120 s; the process must stay up)."""
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, f"the dashboard exited with {proc.returncode}"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the dashboard did not come up in 120 s"
        time.sleep(0.5)


def _pipelines_page(seeded: PipelineSeed, tmp_path: Path, shot: str) -> tuple[str, str]:
    """The Pipelines page of a dashboard over ``seeded`` in Chromium: its main text and HTML (the screenshot is
    kept as ``tmp_path / shot``); no exception element, no console error."""
    from playwright.sync_api import sync_playwright

    chromium = _chromium()
    port = _free_port()
    proc = launch(seeded.url, None, "127.0.0.1", port, os.environ, quiet=True, pipelines=pipelines_json(seeded.config))
    try:
        _wait_healthy(port, proc)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 2000})
                console: list[str] = []
                page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: console.append(str(e)))
                page.goto(f"http://127.0.0.1:{port}/")
                _settle(page)
                page.locator("[data-testid='stSidebarNav'] a", has_text="Pipelines").first.click()
                _settle(page)
                page.wait_for_selector("svg .node", timeout=30_000)  # the graph rendered
                body = page.locator("[data-testid='stMain']").inner_text()
                (tmp_path / shot).with_suffix(".txt").write_text(body)
                page.screenshot(path=str(tmp_path / shot), full_page=True)
                assert page.locator("[data-testid='stException']").count() == 0
                assert console == []
                return body, page.content()
            finally:
                browser.close()
    finally:
        proc.terminate()
        proc.wait(30)


def test_pipelines_page_names_the_stalled_job(tmp_path: Path) -> None:
    body, content = _pipelines_page(seed_pipeline(tmp_path, lines=36), tmp_path, "pipelines.png")
    for text in ("Stale:", "enters at chain_a", "chain_b", "staleness enters here",
                 "Behind the sources (global lag)", "Added by each job (local lag)", "caused by"):
        assert text in body or text in content, text


def test_pipelines_page_shows_the_pipeline_slo(tmp_path: Path) -> None:
    # the hand-written clicks pipeline (tests/unit/test_pipeline_slo_surfaces.py works out the figures)
    body, _ = _pipelines_page(seed_pipeline_slo(tmp_path), tmp_path, "pipelines-slo.png")
    for text in ("Freshness SLO", "error budget left", "≤ 98%", "burn rate (6 h / 30 min)", "14.1×", "page",
                 "the staleness entered at a: start there", "Fresh: every end is within 5 min of its sources."):
        assert text in body, text
