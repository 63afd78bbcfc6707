"""Jars from Maven Central for the tests' JVM services, resolved once per machine into a cache.

A test service names its artifacts in a small ``pom.xml`` under ``tests/`` (``tests/kafka/pom.xml``,
``tests/hdfs/pom.xml``); :func:`copy_dependencies` runs ``mvn dependency:copy-dependencies`` on it into a
temporary directory next to the cache entry and renames that into place, so a half-finished download never
counts and two runs racing each other both end with one complete directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["MavenUnavailable", "cache_root", "copy_dependencies"]

RESOLVE_TIMEOUT_S = 900


class MavenUnavailable(RuntimeError):
    """``mvn`` is not installed, or the artifacts did not resolve (Maven's output is in the message)."""


def cache_root() -> Path:
    """``~/.cache/tidegauge`` (or the parent of ``$TIDEGAUGE_KAFKA_CACHE``, which moves every jar cache)."""
    env = os.environ.get("TIDEGAUGE_KAFKA_CACHE")
    return Path(env).parent if env else Path.home() / ".cache" / "tidegauge"


def copy_dependencies(pom: Path, lib: Path, expect: str, properties: Mapping[str, str] | None = None) -> Path:
    """``lib`` holding the runtime jars of ``pom`` (resolved by Maven on first use; reused afterwards).

    Args:
        pom: the ``pom.xml`` naming the artifacts.
        lib: the cache directory to fill (``<cache>/<service>/<version>/lib``).
        expect: the file name of one jar that must be there when the resolution worked (the service's own).
        properties: ``-Dkey=value`` pairs for the pom (a version).

    Raises:
        MavenUnavailable: ``mvn`` is missing or the resolution failed.
    """
    if (lib / expect).is_file():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenUnavailable("mvn (Maven) is not installed: .ci/system-deps.sh installs it")
    lib.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="lib-", dir=lib.parent))
    defines = [f"-D{key}={value}" for key, value in (properties or {}).items()]
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", *defines,
         f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"],
        capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, check=False,
    )
    if proc.returncode != 0 or not (tmp / expect).is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        raise MavenUnavailable(
            f"mvn dependency:copy-dependencies -f {pom} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    try:
        tmp.rename(lib)
    except OSError:  # another run finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return lib
