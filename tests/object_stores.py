"""GCS and Azure Blob emulators on loopback for tests: ``gcp-storage-emulator`` (PyPI, in the ``dev`` extra)
and Azurite (npm ``azurite``, installed by :func:`azurite_dir` into a cache with ``npm``), each in its own
process. S3 is tests/s3_server.py. Not a test module.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

AZURITE_VERSION = "3.37.0"
#: Azurite's well-known development account (public, documented by Microsoft; not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _wait(url: str, process: subprocess.Popen[bytes], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.1)


def stop_process(process: subprocess.Popen[bytes], timeout_s: float = 3.0) -> None:
    """SIGTERM ``process``, wait up to ``timeout_s`` seconds, then SIGKILL it (a test server's teardown)."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def gcs_emulator() -> Iterator[dict[str, str]]:
    """``gcp-storage-emulator`` in memory on a free port; yields the environment gcsfs needs
    (``STORAGE_EMULATOR_HOST``, and gcsfs's gRPC-only experimental features off: the emulator speaks JSON).

    Raises:
        ModuleNotFoundError: the emulator is not installed. RuntimeError: it did not start.
    """
    import gcp_storage_emulator  # noqa: F401 - fail early when missing

    port = _free_port()
    exe = Path(sys.executable).with_name("gcp-storage-emulator")
    process = subprocess.Popen(
        [str(exe), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait(f"http://127.0.0.1:{port}/storage/v1/b", process, "gcp-storage-emulator")
        yield {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    finally:
        stop_process(process)


def azurite_dir() -> Path:
    """Azurite installed from npm into ``~/.cache/tidegauge-test/azurite`` (once).

    Raises:
        FileNotFoundError: ``npm`` is missing. subprocess.CalledProcessError: the install failed.
    """
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tidegauge-test" / "azurite"
    main = root / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
    if not main.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise FileNotFoundError("npm")
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run([npm, "install", "--no-audit", "--no-fund", f"azurite@{AZURITE_VERSION}"], cwd=root, check=True,
                       stdout=subprocess.DEVNULL)
    return root


@contextmanager
def azurite(workdir: Path) -> Iterator[str]:
    """Azurite's blob service on a free port (data under ``workdir``); yields its connection string.

    Raises:
        FileNotFoundError: node or npm is missing. RuntimeError: it did not start.
    """
    node = shutil.which("node")
    if node is None:
        raise FileNotFoundError("node")
    root = azurite_dir()
    port = _free_port()
    process = subprocess.Popen(
        [node, str(root / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"),
         "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(workdir), "--skipApiVersionCheck",
         "--loose", "--silent"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait(f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}?comp=list", process, "Azurite")
        yield (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};"
        )
    finally:
        stop_process(process)
