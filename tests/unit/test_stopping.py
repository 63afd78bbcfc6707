"""monitor.daemon.stopping in a real process: the deadline ends a process whose main thread never returns,
a second signal ends it at once, and :func:`leave` does not wait for a thread that never ends (issue 19).
The commands themselves are stopped in tests/hostile/test_stop.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from tests.conftest import REPO_ROOT

_PRELUDE = """
import logging, sys, threading, time
from monitor.daemon.stopping import StopSignals, leave
logging.basicConfig(level=logging.INFO, format="%(message)s")
"""


def _start(body: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _PRELUDE + textwrap.dedent(body)],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"  # the handlers are installed
    return proc


def test_the_deadline_ends_a_process_whose_main_thread_never_returns() -> None:
    proc = _start(
        """
        with StopSignals(deadline_s=1.0):
            print("ready", flush=True)
            time.sleep(120)  # a stop that never comes back
        """
    )
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "SIGTERM received: stopping (at most 1s)" in err
    assert "not stopped 1s after SIGTERM: exiting now, abandoning what is still running" in err


def test_a_second_signal_ends_the_process_at_once() -> None:
    proc = _start(
        """
        with StopSignals(deadline_s=100.0) as signals:
            print("ready", flush=True)
            signals.wait()
            print("stopping", flush=True)
            time.sleep(120)  # a stop that takes far too long
        """
    )
    assert proc.stdout is not None
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline() == "stopping\n"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "SIGINT received again: exiting now" in err


def test_leave_does_not_wait_for_a_thread_that_never_ends() -> None:
    proc = _start(
        """
        import atexit
        atexit.register(lambda: print("interpreter exit", file=sys.stderr, flush=True))
        threading.Thread(target=threading.Event().wait, name="poll flink").start()  # not a daemon thread
        print("ready", flush=True)
        sys.exit(leave(3))
        """
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert "exiting without waiting for 1 thread(s) still running: poll flink" in err
    assert "interpreter exit" not in err  # it did not go through the interpreter's exit (which would wait)


def test_leave_returns_when_nothing_is_left_running() -> None:
    proc = _start(
        """
        import atexit
        atexit.register(lambda: print("interpreter exit", file=sys.stderr, flush=True))
        threading.Thread(target=threading.Event().wait, daemon=True).start()  # a daemon thread is no reason
        print("ready", flush=True)
        sys.exit(leave(3))
        """
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert err == "interpreter exit\n"
