"""Where event logs are kept: a local directory or a URL (S3, GCS, ADLS, HDFS), behind one small interface.

:func:`open_storage` turns what a user wrote (``/var/log/spark-events``, ``file:///...``, ``s3://bucket/
spark-events``, ``s3a://...``, ``gs://...``, ``abfs[s]://container@account.dfs.core.windows.net/...``,
``hdfs://namenode:8020/...``, ``webhdfs://host:9870/...``) into a :class:`Storage` and the path of the
target in it. Remote stores are reached through fsspec's implementations (s3fs, gcsfs, adlfs; HDFS through
WebHDFS with fsspec's own ``WebHDFS``, :mod:`collectors.hdfs`), installed as extras (:data:`SCHEMES` names them): a URL whose
library is missing raises a :class:`StorageError` of reason ``MISSING_LIBRARY`` whose one-line message
names the extra (``pip install 'tidegauge[s3]'``).

A :class:`Storage` answers four questions, whatever the store:

- :meth:`Storage.ls`: one directory level (a delimiter listing on object stores, paginated by the
  library), each entry an :class:`Entry` with size, ETag and modification time;
- :meth:`Storage.ls_after` (object stores that list in key order, S3): only the entries whose name sorts
  after a given one (``StartAfter``), so a poll need not list the whole prefix again;
- :meth:`Storage.info`: one entry;
- :meth:`Storage.open`: a seekable binary reader; on a remote store reads are ranged GETs (a small one
  for a file's head, then blocks of up to :data:`READ_BLOCK_BYTES` fetched ahead of the parser,
  :class:`RangeReader`), so reading resumes at a stored offset without fetching what was read before.

An :class:`Entry`'s ``identity`` changes when the file or object is replaced: ``"<st_dev>:<st_ino>"``
locally (what the event-log cursors have always stored), the ETag on S3/GCS/ADLS (the mtime where a store
gives none), the inode id on HDFS when the library gives it (else ``""``: a growing file's mtime moves).
``Storage.immutable`` is true on object stores: an object appears whole when it is written and never grows,
so an entry whose identity and size equal a cursor's need not be opened again.

Errors: every failure of a store is raised as a :class:`StorageError` whose ``reason``
(:class:`StorageReason`) says what kind it was (not found, credentials missing/expired/denied, throttled
after the library's own retries, unreachable, a library missing, a bad URL). Its message names the URL and
the store's error code, never a key, token or signed URL: library texts are not repeated beyond their
error code, and query strings and user-info are dropped from every URL shown.

Bounds (issue 19: a hostile or broken store must not take the process's memory or hang a poll), the same
:class:`collectors.http.ReadLimits` as the HTTP targets, one per target (``request_deadline``,
``poll_deadline``; ``max_body_bytes`` is the store's ``max_response_bytes``):

* **Deadline**: every request of an async store (s3fs, gcsfs, adlfs) runs through fsspec's
  :func:`fsspec.asyn.sync` with ``timeout=`` what is left of the request's deadline (or the poll's, if that
  comes first: :meth:`Storage.begin_poll`); on timeout the coroutine is cancelled on fsspec's loop (its
  ``asyncio.wait_for``), so it stops reading, and the failure is a :class:`StorageError` of reason
  ``DEADLINE_EXCEEDED`` (kind ``deadline_exceeded``, message as :class:`collectors.http.Deadline`'s).
  WebHDFS (``requests``, synchronous) has a timeout per request (:data:`collectors.hdfs.REQUEST_TIMEOUT_S`,
  cut to the deadline) and no request starts after the poll's deadline. botocore's ``connect_timeout`` and
  ``read_timeout`` default to :data:`S3_CONNECT_TIMEOUT_S` and the request deadline when the user set none.
* **Response size** (S3): botocore reads each answer through aiobotocore's aiohttp session; tidegauge
  passes its own session class (``AioConfig(http_session_cls=...)``, :func:`bounded_s3_session_cls`)
  whose every response body (listing XML, ranged GET, error document) is read in steps and refused past
  ``max_body_bytes`` (a ``Content-Length`` above it is refused before reading), as a :class:`StorageError`
  of reason ``BODY_TOO_LARGE``. gcsfs (its own aiohttp session) gets the same bound through
  ``session_kwargs={"response_class": ...}`` (:func:`bounded_response_cls`). adlfs answers (azure-core's
  transport) are bounded by the deadline only. WebHDFS answers (``requests``) are read in steps and cut
  at the same limit (:mod:`collectors.hdfs`).

Credentials come from each library's default chain (environment, profile, instance or workload identity)
unless ``storage_options`` pass them; ``AWS_ENDPOINT_URL`` (read by botocore) or ``endpoint_url`` points S3
at an S3-compatible store.
"""

from __future__ import annotations

import enum
import errno
import functools
import importlib.util
import os
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol, TypeVar
from urllib.parse import urlsplit

from fsspec.exceptions import FSTimeoutError
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from collectors.http import Deadline, ReadLimits
from monitor.errors import InputError
from monitor.model import ErrorKind

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_STORE_LIMITS",
    "READ_BLOCK_BYTES",
    "S3_CONNECT_TIMEOUT_S",
    "SCHEMES",
    "Entry",
    "FsspecStorage",
    "LocalStorage",
    "RangeReader",
    "ResponseTooLarge",
    "Scheme",
    "Storage",
    "StorageError",
    "StorageReason",
    "bounded_response_cls",
    "bounded_s3_session_cls",
    "is_url",
    "open_storage",
    "require_library",
    "storage_error",
]

