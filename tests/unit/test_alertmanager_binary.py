"""The real-Alertmanager test must fail, not skip, in CI when the binary is missing."""

from __future__ import annotations

import shutil

import pytest

from tests.alerting import alertmanager_binary


def test_missing_binary_fails_in_ci_and_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    with pytest.raises(pytest.fail.Exception, match="prometheus-alertmanager"):
        alertmanager_binary({"CI": "true"})
    with pytest.raises(pytest.skip.Exception):
        alertmanager_binary({})


def test_debian_name_is_found_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    assert alertmanager_binary({"CI": "true"}) == "/usr/bin/prometheus-alertmanager"
