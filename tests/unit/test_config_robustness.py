"""Config loading never crashes (issue 11): a non-UTF-8 byte, deep YAML, a huge duration, a secret file
that is a device or FIFO or huge — one line naming the file (and field), exit code 2, from ``config check``
as from ``run``."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from monitor.config import MAX_SECRET_FILE_BYTES, SecretRef, load_config, resolve_secret
from monitor.durations import MAX_DURATION_MS, parse_duration_ms
from monitor.errors import ConfigError
from tests.cli import run_cli


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, _, err = run_cli(argv, capsys)
    return code, err


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "tidegauge.yaml"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("command", ["config check", "run"])
def test_a_huge_duration_fails_config_check_and_run_alike(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # issue 11: 99999999999999999999999h passed `config check` and then crashed `run` (OverflowError)
    path = _write(tmp_path, b"retention: 99999999999999999999999h\n")
    code, err = run([*command.split(), "-c", str(path), *(["--db", "sqlite:///:memory:"] if command == "run" else [])], capsys)
    assert code == 2
    assert err.splitlines() == [
        f"tidegauge: error: {path}: retention: duration: '99999999999999999999999h' is longer than the "
        "longest duration accepted (100 years)"
    ]


def test_the_longest_duration_is_accepted_and_one_ms_more_is_not() -> None:
    assert parse_duration_ms("36525d") == MAX_DURATION_MS
    with pytest.raises(ValueError, match="longer than the longest"):
        parse_duration_ms("36525d1ms")


def test_a_non_utf8_byte_names_the_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, b"server:\n  host: caf\xe9\n")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value) == f"{path}: line 2: not UTF-8 text (byte 19: b'\\xe9')"


@pytest.mark.parametrize("bad", ["\x01", "\ufffe"])
def test_a_character_yaml_does_not_allow_names_the_file_and_line(tmp_path: Path, bad: str) -> None:
    # libyaml reports the position in UTF-8 bytes: 20 two-byte characters before it, short lines after
    accents = "\u00e9" * 20
    path = _write(tmp_path, f"comment: {accents}\nserver: {bad}\na: 1\nb: 2\nc: 3\n".encode())
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(exc.value) == f"{path}: line 2: character #x{ord(bad):04x} is not allowed in YAML"


@pytest.mark.parametrize("text", ["a: " + "[" * 5000 + "]" * 5000, "a:\n" + "".join("  " * i + "b:\n" for i in range(1, 300))])
def test_deep_yaml_is_one_error_not_a_recursion_error(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text.encode())
    with pytest.raises(ConfigError, match=r"nested deeper than 50 levels") as exc:
        load_config(path)
    assert str(exc.value).startswith(f"{path}: line ") and "\n" not in str(exc.value)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/stdin", "/dev/null"])
def test_a_secret_file_must_be_a_regular_file(device: str) -> None:
    # issue 11: {file: /dev/zero} was read whole (MemoryError), {file: /dev/stdin} hung
    if not os.path.exists(device):
        pytest.skip(f"{device} does not exist here")
    with pytest.raises(ConfigError, match=r"is not a regular file"):
        resolve_secret(SecretRef(file=Path(device)), {}, "server.ingest_token")


def test_a_fifo_secret_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    done: list[str] = []

    def resolve() -> None:
        try:
            resolve_secret(SecretRef(file=fifo), {}, "server.ingest_token")
        except ConfigError as exc:
            done.append(str(exc))

    thread = threading.Thread(target=resolve, daemon=True)
    thread.start()
    thread.join(10.0)
    assert done == [f"server.ingest_token: secret file {fifo} is not a regular file (a device, FIFO or directory)"]


def test_a_secret_file_has_a_size_limit(tmp_path: Path) -> None:
    big = tmp_path / "token"
    big.write_bytes(b"x" * (MAX_SECRET_FILE_BYTES + 1))
    with pytest.raises(ConfigError, match=r"larger than 64 KiB"):
        resolve_secret(SecretRef(file=big), {}, "server.ingest_token")
    big.write_bytes(b"s3cret\n")
    assert resolve_secret(SecretRef(file=big), {}, "w").get_secret_value() == "s3cret"
