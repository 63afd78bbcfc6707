"""A progress JSON file is parsed whole, so it is read up to a bound: a larger file, or a device that never
ends, is one error naming the file (issue 19: the progress-file reader read whatever it was given)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.spark.progress_files import read_progress_file
from monitor.errors import ProgressFormatError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures"


def _recorded_progress() -> Path:
    found = sorted(FIXTURE.rglob("*progress*.json"))
    assert found, "a recorded progress JSON file"
    return found[0]


def test_a_file_within_the_bound_is_read_and_one_beyond_it_is_refused() -> None:
    path = _recorded_progress()
    size = path.stat().st_size
    assert read_progress_file(path, max_bytes=size).samples
    with pytest.raises(ProgressFormatError, match=rf"^{path}: larger than {size - 1:,} bytes"):
        read_progress_file(path, max_bytes=size - 1)


def test_a_device_that_never_ends_is_refused_at_the_bound() -> None:
    with pytest.raises(ProgressFormatError, match=r"^/dev/zero: larger than 4,096 bytes"):
        read_progress_file(Path("/dev/zero"), max_bytes=4096)


def test_files_that_cannot_be_read_are_one_error_each_naming_the_file_once(tmp_path: Path) -> None:
    from collectors.spark.progress_files import read_progress_files

    empty = tmp_path / "empty.json"
    empty.write_text("")
    reads, errors = read_progress_files([tmp_path / "missing.json", empty, _recorded_progress()])
    assert len(reads) == 1 and reads[0].samples
    assert errors == [f"{tmp_path / 'missing.json'}: No such file or directory", f"{empty}: empty file (expected progress JSON)"]
