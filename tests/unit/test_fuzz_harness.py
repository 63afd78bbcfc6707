"""The fuzz harness itself (``make fuzz``: :mod:`tests.fuzz.run`, :mod:`tests.fuzz.worker`,
:mod:`tests.fuzz.mutate`): mutations reproducible from their draws, crashes and hangs counted and kept
for the corpus replay, inputs libFuzzer saved when it ended a worker counted too, and a short real run
through atheris."""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuzz import run, worker
from tests.fuzz.mutate import mutate
from tests.fuzz.targets import FAMILIES

ROOT = Path(__file__).resolve().parents[2]


def _args(tmp_path: Path, **overrides: object) -> argparse.Namespace:
    values = {"count": 3, "seconds": None, "hang_seconds": 5.0, "stats": tmp_path / "stats.json", "corpus": tmp_path}
    values.update(overrides)
    return argparse.Namespace(**values)


@pytest.fixture
def cpu_alarm() -> Iterator[None]:
    previous = signal.signal(signal.SIGPROF, worker._on_alarm)
    yield
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.signal(signal.SIGPROF, previous)


def test_a_mutation_is_reproducible_from_its_draws() -> None:
    seed = FAMILIES["listener"].seeds()[0]
    first = [mutate(seed, random.Random(i).randrange, json_like=True) for i in range(30)]
    again = [mutate(seed, random.Random(i).randrange, json_like=True) for i in range(30)]
    assert first == again
    assert len(set(first)) > 20 and seed not in first[:3]


def test_a_mutation_keeps_or_swaps_the_mode_byte() -> None:
    seed = FAMILIES["whatif"].seeds()[0]
    assert seed[:1] == b"C"
    kinds = {mutate(seed, random.Random(i).randrange, json_like=False, prefixes=(b"C", b"J"))[:1] for i in range(200)}
    assert kinds == {b"C", b"J"}


def test_a_crash_is_counted_signed_and_kept(tmp_path: Path) -> None:
    def target(data: bytes) -> None:
        if data == b"boom":
            raise ValueError("unexpected")

    fuzz = worker.Worker("listener", target, _args(tmp_path))
    for data in (b"ok", b"boom", b"ok"):
        fuzz(data)
    assert (fuzz.inputs, fuzz.crashes, fuzz.hangs) == (3, 1, 0)
    [(sig, n)] = fuzz.signatures.items()
    assert sig.startswith("ValueError at test_fuzz_harness.py:") and n == 1
    assert [p.read_bytes() for p in (tmp_path / "listener").iterdir()] == [b"boom"]
    # the third input was the last (--count 3): the figures are on disk for the parent
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert (stats["inputs"], stats["crashes"], stats["signatures"]) == (3, 1, {sig: 1})


def test_an_input_spinning_past_the_cpu_limit_is_a_hang(tmp_path: Path, cpu_alarm: None) -> None:
    def target(data: bytes) -> None:
        while data:
            pass

    fuzz = worker.Worker("config", target, _args(tmp_path, hang_seconds=0.2))
    fuzz(b"")
    fuzz(b"spin")
    assert (fuzz.inputs, fuzz.crashes, fuzz.hangs) == (2, 0, 1)
    assert fuzz.signatures == {"hang": 1}
    assert [p.read_bytes() for p in (tmp_path / "config").iterdir()] == [b"spin"]


def test_an_input_libfuzzer_saved_when_it_ended_a_worker_is_counted_kept_and_the_worker_restarted(
    tmp_path: Path,
) -> None:
    work, corpus = tmp_path / "work", tmp_path / "corpus"
    (work / "whatif").mkdir(parents=True)
    (work / "whatif" / "stats.json").write_text(json.dumps({"inputs": 40, "crashes": 0, "hangs": 0, "signatures": {}}))
    (work / "whatif" / "timeout-0123abcd").write_bytes(b"Cslow")
    job = run.Job("whatif", count=100)
    job.process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(70)"])
    job.process.wait()
    args = argparse.Namespace(no_corpus=False, corpus=corpus, seconds=None)
    assert run.collect(job, args, work) is False  # 59 inputs to go: start it again
    assert (job.inputs, job.crashes, job.hangs, job.restarts) == (41, 0, 1, 1)
    assert job.signatures == {"libFuzzer timeout": 1}
    assert [p.read_bytes() for p in (corpus / "whatif").iterdir()] == [b"Cslow"]


def test_a_short_real_run_counts_every_input(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "tests.fuzz.run", "--families", "listener", "--count", "300", "--seed", "3",
               "--no-corpus", "--work-dir", str(tmp_path / "work"), "--report", str(report)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [figures] = json.loads(report.read_text())
    assert (figures["family"], figures["inputs"], figures["crashes"], figures["hangs"]) == ("listener", 300, 0, 0)
    assert "-seed=4" in figures["commands"][0] and "-runs=300" in figures["commands"][0]
    assert "Done 300 runs" in (tmp_path / "work" / "listener.log").read_text()
