"""Finding the real Alertmanager; a missing binary is a dependency skip that ``make test`` turns into a
failure (tests/unit/test_dependencies.py proves that conversion)."""

from __future__ import annotations

import shutil

import pytest

from tests.alerting import alertmanager_binary


def test_a_missing_binary_names_the_package_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    with pytest.raises(
        pytest.skip.Exception, match=r"Alertmanager .* is missing: apt-get install prometheus-alertmanager"
    ):
        alertmanager_binary()


def test_debian_name_is_found_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    assert alertmanager_binary() == "/usr/bin/prometheus-alertmanager"
