"""One fuzz worker: one parser family under atheris (libFuzzer), started by :mod:`tests.fuzz.run`.

Usage::

    python -m tests.fuzz.worker FAMILY --stats FILE [--count N] [--seconds S] [--hang-seconds 5]
                                [--corpus DIR] [--instrument ours|none] -- LIBFUZZER_ARGS... CORPUS_DIRS...

Our packages (``monitor``, ``collectors``, ``rules``) are imported under atheris's import hook (what
:func:`atheris.instrument_imports` sets up, here without comparison tracing: ``--instrument dataflow``
adds it), so libFuzzer's coverage feedback comes from their branches; third-party code and the shared
core the storable check runs (:data:`NOT_INSTRUMENTED`) are not instrumented: that would cost speed for
coverage of code the parsers do not own. libFuzzer's inputs are mutated by
:func:`mutator`: libFuzzer's own mutations (:func:`atheris.Mutate`) or :func:`tests.fuzz.mutate.mutate`'s
hostile tokens and structural JSON mutations, on a corpus entry or a recorded seed, chosen by a
:class:`random.Random` of libFuzzer's per-mutation seed (a run is reproducible from ``-seed``).

The callback catches what the family's target raises, so libFuzzer keeps going: an exception is a
*crash* (signature: exception type and raising line in our code), an input using more than
``--hang-seconds`` of CPU time is a *hang* (``ITIMER_PROF``: CPU time, so a busy shared machine does not
fake hangs; libFuzzer's wall-clock ``-timeout`` stays a backstop for code Python cannot interrupt). The
first inputs of each signature go to ``<corpus>/<family>/``. The figures (inputs, crashes, hangs,
signatures) are written to ``--stats`` as JSON every second and on the last input (libFuzzer's
``exit()`` skips Python's ``atexit``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import atheris
from atheris.import_hook import HookManager

from tests.fuzz.mutate import mutate

OUR_PACKAGES = {"monitor", "collectors", "rules"}
#: Shared-core modules the storable check calls for every sample: instrumenting them cost a third of
#: eventlog's speed for coverage that says nothing about the parsers.
NOT_INSTRUMENTED = {"monitor.model", "monitor.store.keys", "monitor.errors"}
PREFIXES = {
    "eventlog": (b"", b"I", b"Z", b"R"),
    "whatif": (b"C", b"J"),
    "flink_rest": (b"O", b"J", b"R", b"C", b"E", b"L", b"V"),
    "flink_reporter": (b"J", b"T"),
    "burrow": (b"P", b"H"),
}
KEEP_PER_SIGNATURE = 2
STATS_EVERY_SECONDS = 1.0


class Hang(BaseException):
    """Raised by the CPU-time alarm in an input that ran too long (a BaseException: targets' handlers miss it)."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang()


def signature(exc: BaseException) -> str:
    """``"<ExceptionType> at <file>:<line>"``: the innermost frame outside the fuzz harness."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/tests/fuzz/" not in f.filename]
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{type(exc).__name__} at {where}"


def keep_input(folder: Path | None, data: bytes) -> Path | None:
    """Write ``data`` to ``folder`` as ``<sha256 prefix>.bin`` (the corpus replayed by ``make test``)."""
    if folder is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:16]}.bin"
    path.write_bytes(data)
    return path


class Worker:
    """Counts and records what one family's target does with each input (see the module docstring)."""

    def __init__(self, family: str, target: Callable[[bytes], None], args: argparse.Namespace) -> None:
        self.family, self.target = family, target
        self.count, self.seconds, self.hang_seconds = args.count, args.seconds, args.hang_seconds
        self.stats_path: Path = args.stats
        self.corpus: Path | None = args.corpus / family if args.corpus else None
        self.inputs = self.crashes = self.hangs = 0
        self.signatures: dict[str, int] = {}
        self.started = time.monotonic()
        self.flushed = self.started

    def __call__(self, data: bytes) -> None:
        self.inputs += 1
        signal.setitimer(signal.ITIMER_PROF, self.hang_seconds)
        try:
            try:
                self.target(data)
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
        except Hang:
            self.hangs += 1
            self._record("hang", data)
        except Exception as exc:
            self.crashes += 1
            self._record(signature(exc), data)
        if self.inputs == self.count:
            self.flush()
        elif self.inputs % 128 == 0:
            now = time.monotonic()
            if self.seconds is not None and now - self.started >= self.seconds:
                self.flush()
                os._exit(0)  # libFuzzer's -max_total_time would end the run between our flushes
            if now - self.flushed >= STATS_EVERY_SECONDS:
                self.flush()

    def _record(self, sig: str, data: bytes) -> None:
        self.signatures[sig] = self.signatures.get(sig, 0) + 1
        if self.signatures[sig] <= KEEP_PER_SIGNATURE and (path := keep_input(self.corpus, data)):
            print(f"  {self.family}: new crash {sig}: {path}", flush=True)

    def flush(self) -> None:
        """Write the figures so far to the stats file (atomically)."""
        self.flushed = time.monotonic()
        figures = {
            "family": self.family,
            "inputs": self.inputs,
            "crashes": self.crashes,
            "hangs": self.hangs,
            "signatures": self.signatures,
            "seconds": round(self.flushed - self.started, 1),
        }
        part = self.stats_path.with_suffix(".part")
        part.write_text(json.dumps(figures))
        part.replace(self.stats_path)


def make_mutator(seeds: list[bytes], json_like: bool, prefixes: tuple[bytes, ...]) -> Callable[[bytes, int, int], bytes]:
    """libFuzzer's custom mutator: 3 in 8 libFuzzer's own mutations, else :func:`mutate` of the corpus
    entry (4 in 8) or of a recorded seed (1 in 8); cut to ``max_size``."""

    def mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        choice = rng.randrange(8)
        if choice < 3:
            return bytes(atheris.Mutate(data, max_size))
        base = data if choice < 7 else seeds[rng.randrange(len(seeds))]
        return mutate(base, rng.randrange, json_like=json_like, prefixes=prefixes)[:max_size]

    return mutator


def main() -> None:
    """Set up the family's target under atheris and fuzz (never returns: libFuzzer exits)."""
    ours, libfuzzer = _split(sys.argv[1:])
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.worker")
    parser.add_argument("family")
    parser.add_argument("--stats", type=Path, required=True)
    parser.add_argument("--count", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--hang-seconds", type=float, default=5.0)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--instrument", choices=("branches", "dataflow", "none"), default="branches")
    args = parser.parse_args(ours)
    sys.set_int_max_str_digits(4300)  # the interpreter's default, whatever the environment says
    if args.instrument == "none":
        family = _load(args.family)
    else:
        # atheris.instrument_imports, without its comparison tracing unless asked (--instrument dataflow)
        with HookManager(OUR_PACKAGES, NOT_INSTRUMENTED, True, trace_dataflow=args.instrument == "dataflow"):
            family = _load(args.family)
    worker = Worker(family.name, family.target, args)
    signal.signal(signal.SIGPROF, _on_alarm)
    mutator = make_mutator(family.seeds(), family.json_like, PREFIXES.get(family.name, (b"",)))
    atheris.Setup([sys.argv[0], *libfuzzer], worker, custom_mutator=mutator)
    worker.flush()
    atheris.Fuzz()


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """Our arguments, and libFuzzer's (after ``--``)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def _load(name: str) -> Any:
    """The family, its modules imported (each seed run once: the targets import their parser lazily)."""
    from tests.fuzz.targets import FAMILIES

    family = FAMILIES[name]
    for seed in family.seeds():
        family.target(seed)
    return family


if __name__ == "__main__":
    main()
