"""Compiles and runs ``FlinkHarness.java`` against the PyPI Flink distribution, in one JVM.

The jars come from ``apache-flink-libraries`` (``pyflink/lib/flink-dist-*.jar`` and friends); the
harness is compiled with the JDK's ``javac`` into a cache directory keyed by the source's hash.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.differential.flink.scenarios import FlinkScenario, harness_text

__all__ = ["FlinkResult", "HarnessError", "compile_harness", "flink_lib_dir", "run_flink"]

_SOURCE = Path(__file__).with_name("FlinkHarness.java")


class HarnessError(RuntimeError):
    """The harness could not be built or run (the message says why)."""


@dataclass
class FlinkResult:
    """What real Flink did in one scenario."""

    firings: list[tuple[int, int, int, int, int, bool]] = field(
        default_factory=list
    )  # key,start,end,count,wm,late
    side_output_rows: list[int] = field(default_factory=list)
    late_records_dropped: int | None = None
    error: str | None = None


def flink_lib_dir() -> Path:
    """``pyflink/lib`` of the installed apache-flink-libraries.

    Raises:
        HarnessError: pyflink or flink-dist is not installed.
    """
    spec = importlib.util.find_spec("pyflink")
    if spec is None or not spec.submodule_search_locations:
        raise HarnessError(
            "pyflink is not installed: pip install --no-deps apache-flink apache-flink-libraries"
        )
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    if not list(lib.glob("flink-dist-*.jar")):
        raise HarnessError(f"no flink-dist jar in {lib}: install apache-flink-libraries")
    return lib


def compile_harness(cache_root: Path | None = None) -> Path:
    """Compile the harness (once per source and Flink version); returns the class directory.

    Raises:
        HarnessError: no ``javac``, no Flink jars, or the compilation failed.
    """
    lib = flink_lib_dir()
    dist = sorted(p.name for p in lib.glob("flink-dist-*.jar"))
    digest = hashlib.sha256(_SOURCE.read_bytes() + "\n".join(dist).encode()).hexdigest()[:16]
    root = cache_root or Path(tempfile.gettempdir()) / f"tidegauge-flink-harness-{os.getuid()}"
    out = root / digest
    if (out / "FlinkHarness.class").exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise HarnessError("javac not found: install a JDK (openjdk-17-jdk-headless)")
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root))
    proc = subprocess.run(
        [javac, "-nowarn", "-d", str(tmp), "-cp", f"{lib}/*", str(_SOURCE)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise HarnessError(f"javac failed:\n{proc.stderr[-4000:]}")
    services = tmp / "META-INF" / "services"
    services.mkdir(parents=True)
    (services / "org.apache.flink.metrics.reporter.MetricReporterFactory").write_text(
        "FlinkHarness$CaptureReporterFactory\n"
    )
    try:
        tmp.rename(out)
    except OSError:  # another process compiled it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def run_flink(
    scenarios: list[FlinkScenario], *, chunk: int = 25, timeout_s: float = 900
) -> dict[str, FlinkResult]:
    """Run all ``scenarios`` through real Flink in one JVM (one job per ``chunk`` scenarios).

    Raises:
        HarnessError: the JVM failed or printed something unexpected.
    """
    classes = compile_harness()
    java = shutil.which("java")
    if java is None:
        raise HarnessError("java not found")
    with tempfile.TemporaryDirectory() as d:
        inp = Path(d) / "scenarios.txt"
        inp.write_text(harness_text(scenarios))
        proc = subprocess.run(
            [
                java,
                "-Xmx1g",
                "-XX:+UseSerialGC",
                "-Dlog4j2.level=WARN",
                "-cp",
                f"{classes}:{flink_lib_dir()}/*",
                "FlinkHarness",
                str(inp),
                str(chunk),
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            cwd=d,
        )
    results: dict[str, FlinkResult] = {sc.id: FlinkResult() for sc in scenarios}
    seen: set[str] = set()
    for line in proc.stdout.splitlines():
        f = line.split(" ", 2)
        tag = f[0]
        if tag == "F":
            p = line.split()
            results[p[1]].firings.append((int(p[2]), int(p[3]), int(p[4]), int(p[5]), int(p[6]), p[7] == "1"))
        elif tag == "L":
            results[f[1]].side_output_rows.append(int(f[2]))
        elif tag == "D":
            results[f[1]].late_records_dropped = int(f[2])
        elif tag == "X":
            results[f[1]].error = f[2] if len(f) > 2 else "failed"
            seen.add(f[1])
        elif tag == "OK":
            seen.add(f[1])
    missing = [sc.id for sc in scenarios if sc.id not in seen]
    if missing:
        raise HarnessError(
            f"the Flink harness did not finish {len(missing)} scenarios (exit {proc.returncode}):\n"
            f"{proc.stderr[-3000:]}"
        )
    return results
