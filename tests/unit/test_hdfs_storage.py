"""collectors/hdfs.py without a cluster: where the NameNode's HTTP port and the user come from, inode-id
identities, and open-ended reads of a growing file (the MiniDFSCluster tests are in
tests/integration/test_eventlog_hdfs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.hdfs import DEFAULT_HTTP_PORT, WebHdfsStorage, _with_query, namenode_http_port, open_webhdfs
from collectors.storage import RangeReader, StorageError, StorageReason, open_storage


def _site(tmp_path: Path, value: str) -> dict[str, str]:
    (tmp_path / "hdfs-site.xml").write_text(
        "<configuration><property><name>dfs.replication</name><value>3</value></property>"
        f"<property><name>dfs.namenode.http-address</name><value>{value}</value></property></configuration>"
    )
    return {"HADOOP_CONF_DIR": str(tmp_path)}


def test_http_port_from_options_then_hadoop_conf_then_default(tmp_path: Path) -> None:
    env = _site(tmp_path, "nn.internal:50070")
    assert namenode_http_port("nn", {"port": 14000}, env) == 14000
    assert namenode_http_port("nn", {}, env) == 50070
    assert namenode_http_port("nn", {}, {}) == DEFAULT_HTTP_PORT == 9870
    assert namenode_http_port("nn", {}, {"HADOOP_CONF_DIR": str(tmp_path / "absent")}) == 9870


def test_bad_hadoop_conf_names_the_file(tmp_path: Path) -> None:
    env = _site(tmp_path, "nn.internal")
    with pytest.raises(StorageError, match=r"hdfs-site.xml: dfs.namenode.http-address 'nn.internal' has no port") as exc:
        namenode_http_port("nn", {}, env)
    assert exc.value.reason is StorageReason.INVALID
    (tmp_path / "hdfs-site.xml").write_text("<configuration>")
    with pytest.raises(StorageError, match=r"hdfs-site.xml: not a Hadoop configuration file"):
        namenode_http_port("nn", {}, env)


def test_hdfs_url_goes_to_webhdfs_on_the_http_port(tmp_path: Path) -> None:
    env = _site(tmp_path, "0.0.0.0:50070")
    storage = open_webhdfs("hdfs", "spark@nn.internal:8020", {}, env)
    assert isinstance(storage, WebHdfsStorage)
    assert storage.fs.url == "http://nn.internal:50070/webhdfs/v1"
    assert storage.fs.pars == {"user.name": "spark"}
    assert storage.display("/spark-events/app-1") == "hdfs://spark@nn.internal:8020/spark-events/app-1"
    assert storage.hflush and not storage.immutable

    by_env = open_webhdfs("webhdfs", "nn.internal:14000", {}, {"HADOOP_USER_NAME": "etl"})
    assert by_env.fs.url == "http://nn.internal:14000/webhdfs/v1"
    assert by_env.fs.pars == {"user.name": "etl"}
    assert open_webhdfs("webhdfs", "nn.internal", {"user": "a"}, {"HADOOP_USER_NAME": "b"}).fs.pars == {"user.name": "a"}


def test_open_storage_routes_both_schemes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    storage, path = open_storage("hdfs://nn.internal:8020/spark-events/", {"port": 9871})
    assert isinstance(storage, WebHdfsStorage)
    assert (storage.fs.url, path) == ("http://nn.internal:9871/webhdfs/v1", "/spark-events")
    storage, path = open_storage("webhdfs://nn.internal:9870/")
    assert (storage.fs.url, path) == ("http://nn.internal:9870/webhdfs/v1", "/")


def test_identity_is_the_inode_id_not_the_mtime() -> None:
    storage = open_webhdfs("webhdfs", "nn:9870", {}, {})
    status = {"name": "/e/app.zstd.inprogress", "type": "file", "size": 58, "fileId": 16387, "modificationTime": 1}
    closed = {**status, "name": "/e/app.zstd", "size": 453685, "modificationTime": 2}
    assert storage._entry(status).identity == storage._entry(closed).identity == "id:16387"
    assert storage._entry({**status, "fileId": 16390}).identity == "id:16390"


class _Growing(WebHdfsStorage):
    """Serves ``data`` as a file being written: a read stops at its current end (none past it)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(open_webhdfs("webhdfs", "nn:9870", {}, {}).fs, "webhdfs://nn:9870/")
        self.data = data
        self.requests: list[tuple[int, int]] = []

    def read_range(self, path: str, start: int, end: int) -> bytes:
        self.requests.append((start, end))
        return self.data[start:end]


