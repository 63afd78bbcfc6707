"""Replays the fuzz regression corpus (``tests/fuzz/corpus/<family>/*.bin``): every input that ever crashed
a parser (found by ``make fuzz``, or a reproducer of issue 11) must now be read or refused by contract.

Each file is one input of its family's target (:mod:`tests.fuzz.targets`: the real entry point a user's
input reaches, plus the check that what it accepted is storable). Files named ``xfail-<area>-issue11-*``
are crashes in code another branch of issue 11 fixes: ``ingest`` (the ingest endpoint's body decoding,
``monitor/daemon/ingest.py``; the shared ``collectors.spark.progress.load_json`` handles it) and ``whatif`` (the
what-if loader, ``monitor/watermark/io.py``; those found here are fixed now: ``issue11_whatif_*``). They are strict xfails, so the fix turns
them into failures: then drop the prefix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.targets import FAMILIES

CORPUS = Path(__file__).resolve().parents[1] / "fuzz" / "corpus"
ENTRIES = sorted(CORPUS.glob("*/*.bin"))


def _param(path: Path) -> object:
    marks = []
    for area, code in (("whatif", "the what-if loader"), ("ingest", "the ingest endpoint's body decoding")):
        if path.name.startswith(f"xfail-{area}-issue11-"):
            marks.append(pytest.mark.xfail(strict=True, reason=f"issue 11: {code} raises on this input"))
    return pytest.param(path, id=f"{path.parent.name}/{path.name}", marks=marks)


def test_every_family_has_a_corpus() -> None:
    assert {p.parent.name for p in ENTRIES} == set(FAMILIES)


@pytest.mark.parametrize("path", [_param(p) for p in ENTRIES])
def test_corpus_entry_is_read_or_refused_by_contract(path: Path) -> None:
    FAMILIES[path.parent.name].target(path.read_bytes())
