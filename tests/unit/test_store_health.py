"""monitor.store.check_store: the store's part of /healthz, shared by the daemon (Runtime.health) and
``tidegauge serve``. It runs a real query, and reports a removed SQLite file or an unreachable server as
unreachable with one line of reason, the password hidden."""

from __future__ import annotations

from pathlib import Path

from monitor.store import Store, check_store, make_engine, make_session_factory
from tests.servers import refused_port


def test_a_working_store_is_ok(store: Store) -> None:
    assert check_store(store.sessions) == (True, {"store": "ok"})


def test_a_removed_sqlite_file_is_unreachable_although_a_pooled_connection_still_answers(
    tmp_path: Path, store: Store
) -> None:
    path = tmp_path / "tg.db"  # the `store` fixture's file
    assert check_store(store.sessions)[0] is True  # a connection is now pooled, holding the file open
    path.unlink()
    assert check_store(store.sessions) == (
        False,
        {"store": "unreachable", "store_error": f"no database at {path}"},
    )


def test_an_unreachable_postgresql_server_is_unreachable_without_its_password() -> None:
    port = refused_port()
    engine = make_engine(f"postgresql+psycopg://tg:pw-must-not-show@127.0.0.1:{port}/tidegauge", connect_args={"connect_timeout": 5})
    try:
        ok, body = check_store(make_session_factory(engine))
    finally:
        engine.dispose()
    assert ok is False and body["store"] == "unreachable"
    assert body["store_error"].startswith("OperationalError: connection failed: ")
    assert f"port {port} failed: Connection refused" in body["store_error"]
    assert "pw-must-not-show" not in str(body) and "\n" not in body["store_error"]
