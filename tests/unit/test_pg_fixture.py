"""How tests/pg.py finds PostgreSQL and what happens when it cannot (tests/dependencies.py decides between skip and failure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import pg


def _fake_bin(directory: Path) -> Path:
    directory.mkdir(parents=True)
    for tool in ("initdb", "pg_ctl", "postgres"):
        (directory / tool).write_text("#!/bin/sh\nexit 1\n")
        (directory / tool).chmod(0o755)
    return directory


def test_missing_binaries_are_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg, "_DEBIAN_GLOB", str(tmp_path / "lib" / "*" / "bin"))
    with pytest.raises(pg.PostgresUnavailable, match="install Debian's `postgresql` package"):
        pg.find_postgres_bin({"PATH": str(tmp_path)})


def test_newest_debian_version_is_chosen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 15 > 9 numerically (a string sort would pick 9).
    _fake_bin(tmp_path / "lib" / "9" / "bin")
    newest = _fake_bin(tmp_path / "lib" / "15" / "bin")
    monkeypatch.setattr(pg, "_DEBIAN_GLOB", str(tmp_path / "lib" / "*" / "bin"))
    assert pg.find_postgres_bin({"PATH": str(tmp_path / "empty")}) == newest


def test_path_wins_and_symlinks_are_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = _fake_bin(tmp_path / "lib" / "16" / "bin")
    links = tmp_path / "local-bin"
    links.mkdir()
    (links / "pg_ctl").symlink_to(real / "pg_ctl")
    monkeypatch.setattr(pg, "_DEBIAN_GLOB", str(tmp_path / "none" / "*" / "bin"))
    assert pg.find_postgres_bin({"PATH": str(links)}) == real
