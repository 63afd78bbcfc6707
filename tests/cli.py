"""Run the ``tidegauge`` CLI in-process, as the console script would, and capture what it printed."""

from __future__ import annotations

import pytest

from monitor.cli import main


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``tidegauge ARGV``: returns (exit code, stdout, stderr).

    ``main`` always ends in ``SystemExit`` (Typer's standalone mode, and our own exit codes 2/3); a run
    that returned without one fails the test.
    """
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 0), out, err
