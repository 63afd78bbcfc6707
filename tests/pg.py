"""A real PostgreSQL server for tests, started from the installed binaries in a temporary directory.

Fixtures (registered in ``tests/conftest.py``):

- ``postgres_server`` (session scope): one server for the whole run, on a free loopback port, with
  ``trust`` authentication for the superuser ``postgres``; stopped with ``pg_ctl stop -m immediate`` and
  its directory removed at the end, also when tests fail.
- ``postgres_url`` (function scope): a fresh, empty database on that server, as a
  ``postgresql+psycopg://`` SQLAlchemy URL.

Binaries are looked up on ``PATH`` and then under ``/usr/lib/postgresql/<version>/bin`` (Debian's
``postgresql`` package; ``.ci/system-deps.sh`` installs it). PostgreSQL refuses to run as root, so when the
tests run as root the server runs as the ``postgres`` user (created by Debian's package) or, failing that,
``nobody``, via ``subprocess``'s ``user=``/``group=`` (no ``sudo``/``runuser`` needed); its temporary
directory is created in the system temp dir (not under pytest's root-only ``tmp_path``) and chowned to it.

If no binary is found the tests skip under a bare ``pytest`` and fail under ``make test``
(:func:`tests.dependencies.missing`).
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.dependencies import missing

__all__ = [
    "PostgresServer",
    "PostgresUnavailable",
    "find_postgres_bin",
    "postgres_server",
    "postgres_url",
    "start_postgres",
]

_DEBIAN_GLOB = "/usr/lib/postgresql/*/bin"
_TOOLS = ("initdb", "pg_ctl", "postgres")
_START_ATTEMPTS = 3


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries were found."""


@dataclass
class PostgresServer:
    """A running throw-away PostgreSQL server.

    Attributes:
        bin_dir: directory holding ``initdb``/``pg_ctl``/``postgres``.
        base_dir: temporary directory (data directory, Unix socket, log); removed by :meth:`stop`.
        port: TCP port on 127.0.0.1.
        startup_seconds: wall time initdb + start took (for the report; never asserted).
    """

    bin_dir: Path
    base_dir: Path
    port: int
    run_as: tuple[int, int] | None
    startup_seconds: float = 0.0
    _stopped: bool = field(default=False, repr=False)
    _options: str = field(default="", repr=False)

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "postgres.log"

    def url(self, database: str = "postgres") -> str:
        """SQLAlchemy URL of ``database`` on this server (superuser ``postgres``, no password)."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (default: a unique ``tg_<hex>`` name); return its SQLAlchemy URL."""
        import psycopg
        from psycopg import sql

        name = name or f"tg_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def log_tail(self, lines: int = 30) -> str:
        """The end of the server log (for failure messages)."""
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def halt(self) -> None:
        """Stop the server (``pg_ctl stop -m immediate``, a crash as clients see it), keeping its data: a
        test's "lost PostgreSQL"; :meth:`resume` starts it again on the same port."""
        _run(self, ["pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop"])

    def resume(self) -> None:
        """Start the server :meth:`halt` stopped, on the same port and data directory."""
        _run(self, ["pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file), "-o", self._options,
                    "-w", "-t", "60", "start"])  # fmt: skip

    def stop(self) -> None:
        """``pg_ctl stop -m immediate`` and remove the directory; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if (self.data_dir / "postmaster.pid").exists():
                _run(self, ["pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop"], check=False)
        finally:
            shutil.rmtree(self.base_dir, ignore_errors=True)


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.parent.name))


def find_postgres_bin(environ: Mapping[str, str]) -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    ``PATH`` first (symlinks resolved, so Debian's ``/usr/local/bin`` links lead to the real directory),
    then the newest ``/usr/lib/postgresql/<version>/bin``.

    Raises:
        PostgresUnavailable: none found.
    """
    found = shutil.which("pg_ctl", path=environ.get("PATH"))
    candidates: list[Path] = []
    if found:
        candidates.append(Path(found).resolve().parent)
    candidates.extend(sorted((Path(p) for p in glob.glob(_DEBIAN_GLOB)), key=_version_key, reverse=True))
    for directory in candidates:
        if all(os.access(directory / tool, os.X_OK) for tool in _TOOLS):
            return directory
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH or under "
        f"{_DEBIAN_GLOB}: install Debian's `postgresql` package (bash .ci/system-deps.sh)"
    )