#: Largest ranged GET of a remote read, and the size of each read-ahead (a file's head costs one request of
#: :data:`FIRST_READ_BYTES`), so a sequential read is few large requests and at most two blocks are held.
READ_BLOCK_BYTES = 16 << 20
FIRST_READ_BYTES = 64 << 10
#: Requests throttled (503 SlowDown, 429) even after the library's own retries are tried again this many
#: times in all, with random exponential backoff of up to :data:`THROTTLE_MAX_WAIT_S` (s3fs retries
#: SlowDown but not 429; gcsfs and adlfs retry both): then the poll reports a ``throttled`` error.
THROTTLE_ATTEMPTS = 3
THROTTLE_MAX_WAIT_S = 2.0
#: Bytes one answer of a store may have (``max_response_bytes``): two read blocks (a ranged GET asks for at
#: most one; a ``ListObjectsV2`` page of 1,000 keys is about 350 KB).
DEFAULT_MAX_RESPONSE_BYTES = 2 * READ_BLOCK_BYTES
#: Seconds botocore waits for a TCP connection to an S3 endpoint when ``config_kwargs`` set none.
S3_CONNECT_TIMEOUT_S = 5.0
#: The bounds of a store's reads when a target configures none.
DEFAULT_STORE_LIMITS = ReadLimits(max_body_bytes=DEFAULT_MAX_RESPONSE_BYTES)
_E = TypeVar("_E", bound=BaseException)
_BODY_STEP_BYTES = 64 * 1024  # bytes read from a store's answer per step (the most a step can overshoot)


@dataclass(frozen=True, slots=True)
class Scheme:
    """A URL scheme we read.

    Attributes:
        protocol: the fsspec protocol (``s3a`` is ``s3``: the same store through Hadoop's connector).
        extra: the tidegauge extra that installs its library (``pip install 'tidegauge[<extra>]'``).
        module: the library's import name (checked before use).
        object_store: objects appear whole and never grow (S3, GCS, ADLS); HDFS files grow (hflush).
    """

    protocol: str
    extra: str | None
    module: str | None
    object_store: bool


#: URL scheme -> how to read it. ``file`` is the local file system (no extra).
SCHEMES: dict[str, Scheme] = {
    "file": Scheme("file", None, None, object_store=False),
    "s3": Scheme("s3", "s3", "s3fs", object_store=True),
    "s3a": Scheme("s3", "s3", "s3fs", object_store=True),
    "gs": Scheme("gcs", "gcs", "gcsfs", object_store=True),
    "gcs": Scheme("gcs", "gcs", "gcsfs", object_store=True),
    "abfs": Scheme("abfs", "azure", "adlfs", object_store=True),
    "abfss": Scheme("abfs", "azure", "adlfs", object_store=True),
    "az": Scheme("abfs", "azure", "adlfs", object_store=True),
    "hdfs": Scheme("webhdfs", "hdfs", "requests", object_store=False),
    "webhdfs": Scheme("webhdfs", "hdfs", "requests", object_store=False),
}


class StorageReason(enum.StrEnum):
    """What kind of storage failure a :class:`StorageError` is."""

    NOT_FOUND = "not_found"  # no such file, object, prefix or bucket
    CREDENTIALS = "credentials"  # no credentials, expired or invalid ones, or access denied
    THROTTLED = "throttled"  # 503 SlowDown / 429 / rate exceeded, still after the library's retries
    UNREACHABLE = "unreachable"  # connection refused, DNS, timeout, a 5xx other than throttling
    MISSING_LIBRARY = "missing_library"  # the scheme's library (extra) is not installed
    INVALID = "invalid"  # a URL we cannot read (unknown scheme, no bucket, credentials in the URL)
    DEADLINE_EXCEEDED = "deadline_exceeded"  # no complete answer within the request's or the poll's deadline
    BODY_TOO_LARGE = "body_too_large"  # an answer longer than max_response_bytes


_RETRYABLE = {
    StorageReason.THROTTLED, StorageReason.UNREACHABLE, StorageReason.CREDENTIALS, StorageReason.NOT_FOUND,
    StorageReason.DEADLINE_EXCEEDED,
}


