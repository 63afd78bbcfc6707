"""A test whose dependency is missing: a bare ``pytest`` skips it and says what to install; ``make test``
(``pytest --require-all``) and CI fail it, and no environment variable turns that back into a skip.

Each case runs a small test file in a pytest of its own (``pytester``) with the suite's plugin
(tests/dependencies.py) and reads that run's outcome counts and output.
"""

from __future__ import annotations

import re

import pytest

from tests import dependencies
from tests.conftest import REPO_ROOT
from tests.dependencies import REQUIRE_ALL

NEEDS_A_BROKER = """
import pytest
from tests.dependencies import missing

@pytest.fixture(scope="session")
def broker():
    missing("an imaginary broker", "apt-get install imaginary-broker")

def test_uses_the_broker(broker):
    pass

def test_needs_nothing():
    pass
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in process over ``pytester``'s directory with the suite's plugin object registered."""
    return pytester.runpytest(*args, plugins=[dependencies])


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


def test_a_bare_pytest_skips_and_names_what_to_install(pytester: pytest.Pytester, clean_env: None) -> None:
    pytester.makepyfile(NEEDS_A_BROKER)
    result = run(pytester, "-ra")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]1[]] *an imaginary broker is missing: apt-get install imaginary-broker"]
    )


def test_require_all_fails_the_test_and_keeps_the_reason(pytester: pytest.Pytester, clean_env: None) -> None:
    pytester.makepyfile(NEEDS_A_BROKER)
    result = run(pytester, REQUIRE_ALL)
    result.assert_outcomes(passed=1, errors=1)  # the fixture's skip happened at setup: an error there
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*an imaginary broker is missing: apt-get install imaginary-broker",
            "*(skipped tests fail under --require-all or CI: `make test` installs every dependency*",
        ]
    )


@pytest.mark.parametrize("ci", ["", "0", "false", "no"])
def test_no_environment_variable_turns_require_all_back_into_skips(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    pytester.makepyfile(NEEDS_A_BROKER)
    run(pytester, REQUIRE_ALL).assert_outcomes(passed=1, errors=1)


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_a_true_ci_variable_alone_fails_too(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    pytester.makepyfile(NEEDS_A_BROKER)
    run(pytester).assert_outcomes(passed=1, errors=1)


def test_every_kind_of_skip_fails_but_an_xfail_stays_an_xfail(
    pytester: pytest.Pytester, clean_env: None
) -> None:
    pytester.makepyfile(
        test_kinds="""
        import sys
        import pytest

        @pytest.mark.skipif(sys.maxsize > 0, reason="marker says no")
        def test_marker():
            pass

        def test_in_body():
            pytest.skip("skipped in the body")

        @pytest.mark.xfail(reason="known", strict=True)
        def test_expected_failure():
            raise AssertionError
        """,
        test_module_level="""
        import pytest
        pytest.importorskip("tidegauge_no_such_module")

        def test_never_collected():
            pass
        """,
    )
    bare = run(pytester)
    bare.assert_outcomes(skipped=3, xfailed=1)
    strict = run(pytester, REQUIRE_ALL, "--continue-on-collection-errors")
    # the marker is judged at setup and the module-level skip at collection: both show as errors
    strict.assert_outcomes(failed=1, errors=2, xfailed=1)


def test_make_test_runs_pytest_with_require_all_and_nothing_from_the_environment() -> None:
    # `.ci/run` runs `make test`; the target's pytest call must carry the option and drop PYTEST_ADDOPTS
    # (which could deselect tests or disable the plugin) and PYTEST_PLUGINS.
    makefile = (REPO_ROOT / "Makefile").read_text()
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None
    [pytest_line] = [line for line in recipe.group(1).splitlines() if "/pytest" in line]
    assert pytest_line.split() == [
        "env", "-u", "PYTEST_ADDOPTS", "-u", "PYTEST_PLUGINS", "$(BIN)/pytest", REQUIRE_ALL,
    ]  # fmt: skip
    assert (REPO_ROOT / ".ci" / "run").read_text().rstrip().endswith("make test")


def test_the_suite_registers_the_plugin(pytestconfig: pytest.Config) -> None:
    # this very run has the option: the hooks are the conftest's
    assert pytestconfig.getoption(REQUIRE_ALL) in (True, False)
    conftest = pytestconfig.pluginmanager.get_plugin(str(REPO_ROOT / "tests" / "conftest.py"))
    assert (
        conftest is not None and conftest.pytest_runtest_makereport is dependencies.pytest_runtest_makereport
    )
