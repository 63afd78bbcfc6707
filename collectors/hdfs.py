"""HDFS through WebHDFS: the :class:`collectors.storage.Storage` of ``hdfs://`` and ``webhdfs://`` URLs.

Why WebHDFS and not pyarrow's ``HadoopFileSystem``: pyarrow needs ``libhdfs.so`` from a Hadoop distribution,
a JVM (``libjvm.so``) and Hadoop's jars on ``CLASSPATH`` on the monitoring host; WebHDFS is plain HTTP to
the NameNode (on by default: ``dfs.webhdfs.enabled``), through fsspec's own ``WebHDFS`` and ``requests``.

Where the NameNode's HTTP port comes from (``hdfs://namenode:8020/...`` names the RPC port, which speaks
Hadoop IPC, not HTTP), first found wins:

1. ``storage_options: {port: 9870}`` (fsspec ``WebHDFS``'s own ``port`` argument);
2. ``dfs.namenode.http-address`` in ``$HADOOP_CONF_DIR/hdfs-site.xml`` (what every Hadoop client on an edge
   node reads);
3. ``9870``, Hadoop 3's default ``dfs.namenode.http-address`` port.

A ``webhdfs://host:port/...`` URL names the HTTP port itself. The user (simple authentication's
``user.name``) is ``storage_options.user``, else ``$HADOOP_USER_NAME`` (Hadoop's own variable), else none
(the NameNode then acts as its static user, ``dr.who``, who cannot read Spark's ``770`` event logs).
Kerberos (``kerberos: true``) and HTTPS (``use_https: true``) are fsspec ``WebHDFS`` options, passed on;
an HA nameservice (``hdfs://nameservice1/``) is not resolved: name the active NameNode.

HDFS semantics this storage keeps (see :class:`WebHdfsStorage`):

- A file being written (Spark's ``.inprogress`` event log) is **longer than the NameNode says**: Spark's
  ``EventLogFileWriter.writeLine`` calls ``hflush()`` after each flushed event (every streaming listener
  event among them), which makes the bytes readable from the DataNode, but the NameNode's length
  (``GETFILESTATUS``/``LISTSTATUS`` ``length``) is only updated when a block is completed or the file is
  closed (measured with PySpark 4.3.0 on Hadoop 3.5.0: the listed length stays at 58 bytes, the first
  hflush, while 450 KB are readable). Spark's history server reads the visible length from the
  ``DFSInputStream`` for that reason (``EventLogFileReader.fileSizeForDFS``). So a growing file is read
  from the stored offset to whatever the DataNode returns, never bounded by the listed size:
  :meth:`WebHdfsStorage.open` with ``growing=True``. The NameNode also refuses a WebHDFS ``OPEN`` at an
  offset past the length it knows (``403 IOException: Offset=N out of the range [0, 58)``), while the
  DataNode it redirects to reads through a ``DFSInputStream`` and serves every hflushed byte: such a read
  takes the NameNode's redirect for offset 0 and asks that DataNode for the offset wanted
  (:meth:`WebHdfsStorage.read_range`); the DataNode answers an empty body at the visible end and
  ``EOFException`` past it, both "nothing new yet".
- A file's ``identity`` is its inode id (``fileId``, :class:`collectors.storage.FsspecStorage` for every
  store that is not an object store): it survives Spark's rename of ``app.inprogress`` to
  ``app`` at the end of the application (so the cursor carries over, as with a local inode), and changes
  when the file is deleted and written again. Modification times change when a file is closed, so they
  cannot serve.
- Each request has a timeout (:data:`REQUEST_TIMEOUT_S`): a NameNode that accepts connections but never
  answers is an unreachable store, not a poll that never ends.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from collectors.http import ReadLimits
from collectors.jsontext import json_text
from collectors.storage import (
    DEFAULT_STORE_LIMITS,
    Entry,
    FsspecStorage,
    RangeReader,
    ResponseTooLarge,
    StorageError,
    StorageReason,
)

__all__ = ["DEFAULT_HTTP_PORT", "REQUEST_TIMEOUT_S", "WebHdfsStorage", "namenode_http_port", "open_webhdfs"]

DEFAULT_HTTP_PORT = 9870
REQUEST_TIMEOUT_S = 30.0
_BODY_STEP_BYTES = 64 * 1024  # bytes of an answer read per step
_OUT_OF_RANGE = "out of the range"  # the NameNode's IOException for an offset at or past the length it knows


def namenode_http_port(host: str, options: Mapping[str, Any], environ: Mapping[str, str]) -> int:
    """The NameNode's HTTP (WebHDFS) port for an ``hdfs://host...`` URL: ``options["port"]``, else the port
    of ``dfs.namenode.http-address`` in ``$HADOOP_CONF_DIR/hdfs-site.xml``, else :data:`DEFAULT_HTTP_PORT`.

    Raises:
        StorageError: ``INVALID`` when ``hdfs-site.xml`` exists but is not XML, or its address has no
            numeric port (the message names the file and the property).
    """
    if options.get("port") is not None:
        return int(options["port"])
    conf_dir = environ.get("HADOOP_CONF_DIR")
    site = Path(conf_dir) / "hdfs-site.xml" if conf_dir else None
    if site is None or not site.is_file():
        return DEFAULT_HTTP_PORT
    try:
        root = ET.parse(site).getroot()  # noqa: S314 - the operator's own Hadoop configuration
    except (ET.ParseError, OSError) as exc:
        raise StorageError(f"{site}: not a Hadoop configuration file ({exc})", StorageReason.INVALID) from None
    for prop in root.iter("property"):
        if (prop.findtext("name") or "").strip() == "dfs.namenode.http-address":
            value = (prop.findtext("value") or "").strip()
            port = value.rsplit(":", 1)[-1]
            if not port.isdigit():
                raise StorageError(
                    f"{site}: dfs.namenode.http-address {value!r} has no port (host:port expected)",
                    StorageReason.INVALID,
                )
            return int(port)
    return DEFAULT_HTTP_PORT


def open_webhdfs(
    scheme: str,
    netloc: str,
    options: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    limits: ReadLimits = DEFAULT_STORE_LIMITS,
) -> WebHdfsStorage:
    """The :class:`WebHdfsStorage` of an ``hdfs://`` or ``webhdfs://`` URL's ``netloc`` (``host[:port]``).

    Args:
        scheme: ``"hdfs"`` (the port in ``netloc`` is the RPC port: the HTTP one is looked up, see the module
            docstring) or ``"webhdfs"`` (the port is the HTTP one; 9870 when absent).
        netloc: the URL's ``host[:port]`` (no user-info: :func:`collectors.storage.open_storage` refuses it).
        options: fsspec ``WebHDFS`` keyword arguments (``port``, ``user``, ``kerberos``, ``use_https``, ...),
            secrets already resolved, plus ``timeout_s`` (seconds per connect and per read of a request,
            default :data:`REQUEST_TIMEOUT_S` or the request deadline if shorter).
        environ: the environment (``HADOOP_CONF_DIR``, ``HADOOP_USER_NAME``); ``os.environ`` by default.
        limits: the request and poll deadlines (:class:`collectors.storage.FsspecStorage`): no request starts
            once the poll's deadline has passed.

    Raises:
        StorageError: ``INVALID`` for unusable options or Hadoop configuration.
    """
    from fsspec.implementations.webhdfs import WebHDFS

    env = os.environ if environ is None else environ
    kwargs = dict(options)
    user_info, _, address = netloc.rpartition("@")
    if user_info:  # hdfs://spark@namenode:8020/: simple authentication's user
        kwargs.setdefault("user", user_info)
    host, _, url_port = address.rpartition(":") if ":" in address else (address, "", "")
    if scheme == "webhdfs":
        kwargs.setdefault("port", int(url_port) if url_port.isdigit() else DEFAULT_HTTP_PORT)
    kwargs["port"] = namenode_http_port(host, kwargs, env)
    if kwargs.get("user") is None and env.get("HADOOP_USER_NAME"):
        kwargs["user"] = env["HADOOP_USER_NAME"]
    timeout_s = float(kwargs.pop("timeout_s", min(REQUEST_TIMEOUT_S, limits.request_deadline_s)))
    try:
        fs = WebHDFS(host, skip_instance_cache=True, **kwargs)
    except (TypeError, ValueError) as exc:
        raise StorageError(f"{scheme}://{netloc}: invalid storage_options: {type(exc).__name__}", StorageReason.INVALID) from None
    # fsspec's WebHDFS sends its requests without a timeout and reads whole bodies: bound every one of them
    fs.session.request = _bounded_request(fs.session.request, timeout_s, limits.max_body_bytes)
    return WebHdfsStorage(fs, f"{scheme}://{netloc}/", limits)


class WebHdfsStorage(FsspecStorage):
    """HDFS through fsspec's ``WebHDFS`` (see the module docstring): files grow (``hflush``), identities are
    inode ids, and a growing file is read past its listed length.

    Attributes:
        hflush: always ``True``: the listed size of a file being written lags what readers can read.
    """

    hflush = True

    def __init__(self, fs: Any, prefix: str, limits: ReadLimits = DEFAULT_STORE_LIMITS) -> None:
        super().__init__(fs, prefix, object_store=False, limits=limits)
        # path -> the DataNode URL the NameNode redirected the last read of it to: later reads go there
        # directly with their own offset (one request instead of two); dropped on any failure
        self._datanodes: dict[str, str] = {}

    def open(self, path: str, entry: Entry | None = None, *, growing: bool = False) -> tuple[BinaryIO, Entry]:
        """A :class:`collectors.storage.RangeReader` of ``path``: bounded by the listed size, or, when
        ``growing`` (a file still being written), reading until the DataNode has no more bytes."""
        if entry is None or entry.is_dir:
            entry = self.info(path)
        reader = RangeReader(self, path, None if growing else entry.size)
        return reader, entry  # type: ignore[return-value]

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``path``, fewer at the visible end, none past it (WebHDFS ``OPEN``
        with ``offset`` and ``length``, through the NameNode's redirect to a DataNode).

        Raises:
            StorageError: of the kind :func:`collectors.storage.storage_error` gives (``NOT_FOUND`` for a
                deleted file, ``CREDENTIALS`` for a permission denied, ``UNREACHABLE``...).
        """
        return bytes(self._call(self.display(path), self._open_range, path, start, end))

    def _open_range(self, path: str, start: int, end: int) -> bytes:
        fs = self.fs
        known = self._datanodes.get(path)
        if known is not None:
            try:
                response = fs.session.get(_with_query(known, offset=start, length=end - start))
            except OSError:  # requests' errors: the DataNode went away (a restart moves it to another port)
                response = None
            if response is not None and response.status_code == 200:
                return bytes(response.content)
            if response is not None and _remote_exception(response)[0] == "EOFException":  # "Cannot seek after EOF"
                return b""  # past the visible end of a file being written: nothing new yet
            self._datanodes.pop(path, None)  # the DataNode or the file went away: ask the NameNode again
        url = fs._apply_proxy(fs.url + quote(path, safe="/="))
        params = {**fs.pars, "op": "OPEN", "offset": start, "length": end - start}
        response = fs.session.get(url, params=params, allow_redirects=False)
        location = response.headers.get("Location")
        if _remote_exception(response) == ("IOException", _OUT_OF_RANGE):
            # the NameNode checks the offset against its own (lagging) length of a file being written; the
            # DataNode reads through a DFSInputStream, which knows the hflushed length: take the NameNode's
            # redirect for offset 0 and ask that DataNode for the offset we want
            response = fs.session.get(url, params={**params, "offset": 0}, allow_redirects=False)
            location = response.headers.get("Location")
        _raise_for(response)
        if location is None:  # answered by the NameNode itself (a proxy, HttpFS)
            return bytes(response.content)
        location = fs._apply_proxy(_with_query(location, offset=start, length=end - start))
        response = fs.session.get(location)
        if _remote_exception(response)[0] == "EOFException":
            return b""
        _raise_for(response)
        self._datanodes[path] = location
        return bytes(response.content)


