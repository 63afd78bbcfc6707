"""``make fuzz``: mutate recorded inputs through every parser family and count unexpected exceptions and hangs.

Usage::

    python -m tests.fuzz.run [--families eventlog,progress,...] [--count 1000000] [--seconds S] [--seed 0]
                             [--hang-seconds 5] [--corpus tests/fuzz/corpus] [--report FILE]

``--seconds`` stops each family after that long (the figures give the inputs actually run).

Each family's target (:mod:`tests.fuzz.targets`) is wrapped in a Hypothesis test over
:func:`tests.fuzz.mutate.mutated` inputs and driven with :meth:`fuzz_one_input` from a seeded random byte
stream (Hypothesis's interface for external fuzz drivers: no shrinking, no example database), so a run
of ``--count`` inputs is reproducible from ``--seed``. An exception other than the family's contract
(``InputError``) is a *crash*; an input using more than ``--hang-seconds`` of CPU time is a *hang*
(interrupted by ``ITIMER_PROF``/``SIGPROF``: CPU time, so a busy shared machine does not fake hangs). The first inputs of each distinct crash (exception type and raising line) are written
to ``<corpus>/<family>/`` for the regression test (``tests/unit/test_fuzz_corpus.py``) to replay.
Prints per family: inputs, crashes, hangs, distinct crash signatures, inputs per second.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import signal
import sys
import time
import traceback
from pathlib import Path
from types import FrameType
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzz.mutate import mutated
from tests.fuzz.targets import FAMILIES, Family

CORPUS = Path(__file__).resolve().parent / "corpus"
PREFIXES = {"eventlog": (b"", b"I", b"Z", b"R"), "whatif": (b"C", b"J")}
KEEP_PER_SIGNATURE = 2


class Hang(BaseException):
    """Raised by the CPU-time alarm in an input that ran too long (a BaseException: targets' handlers miss it)."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang()


def _signature(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/tests/fuzz/" not in f.filename and "hypothesis" not in f.filename]
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{type(exc).__name__} at {where}"


def fuzz_family(
    family: Family, count: int, seed: int, hang_seconds: float, corpus: Path | None, seconds: float | None = None
) -> dict[str, Any]:
    """Run ``count`` inputs (or as many as fit in ``seconds``) through ``family``; returns the figures (and
    writes crashes to ``corpus``)."""
    last: dict[str, bytes] = {}

    @settings(
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        max_examples=1,
    )
    @given(mutated(family.seeds(), json_like=family.json_like, prefixes=PREFIXES.get(family.name, (b"",))))
    def one(data: bytes) -> None:
        last["data"] = data
        family.target(data)

    rng = random.Random(seed)
    signatures: dict[str, int] = {}
    crashes = hangs = 0
    started = time.monotonic()
    fuzz = one.hypothesis.fuzz_one_input  # type: ignore[attr-defined]
    previous = signal.signal(signal.SIGPROF, _on_alarm)
    done = 0
    stop_at = started + seconds if seconds else None
    try:
        for i in range(count):
            if stop_at is not None and i % 100 == 0 and time.monotonic() > stop_at:
                break
            done = i + 1
            buffer = rng.randbytes(rng.choice((64, 256, 1024)))
            last.pop("data", None)
            signal.setitimer(signal.ITIMER_PROF, hang_seconds)
            try:
                fuzz(buffer)
            except Hang:
                hangs += 1
                _keep(corpus, family, "hang", last.get("data"), signatures)
            except Exception as exc:
                crashes += 1
                _keep(corpus, family, _signature(exc), last.get("data"), signatures)
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
            if (i + 1) % 20000 == 0:
                rate = (i + 1) / (time.monotonic() - started)
                print(f"  {family.name}: {i + 1} inputs, {crashes} crashes, {hangs} hangs ({rate:.0f}/s)", flush=True)
    finally:
        signal.signal(signal.SIGPROF, previous)
    elapsed = time.monotonic() - started
    return {
        "family": family.name,
        "inputs": done,
        "crashes": crashes,
        "hangs": hangs,
        "signatures": signatures,
        "seconds": round(elapsed, 1),
        "inputs_per_second": round(done / elapsed, 1) if elapsed else None,
        "seed": seed,
    }


def _keep(corpus: Path | None, family: Family, signature: str, data: bytes | None, seen: dict[str, int]) -> None:
    seen[signature] = seen.get(signature, 0) + 1
    if corpus is None or data is None or seen[signature] > KEEP_PER_SIGNATURE:
        return
    folder = corpus / family.name
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(data).hexdigest()[:16]
    (folder / f"{name}.bin").write_bytes(data)
    print(f"  {family.name}: new crash {signature}: {folder / name}.bin", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the families; exit code 1 when any input crashed or hung."""
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated (default: all)")
    parser.add_argument("--count", type=int, default=1_000_000, help="inputs per family")
    parser.add_argument("--seconds", type=float, help="stop each family after this long")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hang-seconds", type=float, default=5.0)
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="where crashing inputs are written")
    parser.add_argument("--no-corpus", action="store_true", help="do not write crashing inputs")
    parser.add_argument("--report", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    sys.set_int_max_str_digits(4300)  # the interpreter's default, whatever the environment says
    results = []
    for name in args.families.split(","):
        family = FAMILIES[name.strip()]
        print(f"{family.name}: {args.count} inputs (seed {args.seed})", flush=True)
        corpus = None if args.no_corpus else args.corpus
        result = fuzz_family(family, args.count, args.seed, args.hang_seconds, corpus, args.seconds)
        results.append(result)
        print(json.dumps(result), flush=True)
    if args.report:
        args.report.write_text(json.dumps(results, indent=1) + "\n")
    print("\nfamily      inputs  crashes  hangs  inputs/s")
    for r in results:
        print(f"{r['family']:<10} {r['inputs']:>8} {r['crashes']:>8} {r['hangs']:>6} {r['inputs_per_second']:>9}")
    return 1 if any(r["crashes"] or r["hangs"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
