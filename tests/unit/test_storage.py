"""collectors/storage.py without a server: URL parsing, the missing-library message, error mapping, and the
config's storage_options (secrets only as references, known to the redactor)."""

from __future__ import annotations

import errno
import itertools
import threading
from pathlib import Path

import pytest

import collectors.storage as storage
from collectors.storage import LocalStorage, StorageError, StorageReason, open_storage, storage_error
from monitor.config import Config, SecretRef, secret_values
from monitor.model import ErrorKind
from tests.cli import run_cli


def test_paths_and_file_urls_are_local(tmp_path: Path) -> None:
    st, path = open_storage(str(tmp_path))
    assert isinstance(st, LocalStorage) and path == str(tmp_path)
    st, path = open_storage(f"file://{tmp_path}")
    assert isinstance(st, LocalStorage) and path == str(tmp_path)


def test_missing_library_names_the_extra_and_scan_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(storage.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(StorageError) as exc:
        open_storage("gs://bucket/spark-events")
    assert exc.value.reason is StorageReason.MISSING_LIBRARY
    code, _out, err = run_cli(["scan", "abfss://logs@acct.dfs.core.windows.net/spark-events"], capsys)
    assert code == 2
    assert err.splitlines() == [
        "tidegauge: error: abfss://logs@acct.dfs.core.windows.net/spark-events: reading abfss:// needs the adlfs "
        "library: pip install 'tidegauge[azure]' (or 'tidegauge[cloud]' for every store)"
    ]


def test_config_check_names_the_missing_library_of_a_target_s_url(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "tg.yaml"
    config.write_text("targets:\n  spark_event_logs:\n    - name: logs\n      path: s3a://spark/spark-events\n")
    monkeypatch.setattr(storage.importlib.util, "find_spec", lambda name: None)
    code, _out, err = run_cli(["config", "check", "-c", str(config)], capsys)
    assert code == 2
    assert "reading s3a:// needs the s3fs library: pip install 'tidegauge[s3]'" in err


@pytest.mark.parametrize(
    "url",
    ["s3://AKIAXX:topsecretvalue@bucket/x", "s3://bucket/x?X-Amz-Signature=topsecretvalue", "ftp://host/x", "s3:///x"],
)
def test_urls_with_credentials_unknown_schemes_or_no_bucket_are_refused(url: str) -> None:
    with pytest.raises(StorageError) as exc:
        open_storage(url)
    assert exc.value.reason is StorageReason.INVALID
    assert "topsecretvalue" not in str(exc.value)



def test_credentials_in_a_url_point_scan_users_to_the_environment(capsys: pytest.CaptureFixture[str]) -> None:
    # scan takes no storage_options: the hint must name what a scan user can do
    code, _out, err = run_cli(["scan", "s3://AKIAXX:topsecretvalue@bucket/x"], capsys)
    assert code == 2 and "topsecretvalue" not in err
    assert "give credentials in the environment or the store's default chain" in err


def test_error_mapping_by_code_and_kind() -> None:
    class ClientError(Exception):
        def __init__(self, code: str, status: int) -> None:
            super().__init__(f"An error occurred ({code}) with signature=abcdef0123456789")
            self.response = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}

    def wrapped(code: str, status: int, outer: type[Exception]) -> Exception:
        try:
            try:
                raise ClientError(code, status)
            except ClientError as inner:
                raise outer("text") from inner
        except Exception as exc:
            return exc

    expired = storage_error(wrapped("ExpiredToken", 400, PermissionError), "s3://b/k")
    assert (expired.reason, expired.error_kind(root=True)) == (StorageReason.CREDENTIALS, ErrorKind.CREDENTIALS)
    assert str(expired) == "s3://b/k: credentials missing, expired or invalid, or access denied (ExpiredToken)"
    slow = storage_error(OSError(errno.EBUSY, "slow"), "s3://b/k")
    assert (slow.reason, slow.error_kind(root=False)) == (StorageReason.THROTTLED, ErrorKind.THROTTLED)
    many = storage_error(wrapped("TooManyRequests", 429, OSError), "gs://b/k")
    assert many.reason is StorageReason.THROTTLED
    gone = storage_error(FileNotFoundError("b/k"), "s3://b/k")
    assert (gone.error_kind(root=True), gone.error_kind(root=False)) == (ErrorKind.UNREACHABLE, ErrorKind.DELETED)
    assert "abcdef0123456789" not in str(expired) + str(many)


def _config(options: dict[str, object]) -> Config:
    return Config.model_validate(
        {"targets": {"spark_event_logs": [{"name": "s3", "path": "s3a://b/spark-events", "storage_options": options}]}}
    )


def test_storage_option_secrets_must_be_references_and_reach_the_redactor() -> None:
    with pytest.raises(ValueError, match="a secret is never written in the config"):
        _config({"secret": "plain-text-secret"})
    cfg = _config({"key": {"env": "S3_KEY"}, "secret": {"env": "S3_SECRET"}, "endpoint_url": "http://127.0.0.1:9000"})
    secrets, _urls = secret_values(cfg, {"S3_KEY": "AKIAEXAMPLEKEY", "S3_SECRET": "example-secret-value"})
    assert {"AKIAEXAMPLEKEY", "example-secret-value"} <= set(secrets)
    with pytest.raises(ValueError, match="unsupported URL scheme ftp://"):
        Config.model_validate({"targets": {"spark_event_logs": [{"name": "x", "path": "ftp://h/x"}]}})


def test_storage_option_file_references_and_plain_values_keep_their_kinds(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("file-secret-value\n")
    cfg = _config({
        "key": {"env": "S3_KEY"}, "secret": {"file": str(secret)}, "token": {"file": str(secret)},
        "anon": False, "default_block_size": 1048576, "client_kwargs": {"region_name": "eu-west-1"},
    })  # fmt: skip
    options = cfg.targets.spark_event_logs[0].storage_options
    assert options["secret"] == SecretRef(file=secret) and options["token"] == SecretRef(file=secret)
    assert options["anon"] is False and options["default_block_size"] == 1048576
    assert options["client_kwargs"] == {"region_name": "eu-west-1"}
    secrets, _urls = secret_values(cfg, {"S3_KEY": "AKIAEXAMPLEKEY"})
    assert "file-secret-value" in set(secrets)


class _Ranges:
    """A store of one object that records each ranged read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls: list[tuple[int, int]] = []

    def read_range(self, path: str, start: int, end: int) -> bytes:
        self.calls.append((start, end))
        return self.data[start:end]


@pytest.mark.parametrize("sizes", [[4096], [1 << 20], [1, 7, 100_000, 3, 2_000_000]])
def test_range_reader_reads_every_byte_once_in_order_with_growing_requests(sizes: list[int]) -> None:
    data = bytes(range(256)) * 11_719  # 3,000,064 bytes
    store = _Ranges(data)
    reader = storage.RangeReader(store, "bucket/key", len(data), block_bytes=1 << 20)  # type: ignore[arg-type]
    assert reader.read(4096) == data[:4096]
    assert store.calls == [(0, 64 << 10)]  # a file's head costs one small request
    reader.seek(0)
    out, i = [], 0
    while block := reader.read(sizes[i % len(sizes)]):
        out.append(block)
        i += 1
    assert b"".join(out) == data
    calls = sorted(store.calls)  # the read-ahead may ask before the request it follows
    assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(calls))  # no byte asked twice
    assert len(store.calls) <= 6  # 64 KiB, then blocks growing to 1 MiB: not one request per read
    reader.seek(123_456)
    assert reader.read(10) == data[123_456:123_466]
    reader.close()


def test_range_reader_asks_for_the_next_block_before_waiting_for_its_own_request() -> None:
    data = bytes(range(256)) * 16_384  # 4 MiB
    asked_ahead = threading.Event()

    class _Store(_Ranges):
        def read_range(self, path: str, start: int, end: int) -> bytes:
            if start == 1 << 20:  # the read-ahead: it must be out while the request before it is answered
                asked_ahead.set()
            elif start == 64 << 10:
                assert asked_ahead.wait(30), "the read-ahead was not sent before the sequential request"
            return super().read_range(path, start, end)

    store = _Store(data)
    reader = storage.RangeReader(store, "bucket/key", len(data), block_bytes=1 << 20)  # type: ignore[arg-type]
    assert reader.read(4096) == data[:4096]
    reader.seek(0)
    assert reader.read(1 << 20) == data[: 1 << 20]  # the head's 64 KiB + one request of the rest
    assert reader.read(1 << 20) == data[1 << 20 : 2 << 20]  # the read-ahead's block
    reader.close()
    assert sorted(store.calls)[:3] == [(0, 64 << 10), (64 << 10, 1 << 20), (1 << 20, 2 << 20)]