def _unprivileged_user() -> tuple[int, int] | None:
    """(uid, gid) to run the server as when we are root; ``None`` when we are not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    raise PostgresUnavailable("running as root and neither user `postgres` nor `nobody` exists")


def _run(server: PostgresServer, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    tool = str(server.bin_dir / argv[0])
    env = {
        "PATH": f"{server.bin_dir}:/usr/bin:/bin",
        "LC_ALL": "C",
        "LANG": "C",
        "HOME": str(server.base_dir),
    }
    uid, gid = server.run_as if server.run_as is not None else (None, None)

    def spawn(extra_groups: list[int] | None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [tool, *argv[1:]],
            cwd=server.base_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            user=uid,
            group=gid,
            extra_groups=extra_groups,
        )

    if uid is None:
        result = spawn(None)
    else:
        try:
            result = spawn([])  # drop root's supplementary groups
        except PermissionError:  # setgroups() not allowed (some containers): keep them, still not root
            result = spawn(None)
    if check and result.returncode != 0:
        raise RuntimeError(
            f"{argv[0]} failed with exit code {result.returncode}:\n{result.stdout}\n{result.stderr}\n"
            f"server log:\n{server.log_tail()}"
        )
    return result


def _searchable_tmp(other_user: bool) -> str:
    """The temp dir, or ``/tmp`` when another user could not reach the temp dir (e.g. TMPDIR under /root)."""
    tmp = Path(tempfile.gettempdir()).resolve()
    if other_user and not all(p.stat().st_mode & stat.S_IXOTH for p in (tmp, *tmp.parents)):
        return "/tmp"  # a fresh private directory (mode 0700) is created inside with mkdtemp
    return str(tmp)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_postgres(environ: Mapping[str, str]) -> PostgresServer:
    """initdb + start a server in a new temporary directory; the caller must call ``stop()``.

    Raises:
        PostgresUnavailable: no binaries (see :func:`find_postgres_bin`).
        RuntimeError: initdb or start failed (the message holds their output and the server log).
    """
    bin_dir = find_postgres_bin(environ)
    run_as = _unprivileged_user()
    started = time.monotonic()
    base_dir = Path(tempfile.mkdtemp(prefix="tidegauge-pg-", dir=_searchable_tmp(run_as is not None)))
    server = PostgresServer(bin_dir=bin_dir, base_dir=base_dir, port=0, run_as=run_as)
    try:
        if run_as is not None:
            os.chown(base_dir, *run_as)
        initdb_flags = ["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"]
        _run(server, ["initdb", "-D", str(server.data_dir), *initdb_flags])
        for attempt in range(_START_ATTEMPTS):
            server.port = _free_port()
            options = (
                # TCP on loopback only; no Unix socket (Debian's default socket dir may be missing, and a
                # long TMPDIR would overflow the socket path limit).
                f"-p {server.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            )
            server._options = options
            start = ["pg_ctl", "-D", str(server.data_dir), "-l", str(server.log_file), "-o", options]
            result = _run(server, [*start, "-w", "-t", "60", "start"], check=attempt == _START_ATTEMPTS - 1)
            if result.returncode == 0:
                break
            # Most likely another process took the port between _free_port() and the bind: retry.
        server.startup_seconds = time.monotonic() - started
        return server
    except BaseException:
        server.stop()
        raise


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the whole test session (see module docstring)."""
    try:
        server = start_postgres(os.environ)
    except PostgresUnavailable as exc:
        missing("a PostgreSQL server", str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh empty database on the session's server, as a SQLAlchemy URL."""
    return postgres_server.create_database()