def test_a_growing_file_is_read_to_its_current_end_not_its_listed_size() -> None:
    storage = _Growing(b"x" * 100_000)
    reader = RangeReader(storage, "/e/app.inprogress", None, block_bytes=1 << 20)
    reader.seek(30_000)  # the cursor's offset: nothing before it is fetched
    assert len(reader.read(1 << 20)) == 70_000
    assert reader.read(1 << 20) == b""
    assert reader.tell() == 100_000
    assert storage.requests == [(30_000, 30_000 + (1 << 20)), (100_000, 100_000 + (1 << 20))]
    storage.data += b"y" * 10  # Spark hflushed one more line
    assert reader.read(4096) == b"y" * 10
    with pytest.raises(OSError, match="still being written"):
        reader.seek(0, 2)


def test_with_query_replaces_the_offset_of_a_datanode_redirect() -> None:
    location = "http://127.0.0.1:40967/webhdfs/v1/e/app?op=OPEN&user.name=root&namenoderpcaddress=127.0.0.1:35633&length=1&offset=0"
    assert _with_query(location, offset=24444, length=65536) == (
        "http://127.0.0.1:40967/webhdfs/v1/e/app?op=OPEN&user.name=root&namenoderpcaddress=127.0.0.1%3A35633"
        "&length=65536&offset=24444"
    )


class _Response:
    def __init__(self, status: int, body: bytes = b"", location: str | None = None, exception: str = "", message: str = "") -> None:
        self.status_code = status
        self.content = body
        self.headers = {"Location": location} if location else {}
        self.exception = exception
        self.message = message

    @property
    def text(self) -> str:
        return self.content.decode()

    def json(self) -> dict[str, object]:
        if not self.exception:
            raise ValueError("no JSON")
        return {"RemoteException": {"exception": self.exception, "message": self.message}}

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise OSError(f"HTTP {self.status_code}")


class _Session:
    """Answers WebHDFS requests as the measured MiniDFSCluster did: the NameNode knows 67 bytes of a file
    whose DataNode has ``visible`` bytes; ``datanode_up`` False refuses connections to the DataNode."""

    def __init__(self, visible: bytes) -> None:
        self.visible = visible
        self.datanode_up = True
        self.calls: list[str] = []

    def get(self, url: str, params: dict[str, object] | None = None, allow_redirects: bool = True) -> _Response:
        if params is not None:  # the NameNode
            offset = int(str(params["offset"]))
            self.calls.append(f"nn:{offset}")
            if offset >= 67:
                return _Response(403, exception="IOException", message=f"Offset={offset} out of the range [0, 67)")
            return _Response(307, location=f"http://127.0.0.1:9864/webhdfs/v1/e/app?op=OPEN&offset={offset}&length=1")
        query = dict(part.split("=") for part in url.split("?", 1)[1].split("&"))
        offset, length = int(query["offset"]), int(query["length"])
        self.calls.append(f"dn:{offset}")
        if not self.datanode_up:
            raise ConnectionError("refused")
        if offset > len(self.visible):
            return _Response(403, exception="EOFException", message="Cannot seek after EOF")
        return _Response(200, self.visible[offset : offset + length])


def test_reads_past_the_namenode_length_go_to_the_datanode_and_reuse_it() -> None:
    storage = open_webhdfs("webhdfs", "nn:9870", {}, {})
    session = _Session(b"a" * 1000)
    storage.fs.session = session
    assert storage.read_range("/e/app", 500, 600) == b"a" * 100  # the NameNode refuses 500: redirect for 0
    assert session.calls == ["nn:500", "nn:0", "dn:500"]
    session.calls.clear()
    assert storage.read_range("/e/app", 1000, 2000) == b""  # the visible end: nothing new yet
    assert storage.read_range("/e/app", 1500, 2000) == b""  # past it (EOFException): nothing new either
    assert session.calls == ["dn:1000", "dn:1500"]  # straight to the DataNode
    session.calls.clear()
    session.datanode_up = False  # the DataNode went away: ask the NameNode again (which fails here too)
    with pytest.raises(StorageError) as exc:
        storage.read_range("/e/app", 10, 20)
    assert exc.value.reason is StorageReason.UNREACHABLE
    assert session.calls == ["dn:10", "nn:10", "dn:10"]