class StorageError(InputError):
    """A store could not be listed or read (see :class:`StorageReason`); the message names the URL and the
    store's error code, never a credential.

    Attributes:
        reason: what kind of failure.
        code: the store's error code when it gave one (``SlowDown``, ``ExpiredToken``, ``404``), else ``None``.
    """

    def __init__(self, message: str, reason: StorageReason, code: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code

    @property
    def retryable(self) -> bool:
        """Whether the next poll may succeed (everything but a missing library or a bad URL)."""
        return self.reason in _RETRYABLE

    def error_kind(self, *, root: bool) -> ErrorKind:
        """The :class:`monitor.model.ErrorKind` of this failure for a collector error: ``root`` when the
        target itself (its directory, its only file) failed, else one file among others (a missing file
        is then ``DELETED``: listed, then gone)."""
        if self.reason is StorageReason.CREDENTIALS:
            return ErrorKind.CREDENTIALS
        if self.reason is StorageReason.THROTTLED:
            return ErrorKind.THROTTLED
        if self.reason is StorageReason.DEADLINE_EXCEEDED:
            return ErrorKind.DEADLINE_EXCEEDED
        if self.reason is StorageReason.BODY_TOO_LARGE:
            return ErrorKind.BODY_TOO_LARGE
        if self.reason is StorageReason.NOT_FOUND and not root:
            return ErrorKind.DELETED
        return ErrorKind.UNREACHABLE if root else ErrorKind.FILE


@dataclass(frozen=True, slots=True)
class Entry:
    """One file, object or directory (prefix) of a listing.

    Attributes:
        path: its path in its :class:`Storage` (pass it back to :meth:`Storage.open`, :meth:`Storage.ls`).
        name: the last path segment.
        is_dir: a directory (a common prefix on object stores).
        size: bytes (0 for a directory).
        identity: changes when the file is replaced (see the module docstring); ``""`` for a directory.
        etag: the object store's ETag without quotes, when it has one.
        mtime: last modification, aware UTC, when known.
        mtime_ns: the same in integer nanoseconds since the epoch (``st_mtime_ns`` locally), when known.
        stored_bytes: bytes the file takes on disk (``st_blocks * 512``; a sparse file takes fewer than its
            size), when known (local files only).
    """

    path: str
    name: str
    is_dir: bool
    size: int
    identity: str = ""
    etag: str | None = None
    mtime: datetime | None = None
    mtime_ns: int | None = None
    stored_bytes: int | None = None


class Storage(Protocol):
    """A file system holding event logs: local (:class:`LocalStorage`) or remote (:class:`FsspecStorage`).

    Attributes:
        immutable: objects appear whole and never change in place (S3, GCS, ADLS): an entry equal to a
            cursor (identity and size) need not be opened.
        can_list_after: :meth:`ls_after` asks the store for only the names after a given one.
        hflush: the listed size of a file being written lags what a reader can read (HDFS: the NameNode
            learns a length at block ends and at close, readers see every ``hflush``): a growing file is
            opened with ``growing=True`` and read to its end, and its listed size says nothing.
    """

    immutable: bool
    can_list_after: bool
    hflush: bool

    def display(self, path: str) -> str:
        """``path`` as shown in messages (a URL for remote stores)."""
        ...

    def key(self, path: str) -> str:
        """``path`` as a cursor key: absolute, stable across processes (a URL for remote stores)."""
        ...

    def info(self, path: str) -> Entry:
        """The entry at ``path``. Raises :class:`StorageError` (``NOT_FOUND`` when there is none)."""
        ...

    def ls(self, path: str) -> list[Entry]:
        """The entries directly under the directory ``path``, sorted by name. Raises :class:`StorageError`."""
        ...

    def ls_after(self, path: str, after: str, name_prefix: str = "") -> list[Entry]:
        """:meth:`ls` restricted to names starting with ``name_prefix`` and sorting after ``after`` (the
        store is asked for only those where it can: :attr:`can_list_after`)."""
        ...

    def open(self, path: str, entry: Entry | None = None, *, growing: bool = False) -> tuple[BinaryIO, Entry]:
        """A binary reader of the file at ``path`` and its entry as opened (``entry``: as listed, to spare
        a request; ``growing``: the file is still being written, read it to the store's end where
        :attr:`hflush` says the listed size lags). Raises :class:`StorageError`."""
        ...

    def join(self, parent: str, name: str) -> str:
        """The path of ``name`` inside the directory ``parent``."""
        ...

    def begin_poll(self) -> None:
        """Start a poll: the requests made until the next call share its ``poll_deadline`` (remote stores)."""
        ...


def is_url(text: str) -> bool:
    """Whether ``text`` is a URL (``scheme://...``) rather than a local path (``C:\\`` is a path)."""
    scheme, sep, _ = text.partition("://")
    return bool(sep) and len(scheme) > 1 and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum()


def require_library(url: str) -> None:
    """Check that the library reading ``url``'s scheme is installed (``config check`` and :func:`open_storage`).

    Args:
        url: a URL of a scheme in :data:`SCHEMES` (anything else passes: it is refused elsewhere).

    Raises:
        StorageError: ``MISSING_LIBRARY``, one line naming the extra to install.
    """
    scheme_name = url.split("://", 1)[0].lower()
    scheme = SCHEMES.get(scheme_name)
    if scheme is not None and scheme.module is not None and importlib.util.find_spec(scheme.module) is None:
        raise StorageError(
            f"{_safe_url(url)}: reading {scheme_name}:// needs the {scheme.module} library: "
            f"pip install 'tidegauge[{scheme.extra}]' (or 'tidegauge[cloud]' for every store)",
            StorageReason.MISSING_LIBRARY,
        )


def open_storage(
    target: str | Path, storage_options: Mapping[str, Any] | None = None, limits: ReadLimits = DEFAULT_STORE_LIMITS
) -> tuple[Storage, str]:
    """The storage holding ``target`` and ``target``'s path in it.

    Args:
        target: a local path, or a URL of a scheme in :data:`SCHEMES` (``file://``, ``s3://``, ``s3a://``,
            ``gs://``, ``abfs[s]://``, ``hdfs://``, ``webhdfs://``).
        storage_options: keyword arguments of the fsspec file system (``s3fs.S3FileSystem``:
            ``key``, ``secret``, ``token``, ``endpoint_url``, ``client_kwargs``...; ``gcsfs.GCSFileSystem``;
            ``adlfs.AzureBlobFileSystem``: ``account_name``, ``account_key``, ``sas_token``...), secrets
            already resolved. Ignored for local paths.
        limits: the deadlines of its requests and polls and the bytes one answer may have (module docstring).

    Returns:
        ``(storage, path)``; nothing is contacted yet (credentials are looked up on first use).

    Raises:
        StorageError: ``INVALID`` (unknown scheme, no bucket, a password or query in the URL: credentials
            go in ``storage_options``), ``MISSING_LIBRARY`` (the message names the extra to install).
    """
    text = str(target)
    if not is_url(text):
        return LocalStorage(), text
    scheme_name = text.split("://", 1)[0].lower()
    shown = _safe_url(text)
    scheme = SCHEMES.get(scheme_name)
    if scheme is None:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise StorageError(f"{shown}: unsupported URL scheme {scheme_name}:// (known: {known})", StorageReason.INVALID)
    parts = urlsplit(text)
    if parts.password is not None or parts.query or parts.fragment:
        raise StorageError(
            f"{shown}: credentials, query strings and fragments are not read from the URL: give credentials in "
            "the environment or the store's default chain (e.g. AWS_ACCESS_KEY_ID, GOOGLE_APPLICATION_CREDENTIALS), "
            "or for a configured target in its storage_options as {env: NAME} or {file: PATH} references",
            StorageReason.INVALID,
        )
    if scheme.protocol == "file":
        return LocalStorage(), parts.path
    if not parts.netloc:
        raise StorageError(f"{shown}: the URL names no bucket, container or host", StorageReason.INVALID)
    require_library(text)
    if scheme.protocol == "webhdfs":
        from collectors.hdfs import open_webhdfs

        return open_webhdfs(scheme_name, parts.netloc, storage_options or {}, limits=limits), parts.path.rstrip("/") or "/"
    import fsspec

    options = dict(storage_options or {})
    if scheme.protocol == "s3":
        options["config_kwargs"] = _s3_config(options.get("config_kwargs"), limits)
    elif scheme.protocol == "gcs":
        options["session_kwargs"] = _gcs_session(options.get("session_kwargs"), limits)
    try:
        fs, path = fsspec.core.url_to_fs(f"{scheme.protocol}://{text.split('://', 1)[1]}", **options)
    except ImportError as exc:  # a dependency of the library itself
        raise StorageError(
            f"{shown}: reading {scheme_name}:// needs {exc.name or 'a library'}: pip install 'tidegauge[{scheme.extra}]'",
            StorageReason.MISSING_LIBRARY,
        ) from None
    except (TypeError, ValueError) as exc:
        raise StorageError(f"{shown}: invalid storage_options: {type(exc).__name__}", StorageReason.INVALID) from None
    prefix = f"{scheme_name}://" if scheme.protocol not in ("hdfs", "webhdfs") else f"{scheme_name}://{parts.netloc}/"
    return FsspecStorage(fs, prefix, object_store=scheme.object_store, limits=limits), path.rstrip("/")


def _s3_config(given: Any, limits: ReadLimits) -> dict[str, Any]:
    """s3fs's ``config_kwargs`` (botocore's ``AioConfig``): the user's, with timeouts where they set none
    and the bounded session class (:func:`bounded_s3_session_cls`)."""
    if given is not None and not isinstance(given, Mapping):
        raise StorageError("storage_options.config_kwargs: expected a mapping", StorageReason.INVALID)
    config = dict(given or {})
    config.setdefault("connect_timeout", S3_CONNECT_TIMEOUT_S)
    config.setdefault("read_timeout", limits.request_deadline_s)
    config.setdefault("http_session_cls", bounded_s3_session_cls(limits.max_body_bytes))
    return config


def _gcs_session(given: Any, limits: ReadLimits) -> dict[str, Any]:
    """gcsfs's ``session_kwargs`` (its ``aiohttp.ClientSession``'s): the user's, with the bounded response
    class (:func:`bounded_response_cls`) unless they set one."""
    if given is not None and not isinstance(given, Mapping):
        raise StorageError("storage_options.session_kwargs: expected a mapping", StorageReason.INVALID)
    session = dict(given or {})
    session.setdefault("response_class", bounded_response_cls(limits.max_body_bytes))
    return session


class ResponseTooLarge(Exception):
    """A store's answer longer than allowed (raised inside the library; :func:`storage_error` maps it).

    Attributes:
        cap: the bytes allowed (``max_response_bytes``).
        announced: the ``Content-Length`` when it announced more, else ``None`` (counted while reading).
    """

    def __init__(self, cap: int, announced: int | None = None) -> None:
        super().__init__(f"more than {cap} bytes")
        self.cap = cap
        self.announced = announced


class _BoundedStream:
    """An aiohttp :class:`aiohttp.StreamReader` whose reads are counted: past ``cap`` bytes in all, the read
    raises :class:`ResponseTooLarge` (a ``read()`` of everything reads in steps of 64 KiB, so at most
    ``cap`` plus a step is held; aiohttp's flow control pauses the socket meanwhile)."""

    def __init__(self, inner: Any, cap: int) -> None:
        self._inner = inner
        self._cap = cap
        self._count = 0

    def _take(self, chunk: bytes) -> bytes:
        self._count += len(chunk)
        if self._count > self._cap:
            raise ResponseTooLarge(self._cap)
        return chunk

    async def read(self, n: int = -1) -> bytes:
        if n is not None and n >= 0:
            return self._take(await self._inner.read(n))
        parts: list[bytes] = []
        while chunk := await self._inner.read(_BODY_STEP_BYTES):
            parts.append(self._take(chunk))
        return b"".join(parts)

    async def readany(self) -> bytes:
        return self._take(await self._inner.readany())

    async def readchunk(self) -> tuple[bytes, bool]:
        chunk, end = await self._inner.readchunk()
        return self._take(chunk), end

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@functools.cache
def bounded_response_cls(max_response_bytes: int) -> type:
    """An :class:`aiohttp.ClientResponse` class whose body is at most ``max_response_bytes`` (gcsfs:
    ``ClientSession(response_class=...)`` through its ``session_kwargs``; one class per limit).

    Its ``content`` stream is wrapped (:class:`_BoundedStream`) as soon as the headers are read
    (``ClientResponse.start``), before any body byte is read, so ``read()``, ``json()`` and
    ``content.read(n)`` are all counted; a ``Content-Length`` above the limit (but on a ``HEAD``) is refused
    at once.

    Raises (from a request or a read): :class:`ResponseTooLarge`, mapped by :func:`storage_error` to
    ``BODY_TOO_LARGE``.
    """
    import aiohttp

    class BoundedClientResponse(aiohttp.ClientResponse):
        async def start(self, connection: Any) -> aiohttp.ClientResponse:
            response = await super().start(connection)
            announced = self.content_length
            if self.method != "HEAD" and announced is not None and announced > max_response_bytes:
                self.close()
                raise ResponseTooLarge(max_response_bytes, announced)
            self.content = _BoundedStream(self.content, max_response_bytes)  # type: ignore[assignment]
            return response

    return BoundedClientResponse


@functools.cache
def bounded_s3_session_cls(max_response_bytes: int) -> type:
    """aiobotocore's aiohttp session class whose every response body is at most ``max_response_bytes``
    (passed to botocore as ``AioConfig(http_session_cls=...)``; one class per limit, so fsspec's cache of
    file systems keys on it).

    aiobotocore's ``AIOHTTPSession.send`` reads a whole non-streamed answer (a listing) with
    ``ClientResponse.read()`` and hands a streamed one (``GetObject``) to ``AioStreamingBody``, which reads
    ``ClientResponse.content``: both read the response's ``content`` stream, which this class wraps
    (:class:`_BoundedStream`) before anything is read. A ``Content-Length`` above the limit (but on a
    ``HEAD``, which announces the object's size) is refused before reading.

    Raises (from a request): :class:`ResponseTooLarge`, mapped by :func:`storage_error` to
    ``BODY_TOO_LARGE``.
    """
    from aiobotocore.httpsession import AIOHTTPSession

    class BoundedAIOHTTPSession(AIOHTTPSession):  # type: ignore[misc]
        async def send(self, request: Any) -> Any:
            streamed = request.stream_output
            request.stream_output = True  # nothing read yet: the stream is wrapped first
            try:
                response = await super().send(request)
            finally:
                request.stream_output = streamed
            raw = response.raw
            announced = raw.content_length
            if request.method != "HEAD" and announced is not None and announced > max_response_bytes:
                raw.close()
                raise ResponseTooLarge(max_response_bytes, announced)
            raw.content = _BoundedStream(raw.content, max_response_bytes)
            if not streamed:
                await response.content
            return response

    return BoundedAIOHTTPSession


def _safe_url(url: str) -> str:
    """``url`` without user-info password, query or fragment (it is shown in messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("?", 1)[0].split("#", 1)[0]
    netloc = parts.netloc.rsplit("@", 1)[-1] if "@" in parts.netloc and parts.password is not None else parts.netloc
    return f"{parts.scheme}://{netloc}{parts.path}"


class LocalStorage:
    """The local file system through :mod:`os` (paths kept as given, relative ones too; identity
    ``"<st_dev>:<st_ino>"``; files may grow, be renamed or rewritten in place)."""

    immutable = False
    can_list_after = False
    hflush = False  # fstat's size is what a reader can read

    def display(self, path: str) -> str:
        """``path`` itself."""
        return path

    def key(self, path: str) -> str:
        """The absolute path (``Path.absolute``, what event-log cursors have always been keyed by)."""
        return str(Path(path).absolute())

    @staticmethod
    def _entry(path: str, st: os.stat_result) -> Entry:
        is_dir = (st.st_mode & 0o170000) == 0o040000
        return Entry(
            path,
            os.path.basename(path.rstrip("/")) or path,
            is_dir,
            0 if is_dir else st.st_size,
            "" if is_dir else f"{st.st_dev}:{st.st_ino}",
            None,
            datetime.fromtimestamp(st.st_mtime, UTC),
            st.st_mtime_ns,
            blocks * 512 if isinstance(blocks := getattr(st, "st_blocks", None), int) else None,
        )

    def info(self, path: str) -> Entry:
        """``os.stat`` of ``path``. Raises :class:`StorageError`."""
        try:
            return self._entry(path, os.stat(path))
        except OSError as exc:
            raise storage_error(exc, path) from None

    def ls(self, path: str) -> list[Entry]:
        """``os.scandir`` of ``path`` (entries whose stat fails, e.g. a dangling link, are left out)."""
        out: list[Entry] = []
        try:
            with os.scandir(path) as it:
                for d in it:
                    try:
                        out.append(self._entry(self.join(path, d.name), d.stat()))
                    except OSError:
                        continue
        except OSError as exc:
            raise storage_error(exc, path) from None
        out.sort(key=lambda e: e.name)
        return out

    def ls_after(self, path: str, after: str, name_prefix: str = "") -> list[Entry]:
        """:meth:`ls` of the names after ``after`` (a local listing is cheap: filtered here)."""
        return [e for e in self.ls(path) if e.name > after and e.name.startswith(name_prefix)]

    def open(self, path: str, entry: Entry | None = None, *, growing: bool = False) -> tuple[BinaryIO, Entry]:
        """``open(path, "rb")`` and ``os.fstat`` of the open file (race-free identity; a growing file is read
        to its end whatever ``growing`` says)."""
        try:
            handle = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
        except OSError as exc:
            raise storage_error(exc, path) from None
        try:
            return handle, self._entry(path, os.fstat(handle.fileno()))
        except OSError as exc:
            handle.close()
            raise storage_error(exc, path) from None

    def join(self, parent: str, name: str) -> str:
        """``os.path.join``, keeping the parent as given."""
        return str(Path(parent) / name)

    def begin_poll(self) -> None:
        """Nothing: local reads have no deadline."""


class FsspecStorage:
    """A remote store through an fsspec file system (``fs``): listings without the library's cache,
    reads as ranged GETs (:class:`RangeReader`).

    Args:
        fs: the fsspec file system.
        prefix: what turns one of its paths into the URL shown (``"s3a://"``: the scheme the user wrote).
        object_store: S3/GCS/ADLS (immutable objects), as opposed to HDFS.
        limits: the deadlines of requests and polls (see the module docstring).
    """

    hflush = False

    def __init__(
        self,
        fs: Any,
        prefix: str,
        *,
        object_store: bool,
        throttle_attempts: int = THROTTLE_ATTEMPTS,
        limits: ReadLimits = DEFAULT_STORE_LIMITS,
    ) -> None:
        self.fs = fs
        self.prefix = prefix
        self.immutable = object_store
        self.can_list_after = type(fs).__name__ == "S3FileSystem"
        self.throttle_attempts = throttle_attempts
        self.limits = limits
        self._poll: Deadline | None = None
        # fsspec's async file systems (s3fs, gcsfs, adlfs): their sync methods take ``timeout=``
        self._async = bool(getattr(fs, "async_impl", False))

    def begin_poll(self) -> None:
        """Start a poll: requests from now on end by its ``poll_deadline_s`` as well as their own deadline."""
        self._poll = self.limits.poll_deadline()

    def request_deadline(self) -> Deadline:
        """The deadline of a request starting now (its own, or the poll's if that comes first)."""
        return self.limits.request_deadline(self._poll)

    def _call(self, where: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` with its failure as a :class:`StorageError`; a throttled one is tried
        again (:data:`THROTTLE_ATTEMPTS`, tenacity's random exponential backoff). On an async file system
        ``fn`` (an fsspec sync wrapper) is given ``timeout=`` what is left of the request's deadline; past
        it, the request is cancelled and the error is ``DEADLINE_EXCEEDED``."""

        def once() -> Any:
            deadline = self.request_deadline()
            left_s = deadline.remaining_s()
            if left_s <= 0:
                raise _deadline_error(deadline, where)
            try:
                if self._async:
                    return fn(*args, timeout=left_s, **kwargs)
                return fn(*args, **kwargs)
            except TimeoutError as exc:
                # fsspec's sync() timing out (FSTimeoutError), or a library's own timeout past the deadline;
                # a library's timeout before it (aiohttp's sock_read) is the store's failure
                if isinstance(exc, FSTimeoutError) or deadline.expired():
                    raise _deadline_error(deadline, where) from None
                raise storage_error(exc, where) from None
            except Exception as exc:
                raise storage_error(exc, where) from None

        retrying = Retrying(
            retry=retry_if_exception(lambda e: isinstance(e, StorageError) and e.reason is StorageReason.THROTTLED),
            stop=stop_after_attempt(self.throttle_attempts),
            wait=wait_random_exponential(multiplier=0.25, max=THROTTLE_MAX_WAIT_S),
            reraise=True,
        )
        return retrying(once)

    def display(self, path: str) -> str:
        """``<scheme>://<path>`` (never credentials: they are not in paths)."""
        return self.prefix + path.lstrip("/") if self.prefix.endswith("/") else self.prefix + path

    def key(self, path: str) -> str:
        """The URL (:meth:`display`)."""
        return self.display(path)

    def _entry(self, info: Mapping[str, Any]) -> Entry:
        name = str(info.get("name", "")).rstrip("/")
        is_dir = info.get("type") == "directory"
        etag_raw = info.get("ETag", info.get("etag"))
        etag = str(etag_raw).strip('"') if etag_raw else None
        mtime = _mtime(info)
        size = int(info.get("size") or 0)
        if is_dir:
            identity = ""
        elif not self.immutable:
            # HDFS: a growing file keeps its inode id (WebHDFS ``fileId``) while its mtime moves; without an
            # id, rewrites are caught by the collector's size and head checks
            file_id = info.get("fileId", info.get("id"))
            identity = f"id:{file_id}" if file_id is not None else ""
        elif etag:
            identity = f"etag:{etag}"
        else:
            identity = f"mtime:{mtime.isoformat() if mtime else '?'}"
        mtime_ns = int(mtime.timestamp() * 1_000_000) * 1000 if mtime is not None else None
        return Entry(name, PurePosixPath(name).name, is_dir, 0 if is_dir else size, identity, etag, mtime, mtime_ns)

    def info(self, path: str) -> Entry:
        """The store's metadata of ``path`` (a HEAD request on object stores)."""
        self.fs.invalidate_cache(path)
        return self._entry(self._call(self.display(path), self.fs.info, path))

    def ls(self, path: str) -> list[Entry]:
        """One level under ``path`` (a delimiter listing, every page), never from the library's cache."""
        self.fs.invalidate_cache(path)
        infos = self._call(self.display(path), self.fs.ls, path, detail=True)
        out = [self._entry(i) for i in infos if str(i.get("name", "")).rstrip("/") != path.rstrip("/")]
        out.sort(key=lambda e: e.name)
        return out

    def ls_after(self, path: str, after: str, name_prefix: str = "") -> list[Entry]:
        """On S3: ``ListObjectsV2`` with ``Prefix=<path>/<name_prefix>`` and ``StartAfter=<path>/<after>``
        (only those names are paged through); elsewhere :meth:`ls`, filtered."""
        if not self.can_list_after:
            return [e for e in self.ls(path) if e.name > after and e.name.startswith(name_prefix)]
        bucket, _, key = path.partition("/")
        base = f"{key}/" if key else ""
        prefix = base + name_prefix
        out: list[Entry] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/", "StartAfter": base + after}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call(self.display(path), self.fs.call_s3, "list_objects_v2", **kwargs)
            for p in page.get("CommonPrefixes", []):
                name = f"{bucket}/{p['Prefix'].rstrip('/')}"
                out.append(Entry(name, PurePosixPath(name).name, True, 0))
            for o in page.get("Contents", []):
                name = f"{bucket}/{o['Key']}"
                if o["Key"] == prefix:
                    continue
                out.append(
                    self._entry({"name": name, "type": "file", "size": o.get("Size"), "ETag": o.get("ETag"),
                                 "LastModified": o.get("LastModified")})
                )
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                break
        out = [e for e in out if e.name > after and e.name.startswith(name_prefix)]
        out.sort(key=lambda e: e.name)
        return out

    def open(self, path: str, entry: Entry | None = None, *, growing: bool = False) -> tuple[BinaryIO, Entry]:
        """A :class:`RangeReader` of ``path`` (its size and identity from ``entry``, else a HEAD; object
        stores have no growing files: ``growing`` is not looked at)."""
        if entry is None or entry.is_dir:
            entry = self.info(path)
        return RangeReader(self, path, entry.size), entry  # type: ignore[return-value]

    def join(self, parent: str, name: str) -> str:
        """``parent/name``."""
        return f"{parent.rstrip('/')}/{name}"

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``path`` (one ranged GET). Raises :class:`StorageError`."""
        data: bytes = self._call(self.display(path), self.fs.cat_file, path, start=start, end=end)
        return data


def _deadline_error(deadline: Deadline, where: str) -> StorageError:
    """The ``DEADLINE_EXCEEDED`` error of a request to ``where`` (:meth:`collectors.http.Deadline.failure`'s
    message)."""
    return StorageError(deadline.failure(where).message, StorageReason.DEADLINE_EXCEEDED)


def _mtime(info: Mapping[str, Any]) -> datetime | None:
    raw = info.get("LastModified", info.get("last_modified", info.get("updated", info.get("mtime"))))
    if raw is None and info.get("modificationTime") is not None:  # WebHDFS: epoch milliseconds
        raw = float(info["modificationTime"]) / 1000.0
    if isinstance(raw, datetime):
        return raw.astimezone(UTC) if raw.tzinfo else raw.replace(tzinfo=UTC)
    if isinstance(raw, int | float):
        return datetime.fromtimestamp(float(raw), UTC)
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


class RangeReader:
    """A read-only, seekable binary file over ranged reads of a remote file of known ``size``.

    Each read past the buffer fetches ``[pos, pos + max(n, b))`` in one request, ``b`` growing from
    :data:`FIRST_READ_BYTES` 4x per request up to ``block_bytes``, so reading a file's head costs one small
    request and a seek to a stored offset fetches nothing before it. Once a read continues where the
    previous request ended (a sequential read of a file of known size), the following ``block_bytes`` are
    asked for in a background thread *before* this read's own request is sent, and each block taken from
    that read-ahead starts the next one: a sequential read is one small request, then full blocks whose
    fetch overlaps the caller's decompressing and parsing (a remote read costs one request's latency
    before parsing starts, not a ramp of growing requests each waited for: each request costs ~65 ms on
    WebHDFS). At most the buffer (a block plus the unread tail) and one block ahead are held. ``size`` is the
    one listed, or ``None`` for a file still being written whose listed size lags (HDFS,
    :attr:`Storage.hflush`): reads then go on until the store returns fewer bytes than asked (no
    read-ahead). Errors are :class:`StorageError` (a read-ahead's error is raised by the read that needs its
    bytes).
    """

    def __init__(
        self, storage: FsspecStorage, path: str, size: int | None, block_bytes: int = READ_BLOCK_BYTES
    ) -> None:
        self._storage = storage
        self._path = path
        self.size = size
        self._block = block_bytes
        self._next = min(FIRST_READ_BYTES, block_bytes)
        self._pos = 0
        self._buf = b""
        self._buf_start = 0
        self._ahead: Future[bytes] | None = None
        self._ahead_start = -1
        self._pool: ThreadPoolExecutor | None = None
        self.closed = False

    def _fetch(self, start: int) -> bytes:
        """The block at ``start``: the read-ahead when it is that one, else a request now."""
        if self._ahead is not None and self._ahead_start == start:
            ahead, self._ahead = self._ahead, None
            return ahead.result()
        end = start + self._next if self.size is None else min(self.size, start + self._next)
        return self._storage.read_range(self._path, start, end)

    def _read_ahead(self, start: int) -> None:
        """Fetch ``[start, start + block)`` (within the size) in the background."""
        assert self.size is not None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tidegauge-readahead")
        self._ahead_start = start
        end = min(self.size, start + self._block)
        self._ahead = self._pool.submit(self._storage.read_range, self._path, start, end)

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes from the position (all that is left when ``n < 0``; fewer near a block's end,
        as a raw file may return)."""
        if self.size is None:
            return self._read_open_ended(READ_BLOCK_BYTES if n is None or n < 0 else n)
        if self._pos >= self.size:
            return b""
        want = self.size - self._pos if n is None or n < 0 else min(n, self.size - self._pos)
        rel = self._pos - self._buf_start
        if not (rel >= 0 and rel + want <= len(self._buf)):
            sequential = bool(self._buf) and 0 <= rel <= len(self._buf)
            tail = self._buf[rel:] if sequential else b""  # the unread rest of the buffer, kept
            start = self._pos + len(tail)
            self._next = max(self._next, want - len(tail))
            if self._ahead is not None and self._ahead_start != start:  # after a seek: not wanted
                self._ahead.cancel()
                self._ahead = None
            if sequential and self._ahead is None and start + self._next < self.size:
                # the read-ahead of the block after this request goes out first: both in flight at once
                self._read_ahead(start + self._next)
            block = self._fetch(start)
            self._buf, self._buf_start, rel = tail + block, self._pos, 0
            self._next = min(self._next * 4, max(self._block, want))  # fewer, larger requests
            end = start + len(block)
            if sequential and block and end < self.size and self._ahead is None:
                self._read_ahead(end)
            want = min(want, len(self._buf))
        data = self._buf[rel : rel + want]
        self._pos += len(data)
        return data

    def _read_open_ended(self, n: int) -> bytes:
        """:meth:`read` of a file without a known size: from the buffer when it holds the position, else one
        ranged read of ``max(n, next block)`` bytes (fewer, or none, at the file's current end)."""
        rel = self._pos - self._buf_start
        if not (0 <= rel < len(self._buf)):
            start = self._pos
            self._buf = self._storage.read_range(self._path, start, start + max(n, self._next))
            self._next = min(self._next * 4, self._block)
            self._buf_start = start
            rel = 0
        data = self._buf[rel : rel + n]
        self._pos += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        """Move the position (no request; ``whence=2`` needs a known size)."""
        if whence == 2 and self.size is None:
            raise OSError("seek from the end of a file whose size is not known (still being written)")
        base = {0: 0, 1: self._pos, 2: self.size or 0}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        """The position in bytes."""
        return self._pos

    def close(self) -> None:
        """Drop the buffer and any read-ahead."""
        self._buf = b""
        if self._ahead is not None:
            self._ahead.cancel()
            self._ahead = None
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self.closed = True

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_CREDENTIAL_CODES = {
    "ExpiredToken", "ExpiredTokenException", "TokenRefreshRequired", "InvalidAccessKeyId", "InvalidToken",
    "SignatureDoesNotMatch", "AccessDenied", "AllAccessDisabled", "AuthenticationFailed",
    "AuthorizationFailure", "AuthorizationPermissionMismatch", "InvalidAuthenticationInfo", "401", "403",
    "NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError", "DefaultCredentialsError",
    "RefreshError", "ClientAuthenticationError",
}
_THROTTLE_CODES = {
    "SlowDown", "Throttling", "ThrottlingException", "TooManyRequests", "TooManyRequestsException",
    "RequestLimitExceeded", "RequestThrottled", "ServerBusy", "429", "503", "rateLimitExceeded",
}
_NOT_FOUND_CODES = {"NoSuchKey", "NoSuchBucket", "NotFound", "404", "BlobNotFound", "ContainerNotFound", "PathNotFound"}
_NO_CONTAINER_CODES = {"NoSuchBucket", "ContainerNotFound"}  # the store answered: its bucket/container is missing


def _codes(exc: BaseException) -> list[str]:
    """Error codes and HTTP statuses found on ``exc`` and its causes (botocore, gcsfs, azure-core)."""
    out: list[str] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(type(cur).__name__)
        response = getattr(cur, "response", None)
        if isinstance(response, dict):
            err = response.get("Error") or {}
            if err.get("Code"):
                out.append(str(err["Code"]))
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if status:
                out.append(str(status))
        for attr in ("error_code", "code", "status_code", "status"):
            value = getattr(cur, attr, None)
            if isinstance(value, int | str) and not isinstance(value, bool) and value:
                out.append(str(value))
        if isinstance(cur, OSError) and cur.errno == errno.EBUSY:
            out.append("SlowDown")
        cur = cur.__cause__ or cur.__context__
    return out


def _find(exc: BaseException, kind: type[_E]) -> _E | None:
    """``exc`` or the first of its causes/contexts that is a ``kind``."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, kind):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def storage_error(exc: BaseException, where: str) -> StorageError:
    """``exc`` raised by a store's library while reading ``where`` (a path or URL) as a typed
    :class:`StorageError`: the reason from the error codes of ``exc`` and its causes, the message
    ``"<where>: <what> (<code>)"`` without the library's text (which may quote a signed URL)."""
    if isinstance(exc, StorageError):
        return exc
    too_large = _find(exc, ResponseTooLarge)
    if too_large is not None:
        what = (
            f"announces {too_large.announced:,} bytes, more than the {too_large.cap:,} allowed"
            if too_large.announced is not None
            else f"sent more than the {too_large.cap:,} bytes allowed"
        )
        return StorageError(
            f"body too large: the store's answer for {where} {what} (max_response_bytes)", StorageReason.BODY_TOO_LARGE
        )
    codes = _codes(exc)
    code = next((c for c in codes if c in _CREDENTIAL_CODES | _THROTTLE_CODES | _NOT_FOUND_CODES), None)
    if any(c in _THROTTLE_CODES for c in codes):
        return StorageError(f"{where}: throttled by the store ({code}) after retries", StorageReason.THROTTLED, code)
    if any(c in _NO_CONTAINER_CODES for c in codes):
        container = next(c for c in codes if c in _NO_CONTAINER_CODES)
        return StorageError(
            f"{where}: the bucket or container does not exist ({container})", StorageReason.NOT_FOUND, container
        )
    if isinstance(exc, FileNotFoundError) or any(c in _NOT_FOUND_CODES for c in codes):
        return StorageError(f"{where}: no such file or directory", StorageReason.NOT_FOUND, code)
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror and len(codes) == 1:
        # a local file system's error (permission denied, not a directory, ...): its own words
        return StorageError(f"{where}: {exc.strerror}", StorageReason.UNREACHABLE, code)
    if isinstance(exc, PermissionError) or any(c in _CREDENTIAL_CODES for c in codes):
        what = "credentials missing, expired or invalid, or access denied"
        return StorageError(f"{where}: {what} ({code or type(exc).__name__})", StorageReason.CREDENTIALS, code)
    if isinstance(exc, OSError) and exc.strerror:
        return StorageError(f"{where}: {exc.strerror}", StorageReason.UNREACHABLE, code)
    return StorageError(f"{where}: cannot reach the store ({type(exc).__name__})", StorageReason.UNREACHABLE, code)
