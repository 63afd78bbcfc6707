"""The measuring harness itself: peak memory and the time from SIGTERM to exit are really measured."""

from __future__ import annotations

import sys

from tests.hostile.harness import run_measured


def test_peak_rss_is_the_child_s_own() -> None:
    measured = run_measured(
        # the child holds its 200 MiB for a second: the harness samples /proc while the child lives, and a child
        # gone 0.2 s after touching its pages could exit between two samples on a loaded machine (CI: 189 MiB)
        [
            sys.executable,
            "-c",
            "import time; b = bytearray(200 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); time.sleep(1)",
        ]
    )
    assert measured.returncode == 0
    assert measured.peak_rss_mib >= 200


def test_sigterm_is_sent_and_the_exit_timed() -> None:
    measured = run_measured([sys.executable, "-c", "import time; time.sleep(60)"], terminate_after_s=0.5)
    assert measured.returncode == -15
    assert measured.stop_s is not None and not measured.killed
