"""Formatting helpers used in finding messages, and progress-file splitting."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.spark.progress_files import read_progress_file
from monitor.errors import ProgressFormatError


def test_progress_file_bad_json_names_line(tmp_path: Path, spark_fixtures: Path) -> None:
    good = (spark_fixtures / "progress_pt_initial_idle_b0.json").read_text()
    import json

    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(json.loads(good)) + "\n" + '{"id": "x", "timestamp": \n')
    read = read_progress_file(path)  # the bad line is reported, the good one kept
    assert [s.batch_id for s in read.samples if s.scope.is_job()] == [0]
    assert len(read.errors) == 1 and read.errors[0].startswith(f"{path}: line 2: invalid JSON")
    path.write_text('{"id": "x", "timestamp": \n' + '{"id": "y", \n')  # no good line at all
    with pytest.raises(ProgressFormatError, match=r"p\.jsonl: invalid JSON at line 2 column 12"):
        read_progress_file(path)


def test_progress_file_single_object(spark_fixtures: Path) -> None:
    read = read_progress_file(spark_fixtures / "progress_pt_initial_idle_b0.json")
    assert read.samples[0].batch_id == 0 and len(read.raw) == 1 and read.errors == []
