"""``tidegauge demo --duration 120s`` end to end, looked at with a real browser.

One demo run (the daemon, the Streamlit dashboard, the webhook receiver and the simulated fleet, as a user
starts it) serves both checks:

* every injected fault is detected (a firing alert of the expected rule on the faulted job) and notified
  (the built-in receiver got it), and the command says so and exits 0;
* Playwright (from PyPI) drives Debian's ``chromium`` (``.ci/system-deps.sh`` installs it; ``playwright
  install`` cannot download a browser here) through each dashboard page: it waits until Streamlit settled
  (the status widget gone), finds no exception element and no console error, checks the key texts (a
  finding's rule and its job) and keeps a screenshot under the test's temp dir.

Pages are reached through the sidebar navigation from the root URL, as a person clicks: a deep link
(``/job?...``) makes Streamlit's frontend probe ``/job/_stcore/health`` before the root, a 404 that lands
in the console although the page then loads.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.dependencies import missing

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FAULT_COUNT = 8
DURATION_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        missing("Debian's chromium", "apt-get install chromium (bash .ci/system-deps.sh; make test does it)")
    return path


class _Demo:
    def __init__(self, root: Path) -> None:
        self.dashboard_port = _free_port()
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", "demo", "--duration", f"{DURATION_S}s", "--dir", str(root),
             "--port", "0", "--receiver-port", "0", "--dashboard-port", str(self.dashboard_port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, count: int, timeout_s: float) -> list[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = [line for line in list(self.lines) if re.search(pattern, line)]
            if len(found) >= count:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError(f"{pattern!r} seen fewer than {count} times; output:\n" + "\n".join(self.lines))

    def close(self) -> None:
        self._reader.join(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def url(self, name: str) -> str:
        line = next(line for line in self.lines if line.strip().startswith(name))
        return line.split()[-1]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    run = _Demo(tmp_path_factory.mktemp("demo"))
    try:
        yield run
    finally:
        if run.process.poll() is None:
            run.process.terminate()
            run.process.wait(timeout=30)
        run.close()


def _settle(page) -> None:  # type: ignore[no-untyped-def]
    page.wait_for_selector("[data-testid='stApp']", timeout=30_000)
    page.wait_for_timeout(800)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
    page.wait_for_timeout(800)


def test_demo_dashboard_in_a_real_browser_then_every_fault_notified(demo: _Demo, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    chromium = _chromium()
    notified = demo.wait_for(r"\bNOTIFIED\b", FAULT_COUNT, timeout_s=110)
    assert len(notified) == FAULT_COUNT
    dashboard = f"http://127.0.0.1:{demo.dashboard_port}/"
    receiver = demo.url("receiver page")
    checks = {
        "Fleet": ["Fleet", "clicks_per_window", "future_timestamp", "orders_payments", "watermark_stall",
                  "device-telemetry-windows", "idle_source", "ledger-writer", "consumer_lag"],
        "Job": ["Findings", "Watermarks per vertex and subtask"],  # the first job: the Flink one
        "Alerts": ["firing", "future_timestamp", "state_growth", "Silences"],
        "What-if lab": ["Delay sweep", "moved most in"],
        "Reports": ["Reports"],
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 2400})
            console: list[str] = []
            page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: console.append(str(e)))
            page.goto(dashboard)
            _settle(page)
            for title, texts in checks.items():
                # the daemon keeps writing and the dashboard caches for 5 s: look again a few times
                for attempt in range(6):
                    if title != "Fleet" or attempt:
                        page.locator("[data-testid='stSidebarNav'] a", has_text=title).first.click()
                        _settle(page)
                    body = page.locator("[data-testid='stMain']").inner_text()
                    if all(text in body for text in texts):
                        break
                    page.wait_for_timeout(3_000)
                (tmp_path / f"{title}.txt").write_text(body)
                for text in texts:
                    assert text in body, f"{title}: {text!r} not on the page"
                assert page.locator("[data-testid='stException']").count() == 0, title
                page.screenshot(path=str(tmp_path / f"{title.replace(' ', '_').lower()}.png"))
            # the engine filter: only the Flink job and the Kafka groups are left
            page.locator("[data-testid='stSidebarNav'] a", has_text="Fleet").first.click()
            _settle(page)
            for engine in ("flink", "kafka"):
                page.locator("[data-testid='stMultiSelect']").first.click()
                page.locator("[role='option']", has_text=engine).first.click()
                _settle(page)
            page.keyboard.press("Escape")
            body = page.locator("[data-testid='stMain']").inner_text()
            (tmp_path / "Fleet-filtered.txt").write_text(body)
            page.screenshot(path=str(tmp_path / "fleet_flink_kafka.png"))
            for text in ("device-telemetry-windows", "vertex Source: telemetry subtask 1", "ledger-writer",
                         "consumer_lag"):  # (markdown renders the backticks of the message as code)
                assert text in body, f"Fleet filtered to flink+kafka: {text!r} not on the page"
            assert "clicks_per_window" not in body and "orders_payments" not in body
            assert "more firing findings" not in body  # all of theirs are listed, the Spark ones not counted
            assert console == [], console
            # the Kafka group's page shows its lag per partition, the Flink job's its watermarks per subtask
            # (a deep link: its health-probe 404 is the known console noise, so the console is not checked)
            job_pages = {
                "kafka&job_id=demo-kafka/ledger-writer": ["Consumer lag per partition", "Most lag:", "status (Burrow)",
                                                          "settlements"],
                "flink&job_id=device-telemetry-windows": ["Watermarks per vertex and subtask",
                                                          "Holding the minimum watermark", "Checkpointed state"],
            }
            for query, texts in job_pages.items():
                page.goto(f"{dashboard}job?engine={query}")
                _settle(page)
                body = page.locator("[data-testid='stMain']").inner_text()
                name = query.split("=")[-1].replace("/", "_")
                (tmp_path / f"job-{name}.txt").write_text(body)
                page.screenshot(path=str(tmp_path / f"job-{name}.png"))
                for text in texts:
                    assert text in body, f"job page {query}: {text!r} not on the page"
                assert "No consumer lag reported" not in body and "None" not in body.split()
                assert page.locator("[data-testid='stException']").count() == 0, query
            # a Spark query's page, chosen in the job picker as a person does
            page.locator("[data-testid='stSelectbox']").first.click()
            page.locator("[role='option']", has_text="clicks_per_window").first.click()
            _settle(page)
            body = page.locator("[data-testid='stMain']").inner_text()
            (tmp_path / "job-clicks_per_window.txt").write_text(body)
            page.screenshot(path=str(tmp_path / "job-clicks_per_window.png"))
            for text in ("Watermark, event time and processing time", "Rows dropped by the watermark", "above the chart (▲ at the top edge)"):
                assert text in body, f"job page clicks_per_window: {text!r} not on the page"
            page.goto(receiver)
            page.wait_for_load_state()
            text = page.inner_text("body")
            for rule in ("future_timestamp", "state_growth", "falling_behind", "late_drop_surge", "target_health",
                         "idle_source", "consumer_lag"):
                assert rule in text, f"receiver page lacks {rule}"
        finally:
            browser.close()
    assert httpx.get(demo.url("metrics"), timeout=5).status_code == 200
    code = demo.process.wait(timeout=DURATION_S + 60)
    output = "\n".join(demo.lines)
    assert code == 0, output
    assert f"all {FAULT_COUNT} faults detected and notified" in output
