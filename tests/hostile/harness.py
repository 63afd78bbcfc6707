"""Run a command against a hostile input in a subprocess and measure what it cost (issue 19).

The tests in this folder assert *outcomes* (a named error, the other targets' data kept, the process gone
after SIGTERM). Time and memory are *measured* here, per case, and appended to a report that
``tests/benchmarks/bench_hostile.py`` prints against each case's bounds: speed and memory are judged by a
benchmark, never by a timed assertion in the suite.

Peak memory is the child's own high-water mark, ``VmHWM`` of ``/proc/<pid>/status``, read while it runs
(the last reading before it exits; a high-water mark only grows). ``ru_maxrss`` from :func:`os.wait4` is
only the fallback (no ``/proc``): Linux carries the parent's peak over into the child at fork and exec, so it
is never below the test process's own RSS. Each case is measured in a process of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.conftest import REPO_ROOT

__all__ = ["REPORT_ENV", "Measured", "record", "run_measured", "tidegauge_argv"]

#: Environment variable naming a JSON-lines file each measured case is appended to (set by the benchmark).
REPORT_ENV = "TIDEGAUGE_HOSTILE_REPORT"
#: Seconds after which a case's process is killed outright: a guard so a hung case cannot hang the suite,
#: not an assertion about speed (the case's own deadline is judged in the report).
KILL_AFTER_S = 120.0


@dataclass(frozen=True)
class Measured:
    """What one run cost and how it ended.

    Attributes:
        returncode: the exit status (negative: killed by that signal).
        wall_s: seconds from start to exit.
        peak_rss_mib: peak resident memory of the process (its ``VmHWM``), MiB.
        stdout / stderr: the output, decoded as UTF-8 with replacement.
        killed: ``True`` when the guard of :data:`KILL_AFTER_S` (or ``kill_after_s``) had to kill it.
        stop_s: seconds from SIGTERM to exit when ``terminate_after_s`` was given, else ``None``.
    """

    returncode: int
    wall_s: float
    peak_rss_mib: float
    stdout: str
    stderr: str
    killed: bool
    stop_s: float | None


def tidegauge_argv(*args: str) -> list[str]:
    """``[python, -m, monitor.cli, *args]`` with this interpreter (the repository under test)."""
    return [sys.executable, "-m", "monitor.cli", *args]


def run_measured(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    terminate_after_s: float | None = None,
    terminate_when: Callable[[], bool] | None = None,
    kill_after_s: float = KILL_AFTER_S,
) -> Measured:
    """Run ``argv`` to its end (or SIGTERM it) and measure it.

    Args:
        argv: the command.
        env: extra environment variables (added to this process's environment, ``PYTHONPATH`` set to the
            repository so the code under test is imported).
        cwd: working directory (default the repository root).
        terminate_after_s: send SIGTERM this many seconds after start (a long-running command: ``run``,
            ``serve``, ``dashboard``); ``stop_s`` then says how long it took to exit.
        terminate_when: instead of (or before) ``terminate_after_s``: send SIGTERM once this probe returns
            ``True`` (polled every 0.1 s).
        kill_after_s: the guard: SIGKILL the process group after this many seconds in all.

    Returns:
        :class:`Measured`.
    """
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd or REPO_ROOT,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out_chunks: list[bytes] = []
    err_chunks: list[bytes] = []
    readers = [
        threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True),  # type: ignore[union-attr]
    ]
    for reader in readers:
        reader.start()
    termed_at: float | None = None
    killed = False
    hwm_kib = 0
    while True:
        hwm_kib = max(hwm_kib, _vm_hwm_kib(proc.pid))
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        now = time.monotonic()
        if termed_at is None and (
            (terminate_after_s is not None and now - start >= terminate_after_s)
            or (terminate_when is not None and terminate_when())
        ):
            proc.send_signal(signal.SIGTERM)
            termed_at = now
        if now - start >= kill_after_s and not killed:
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
        time.sleep(0.05)
    end = time.monotonic()
    for reader in readers:
        reader.join(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Measured(
        returncode=proc.returncode,
        wall_s=end - start,
        peak_rss_mib=(hwm_kib or rusage.ru_maxrss) / 1024,
        stdout=b"".join(out_chunks).decode("utf-8", "replace"),
        stderr=b"".join(err_chunks).decode("utf-8", "replace"),
        killed=killed,
        stop_s=None if termed_at is None else end - termed_at,
    )


def _vm_hwm_kib(pid: int) -> int:
    """``VmHWM`` (peak resident set, KiB) of a running process, 0 when unknown (no ``/proc``, exited)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def record(case: str, measured: Measured, *, deadline_s: float, rss_bound_mib: float = 300.0) -> None:
    """Append ``case``'s figures and bounds to the report named by :data:`REPORT_ENV` (no-op when unset).

    Args:
        case: a stable name (``"flink rest: 500 MB body"``).
        measured: the run.
        deadline_s: the time the case must end (or stop after SIGTERM) within, seconds.
        rss_bound_mib: the memory it must stay under, MiB.
    """
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    row = {
        "case": case,
        "deadline_s": deadline_s,
        "rss_bound_mib": rss_bound_mib,
        **{k: v for k, v in asdict(measured).items() if k not in ("stdout", "stderr")},
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
