"""The freshness SLO end to end: a Spark event log (tests/slo_history.py) scanned with ``rules.freshness_slo``
into a database (``tidegauge scan --db``), then the stored burn-rate finding on the Job page in a real
browser (Playwright + Debian's chromium, a screenshot kept under the test's temp dir) and in the report.

Expected figures are the workbook table's, worked out by hand in tests/unit/test_rule_slo.py for the same
history: one finding episode from batch 363 (the ticket) to batch 745 (the ticket's last minute), critical
at its worst (the page of 368..417); its last finding is the ticket's: the 3d window holds 12.4 h of data
(minutes 0..745 = 746 counted, 30 bad: 4.0%, 4.0x the 1% budget; 28 days allow 403.2 bad minutes, 30 used:
92.6% left).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from monitor.cli import main
from tests.dependencies import missing
from tests.slo_history import QUERY_ID, SLO_CONFIG, write_slo_eventlog

pytestmark = [pytest.mark.integration]


def _cli(*argv: str) -> None:
    try:
        main(list(argv))
    except SystemExit as exc:
        assert not exc.code, argv


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("slo")
    log = write_slo_eventlog(root / "app-slo-0001")
    (root / "cfg.yml").write_text(SLO_CONFIG)
    url = f"sqlite:///{root / 'slo.db'}"
    _cli("db", "upgrade", "--db", url)
    _cli("scan", str(log), "--config", str(root / "cfg.yml"), "--db", url, "--format", "json")
    return root, url


def test_report_shows_burn_rate_and_budget_left(scanned: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, url = scanned
    capsys.readouterr()
    _cli("report", "--db", url, "--format", "md", "--since", "7d")
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "freshness SLO burn rate and error budget" in x)
    assert ("ticket: burning 4.0x over 3 days and 6 h (above 1x); error budget of 28 days at most 93% left "
            "(99% of minutes within 5 min) · ended at 2026-11-30 00:25 UTC") in line


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_job_page_shows_burn_rate_and_budget_left_in_chromium(scanned: tuple[Path, str], tmp_path: Path) -> None:
    import shutil

    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        missing("Debian's chromium", "apt-get install chromium (bash .ci/system-deps.sh; make test does it)")
    _, url = scanned
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "dashboard", "--db", url, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}/"
        for _ in range(240):  # streamlit's start: until it answers (not a timed assertion: a bound on waiting)
            try:
                if httpx.get(base, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1800})
                page.goto(f"{base}job?engine=spark&job_id={QUERY_ID}")
                page.wait_for_selector("[data-testid='stApp']", timeout=60_000)
                page.wait_for_selector("text=Freshness SLO", timeout=60_000)
                page.wait_for_function(
                    "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
                page.wait_for_timeout(1500)  # let the charts draw before the screenshot (looked at by a person)
                body = page.locator("[data-testid='stMain']").inner_text()
                (tmp_path / "job-slo.txt").write_text(body)
                page.screenshot(path=str(tmp_path / "job-slo.png"), full_page=True)
                assert page.locator("[data-testid='stException']").count() == 0
            finally:
                browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    for text in ("Freshness SLO", "error budget left", "≤ 93%", "burn rate (3 days / 6 h)", "4.0×",
                 "ticket (ended)", "freshness_slo"):
        assert text in body, f"{text!r} not on the Job page"
