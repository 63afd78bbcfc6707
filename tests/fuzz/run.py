"""``make fuzz``: mutate recorded inputs through every parser family under atheris (libFuzzer) and count
unexpected exceptions and hangs.

Usage::

    python -m tests.fuzz.run [--families eventlog,progress,...] [--count 1000000] [--seconds S] [--seed 0]
                             [--jobs 2] [--hang-seconds 5] [--corpus tests/fuzz/corpus] [--report FILE]
                             [--work-dir DIR]

Each family runs in its own worker process (:mod:`tests.fuzz.worker`), ``--jobs`` at a time (one per
core), until ``--count`` inputs (libFuzzer's ``-runs``) or ``--seconds``. A worker starts from the
family's recorded seeds (:mod:`tests.fuzz.targets`), written to ``<work-dir>/<family>/seeds`` as
libFuzzer's initial corpus, with libFuzzer's ``-seed`` = ``--seed`` + 1 (0 means "random" to libFuzzer),
so a run is reproducible from ``--seed``. The worker counts crashes (unexpected exceptions) and hangs
(more than ``--hang-seconds`` of CPU) itself and keeps going; should libFuzzer end a worker anyway (its
wall-clock ``-timeout`` of 4 x ``--hang-seconds``, ``-rss_limit_mb``, a signal), the input it saved
(``crash-*``, ``timeout-*``, ``oom-*``) counts as a crash or hang, goes to the corpus, and the worker is
started again (next libFuzzer seed) for the remaining inputs. Crashing inputs go to ``<corpus>/<family>/``
for ``make test`` to replay (``tests/unit/test_fuzz_corpus.py``); libFuzzer's own output goes to
``<work-dir>/<family>.log``. Prints per family: inputs, crashes, hangs, distinct crash signatures,
inputs per second, wall time; ``--report`` also writes them (and the commands) as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz.targets import FAMILIES
from tests.fuzz.worker import PREFIXES, keep_input

CORPUS = Path(__file__).resolve().parent / "corpus"
ROOT = Path(__file__).resolve().parents[2]
MAX_RESTARTS = 20
#: Largest input libFuzzer makes: the largest seed plus room for the hostile tokens (mutations are cut to it).
EXTRA_LEN = 16 * 1024
ARTIFACTS = {"crash-": "crash", "oom-": "crash", "leak-": "crash", "timeout-": "hang"}


@dataclass
class Job:
    """One family's run: its figures so far and the worker process running now."""

    family: str
    count: int
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    inputs: int = 0
    crashes: int = 0
    hangs: int = 0
    signatures: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    commands: list[list[str]] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    live: dict[str, Any] = field(default_factory=dict)

    def totals(self) -> tuple[int, int, int]:
        """(inputs, crashes, hangs), counting the running worker's last stats."""
        return (
            self.inputs + self.live.get("inputs", 0),
            self.crashes + self.live.get("crashes", 0),
            self.hangs + self.live.get("hangs", 0),
        )


def write_seeds(family: str, folder: Path) -> int:
    """The family's seeds as libFuzzer's initial corpus (each seed also under each mode byte of the
    family that has them but whose seeds do not start with one); returns the largest size."""
    folder.mkdir(parents=True, exist_ok=True)
    prefixes = PREFIXES.get(family, (b"",))
    largest = 0
    for seed in FAMILIES[family].seeds():
        variants = [seed] if seed[:1] in prefixes else [p + seed for p in prefixes]
        for data in variants:
            (folder / hashlib.sha256(data).hexdigest()[:16]).write_bytes(data)
            largest = max(largest, len(data))
    return largest


def worker_command(job: Job, args: argparse.Namespace, work: Path, remaining: int) -> list[str]:
    """The worker's command line: our options, then libFuzzer's flags and corpus directories."""
    folder = work / job.family
    largest = write_seeds(job.family, folder / "seeds")
    (folder / "found").mkdir(exist_ok=True)
    ours = [sys.executable, "-m", "tests.fuzz.worker", job.family, "--stats", str(folder / "stats.json"),
            "--count", str(remaining), "--hang-seconds", str(args.hang_seconds)]
    if args.seconds:
        ours += ["--seconds", str(max(1.0, args.seconds - (time.monotonic() - job.started)))]
    if not args.no_corpus:
        ours += ["--corpus", str(args.corpus)]
    libfuzzer = [
        f"-runs={remaining}",
        f"-seed={args.seed + 1 + job.restarts}",
        f"-timeout={max(1, round(4 * args.hang_seconds))}",
        f"-rss_limit_mb={args.rss_limit_mb}",
        f"-max_len={largest + EXTRA_LEN}",
        "-len_control=0",
        f"-artifact_prefix={folder}/",
        "-print_final_stats=1",
        str(folder / "found"),  # libFuzzer adds the inputs that reached new code to the first directory
        str(folder / "seeds"),
    ]
    return [*ours, "--", *libfuzzer]


def start(job: Job, args: argparse.Namespace, work: Path) -> None:
    """Start (or restart) the family's worker for the inputs still to run."""
    command = worker_command(job, args, work, job.count - job.inputs)
    job.commands.append(command)
    log = (work / f"{job.family}.log").open("ab")
    job.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    log.close()
    job.live = {}


def read_stats(job: Job, work: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((work / job.family / "stats.json").read_text()))
    except (OSError, ValueError):
        return {}