def _bounded_request(request: Callable[..., Any], timeout_s: float, max_response_bytes: int) -> Callable[..., Any]:
    """``requests.Session.request`` with a timeout of ``timeout_s`` seconds per connect and per read, whose
    answer's body is read here in 64 KiB steps, at most ``max_response_bytes`` (decoded), then kept as the
    response's ``content`` (what fsspec's ``WebHDFS`` and :class:`WebHdfsStorage` read).

    Raises:
        collectors.storage.ResponseTooLarge: a body (or, but on a ``HEAD``, a ``Content-Length``) beyond
            the limit; :func:`collectors.storage.storage_error` makes it ``BODY_TOO_LARGE``.
    """

    def send(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", timeout_s)
        kwargs["stream"] = True
        response = request(method, url, *args, **kwargs)
        announced = str(response.headers.get("Content-Length", ""))
        if method.upper() != "HEAD" and announced.isdigit() and int(announced) > max_response_bytes:
            response.close()
            raise ResponseTooLarge(max_response_bytes, int(announced))
        body = bytearray()
        for chunk in response.iter_content(_BODY_STEP_BYTES):
            body += chunk
            if len(body) > max_response_bytes:
                response.close()
                raise ResponseTooLarge(max_response_bytes)
        response._content = bytes(body)
        response._content_consumed = True
        return response

    return send


def _remote_exception(response: Any) -> tuple[str, str]:
    """``(exception, message marker)`` of a WebHDFS error response (``RemoteException`` JSON), ``("", "")``
    for a success or a body that is not one; the marker is :data:`_OUT_OF_RANGE` when the message has it."""
    if response.status_code < 400:
        return "", ""
    try:
        remote = response.json()["RemoteException"]
        exception, message = json_text(remote["exception"]), json_text(remote.get("message"))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):  # not a RemoteException object
        return "", ""
    return exception, _OUT_OF_RANGE if _OUT_OF_RANGE in message else ""


def _raise_for(response: Any) -> None:
    """Raise what fsspec's ``WebHDFS`` raises for a failed request (``FileNotFoundError``,
    ``PermissionError``, ...; :func:`collectors.storage.storage_error` classifies it), nothing on success."""
    exception, _ = _remote_exception(response)
    if exception == "FileNotFoundException":
        raise FileNotFoundError(f"WebHDFS {response.status_code} {exception}")
    if exception in ("AccessControlException", "SecurityException"):
        raise PermissionError(f"WebHDFS {response.status_code} {exception}")
    response.raise_for_status()


def _with_query(url: str, **params: int) -> str:
    """``url`` with the query parameters ``params`` set (replacing those of the same name)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update({k: str(v) for k, v in params.items()})
    return urlunsplit(parts._replace(query=urlencode(query)))
