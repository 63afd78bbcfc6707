"""One rule for a test whose dependency is missing (a pytest plugin, registered in ``tests/conftest.py``).

* A bare ``pytest`` (a contributor without Java, PostgreSQL, Chromium, ...) may skip such a test; the
  skip reason names what is missing and how to install it (:func:`missing`), and ``-ra`` lists it.
* ``make test`` (and so ``.ci/run``) runs ``pytest --require-all``: every skip, whatever raised it (a
  fixture calling :func:`missing`, a ``skipif`` marker, a module-level skip), is reported as a failure.
  No environment variable turns that back into a skip: the option decides, and the Makefile clears
  ``PYTEST_ADDOPTS`` so nothing can deselect tests behind it either.
* A true ``CI`` variable (``1``/``true``/``yes``, as CI services set it) also makes skips failures, for a
  ``pytest`` run by hand in a CI job.

An expected failure (``xfail``) is not a skip and stays what it is.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Mapping
from typing import NoReturn

import pytest

REQUIRE_ALL = "--require-all"
_TRUE = {"1", "true", "yes"}
_STRICT = pytest.StashKey[bool]()


def missing(what: str, install: str) -> NoReturn:
    """Skip the running test because ``what`` is missing; ``install`` says how to get it.

    Under ``--require-all`` (``make test``) or a true ``CI`` the skip is reported as a failure by this
    plugin's hooks, so callers never decide between skipping and failing themselves.

    Raises:
        pytest.skip.Exception: always.
    """
    pytest.skip(f"{what} is missing: {install}")


def strict_from(require_all: bool, environ: Mapping[str, str]) -> bool:
    """Whether skips are failures: ``--require-all`` given, or ``CI`` set to a true value."""
    return require_all or environ.get("CI", "").strip().lower() in _TRUE


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--require-all``."""
    parser.addoption(
        REQUIRE_ALL,
        action="store_true",
        default=False,
        help="report every skipped test as a failure (make test: every dependency must be installed)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Decide once per run whether skips are failures."""
    config.stash[_STRICT] = strict_from(bool(config.getoption(REQUIRE_ALL)), os.environ)


def _as_failure(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Turn a skipped report into a failed one whose text says why it may not skip."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    report.outcome = "failed"
    report.longrepr = (
        f"{reason}\n(skipped tests fail under {REQUIRE_ALL} or CI: `make test` installs every dependency; "
        "a bare `pytest` may skip)"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    """Under strict mode a skipped test (setup, call or teardown) is a failed one; xfail is left alone."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and item.config.stash[_STRICT]:
        _as_failure(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, None, None]:
    """Under strict mode a module skipped at collection (``allow_module_level``, ``importorskip``) fails."""
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()
    if report.skipped and collector.config.stash[_STRICT]:
        _as_failure(report)