def collect(job: Job, args: argparse.Namespace, work: Path) -> bool:
    """Fold an ended worker's figures into the job; True when the family is done, False to restart it."""
    assert job.process is not None
    code = job.process.returncode
    stats = read_stats(job, work)
    job.inputs += stats.get("inputs", 0)
    job.crashes += stats.get("crashes", 0)
    job.hangs += stats.get("hangs", 0)
    for sig, n in stats.get("signatures", {}).items():
        job.signatures[sig] = job.signatures.get(sig, 0) + n
    (work / job.family / "stats.json").unlink(missing_ok=True)
    job.live, job.process = {}, None
    folder = work / job.family
    for artifact in sorted(p for p in folder.iterdir() if p.is_file()):
        kind = next((k for prefix, k in ARTIFACTS.items() if artifact.name.startswith(prefix)), None)
        if kind is None:
            continue
        sig = f"libFuzzer {artifact.name.split('-')[0]}"
        job.crashes += kind == "crash"
        job.hangs += kind == "hang"
        job.inputs += 1
        job.signatures[sig] = job.signatures.get(sig, 0) + 1
        kept = keep_input(None if args.no_corpus else args.corpus / job.family, artifact.read_bytes())
        print(f"  {job.family}: worker ended ({sig}, exit {code}){f': {kept}' if kept else ''}", flush=True)
        artifact.unlink()
    out_of_time = args.seconds is not None and time.monotonic() - job.started >= args.seconds
    if job.inputs >= job.count or out_of_time or code == 0:
        return True
    if job.restarts >= MAX_RESTARTS:
        print(f"  {job.family}: worker ended {job.restarts + 1} times (last exit {code}); giving up", flush=True)
        job.signatures[f"worker exit {code}"] = job.signatures.get(f"worker exit {code}", 0) + 1
        return True
    job.restarts += 1
    return False


def figures(job: Job) -> dict[str, Any]:
    """The family's figures, as printed and reported."""
    elapsed = (job.finished or time.monotonic()) - job.started
    return {
        "family": job.family,
        "inputs": job.inputs,
        "crashes": job.crashes,
        "hangs": job.hangs,
        "signatures": job.signatures,
        "seconds": round(elapsed, 1),
        "inputs_per_second": round(job.inputs / elapsed, 1) if elapsed else None,
        "restarts": job.restarts,
        "commands": [" ".join(c) for c in job.commands],
    }


def run(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """Run every family, ``--jobs`` workers at a time; print progress every ``--progress`` seconds."""
    waiting = [Job(name.strip(), args.count) for name in args.families.split(",")]
    for job in waiting:
        if job.family not in FAMILIES:
            raise SystemExit(f"unknown family {job.family!r} (known: {', '.join(FAMILIES)})")
    running: list[Job] = []
    done: list[Job] = []
    try:
        _loop(waiting, running, done, args, work)
    finally:
        for job in running:  # interrupted (Ctrl-C, SIGTERM): stop the workers too
            if job.process is not None and job.process.poll() is None:
                job.process.terminate()
                job.process.wait()
    order = [name.strip() for name in args.families.split(",")]
    return [figures(job) for job in sorted(done, key=lambda j: order.index(j.family))]


def _loop(waiting: list[Job], running: list[Job], done: list[Job], args: argparse.Namespace, work: Path) -> None:
    shown = time.monotonic()
    while waiting or running:
        while waiting and len(running) < args.jobs:
            job = waiting.pop(0)
            job.started = time.monotonic()
            print(f"{job.family}: {job.count} inputs (seed {args.seed}), log {work / job.family}.log", flush=True)
            start(job, args, work)
            running.append(job)
        time.sleep(0.5)
        for job in list(running):
            assert job.process is not None
            if job.process.poll() is None:
                job.live = read_stats(job, work)
                continue
            if collect(job, args, work):
                job.finished = time.monotonic()
                running.remove(job)
                done.append(job)
                print(json.dumps({k: v for k, v in figures(job).items() if k != "commands"}), flush=True)
            else:
                start(job, args, work)
        if running and time.monotonic() - shown >= args.progress:
            shown = time.monotonic()
            for job in running:
                inputs, crashes, hangs = job.totals()
                rate = inputs / max(1e-9, shown - job.started)
                print(f"  {job.family}: {inputs} inputs, {crashes} crashes, {hangs} hangs ({rate:.0f}/s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the families; exit code 1 when any input crashed or hung."""
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated (default: all)")
    parser.add_argument("--count", type=int, default=1_000_000, help="inputs per family")
    parser.add_argument("--seconds", type=float, help="stop each family after this long")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="families fuzzed at once (one process each)")
    parser.add_argument("--hang-seconds", type=float, default=5.0)
    parser.add_argument("--rss-limit-mb", type=int, default=2048)
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="where crashing inputs are written")
    parser.add_argument("--no-corpus", action="store_true", help="do not write crashing inputs")
    parser.add_argument("--report", type=Path, help="also write the figures as JSON")
    parser.add_argument("--work-dir", type=Path, help="seeds, libFuzzer's logs and finds (default: a temporary one)")
    parser.add_argument("--progress", type=float, default=60.0, help="seconds between progress lines")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # so the workers are stopped too
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="tg-fuzz-run-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = run(args, work)
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.report:
        args.report.write_text(json.dumps(results, indent=1) + "\n")
    print("\nfamily        inputs  crashes  hangs  inputs/s  seconds")
    for r in results:
        print(f"{r['family']:<10} {r['inputs']:>9} {r['crashes']:>8} {r['hangs']:>6} {r['inputs_per_second']:>9}"
              f" {r['seconds']:>8}")
    for r in results:
        for sig, n in r["signatures"].items():
            print(f"  {r['family']}: {n} x {sig}")
    return 1 if any(r["crashes"] or r["hangs"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
