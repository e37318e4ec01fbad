"""``socket``: lines of UTF-8 text read from a TCP server, for testing.

Lines live only in this process's memory until their batch is committed, and a restarted
query cannot read them again: the source is not fault tolerant.

The connection is made by the :class:`SocketStreamReader` of each query run, which receives
on a background thread. Its splits carry the lines they cover, so that the
:class:`SocketSplitReader` holds no connection, pickles, and reads a split in any process.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

import microbatch as mb
from microbatch.errors import SourceError

__all__ = ["SocketSource", "SocketSplit", "SocketSplitReader", "SocketStreamReader"]

log = logging.getLogger(__name__)

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_CHUNK_ROWS = 65_536
_RECEIVE_BYTES = 65_536
_OFFSET_SHAPE = '{"offset": <number of lines received>}'


def _schema(include_timestamp: bool) -> pa.Schema:
    fields = [pa.field("value", pa.string())]
    if include_timestamp:
        fields.append(pa.field("timestamp", _TIMESTAMP))
    return pa.schema(fields)


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class SocketSource(mb.Source):
    """Lines read from ``host:port``, one row each, as Spark's ``socket`` source.

    Making one does no I/O: each query run's :class:`SocketStreamReader` connects when the
    query starts and reads on a background thread. Lines are split on ``\\n`` (a trailing
    ``\\r`` is dropped) and decoded as UTF-8, invalid bytes replaced. The offset
    ``{"offset": N}`` counts the lines received; a committed batch's lines are dropped from
    memory. When the server closes the connection the source keeps what it received and
    produces nothing more.

    No error is retried (none is mapped to :class:`~microbatch.RetriableError`): the server
    sends each line once, so re-running a batch or reconnecting cannot bring back lines that
    a lost connection or a stopped process never delivered.
    """

    format_name = "socket"
    description = "Lines of text read from a TCP server, for testing (not fault tolerant)."
    options = mb.OptionSpec(
        mb.Option(
            name="host",
            required=True,
            doc='Host name or address of the server to read from: option("host", "localhost").',
        ),
        mb.Option(
            name="port",
            type="int",
            required=True,
            minimum=1,
            maximum=65535,
            doc='TCP port of the server to read from, e.g. option("port", 9999).',
        ),
        mb.Option(
            name="includeTimestamp",
            type="bool",
            default=False,
            doc="Add a column 'timestamp' holding the time each line was received.",
        ),
        mb.Option(
            name="numPartitions",
            type="int",
            minimum=1,
            doc="Accepted for compatibility with Spark and ignored: every batch is one split.",
        ),
    )
    capabilities = mb.SourceCapabilities(
        replayable=False, streaming_only="use session.read_stream.format('socket')"
    )
    connect_timeout: ClassVar[float] = 10.0
    """Seconds to wait for the server to accept the connection."""

    def schema(self) -> pa.Schema:
        return _schema(self.opts.include_timestamp)

    def describe(self) -> str:
        return f"SocketSource[host={self.opts.host}, port={self.opts.port}]"

    def stream_reader(self, context: mb.ReadContext) -> SocketStreamReader:
        """Connect to the server (a :class:`~microbatch.SourceError` naming ``host:port`` when
        that fails) and start receiving."""
        return SocketStreamReader(
            host=self.opts.host,
            port=self.opts.port,
            include_timestamp=self.opts.include_timestamp,
            wake=context.wake,
            connect_timeout=type(self).connect_timeout,
        )


@dataclass(frozen=True, repr=False)
class SocketSplit(mb.Split):
    """Lines ``start + 1`` to ``end`` of the stream, with the lines themselves (those still
    held when the batch was planned) and their arrival times in epoch microseconds.

    Unlike most splits it carries its data: the lines exist only in the memory of the process
    that received them.
    """

    start: int
    end: int
    lines: tuple[str, ...] = ()
    stamps: tuple[int, ...] = ()

    def __repr__(self) -> str:  # the lines themselves may be many: keep messages short
        return f"SocketSplit(start={self.start}, end={self.end}, {len(self.lines)} lines)"


class SocketSplitReader(mb.SplitReader):
    """Turns a :class:`SocketSplit`'s lines into record batches; holds only the schema's
    shape, so it pickles and reads anywhere."""

    def __init__(self, *, include_timestamp: bool) -> None:
        self.include_timestamp = include_timestamp

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        if not isinstance(split, SocketSplit):
            raise SourceError(
                f"split {split!r} was not planned by the socket source: expected a "
                "SocketSplit(start, end, lines, stamps)"
            )
        schema = _schema(self.include_timestamp)
        lines, stamps = split.lines, split.stamps
        for begin in range(0, len(lines), _CHUNK_ROWS):
            columns = [pa.array(lines[begin : begin + _CHUNK_ROWS], pa.string())]
            if self.include_timestamp:
                chunk = pa.array(stamps[begin : begin + _CHUNK_ROWS], pa.int64())
                columns.append(chunk.view(_TIMESTAMP))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)


class SocketStreamReader(mb.StreamReader):
    """One run's connection: receives lines on a background thread and numbers them.

    Counts the lines it could not hand to a batch (those of a batch replayed after a restart,
    or already dropped by a commit) in the progress metric ``linesLost``.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        include_timestamp: bool,
        wake: Callable[[], None],
        connect_timeout: float,
    ) -> None:
        self.host = host
        self.port = port
        self.address = _address(host, port)
        self.include_timestamp = include_timestamp
        self.connect_timeout = connect_timeout
        self._wake = wake
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._stamps: list[int] = []
        self._first = 0  # the offset number of self._lines[0]
        self._anchored = False  # whether _first is known (set by the first offset we see)
        self._stopping = False
        self._lost = 0
        self._received = 0
        self._latest: mb.Offset | None = None
        self._finished = threading.Event()
        self._split_reader = SocketSplitReader(include_timestamp=include_timestamp)
        self._socket = self._connect()
        self._thread = threading.Thread(
            target=self._receive, name=f"microbatch-socket-{self.address}", daemon=True
        )
        self._thread.start()

    @property
    def connected(self) -> bool:
        """False once the server closed the connection, the connection failed or ``stop()``."""
        return not self._finished.is_set()

    @property
    def buffered_lines(self) -> int:
        """How many received lines are held in memory (not yet committed)."""
        with self._lock:
            return len(self._lines)

    @property
    def lines_received(self) -> int:
        """How many lines this run has received, committed or not."""
        with self._lock:
            return self._received

    def initial_offset(self) -> mb.Offset:
        with self._lock:
            self._anchor(0)
        return {"offset": 0}

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        current = _lines(start)
        with self._lock:
            self._anchor(current)
            available = max(current, self._first + len(self._lines))
        self._latest = {"offset": available}
        end = available
        if isinstance(limit, mb.ReadMaxRows):
            end = min(end, current + limit.max_rows)
        return start if end == current else {"offset": end}

    def report_latest_offset(self) -> mb.Offset | None:
        """The number of lines received at the last :meth:`latest_offset` (beyond the batch's
        end when a row limit holds lines back)."""
        return self._latest

    def partitions(self, start: mb.Offset, end: mb.Offset) -> list[SocketSplit]:
        first, last = _lines(start), _lines(end)
        if last < first:
            raise SourceError(
                f"socket source asked for a batch that ends before it starts: {start} > {end}"
            )
        with self._lock:
            if not self._anchored:
                # A batch replayed after a restart: its lines were in the previous run's memory.
                log.warning(
                    "The socket source cannot replay lines %d to %d after a restart; they are "
                    "lost. New lines from %s are numbered from %d.",
                    first + 1,
                    last,
                    self.address,
                    last + 1,
                )
                self._anchor(last)
                self._lost += last - first
                return [SocketSplit(first, last)]
            low = max(first, self._first)
            high = max(low, min(last, self._first + len(self._lines)))
            lines = tuple(self._lines[low - self._first : high - self._first])
            stamps = tuple(self._stamps[low - self._first : high - self._first])
        if high - low < last - first:
            self._lost += last - first - (high - low)
            log.warning(
                "The socket source no longer holds all of lines %d to %d (only %d of them); "
                "the others are not read again.",
                first + 1,
                last,
                high - low,
            )
        return [SocketSplit(first, last, lines, stamps)]

    def split_reader(self) -> SocketSplitReader:
        return self._split_reader

    def commit(self, end: mb.Offset) -> None:
        last = _lines(end)
        with self._lock:
            done = min(max(0, last - self._first), len(self._lines))
            del self._lines[:done]
            del self._stamps[:done]
            self._first += done

    def metrics(self) -> dict[str, Any]:
        """``linesLost`` once some lines could not be read (see the class docstring)."""
        return {"linesLost": self._lost} if self._lost else {}

    def stop(self) -> None:
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
        with contextlib.suppress(OSError):  # OSError: already disconnected
            self._socket.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in recv()
        self._thread.join(timeout=self.connect_timeout)
        self._socket.close()

    # -- receiving ------------------------------------------------------------------------
    def _connect(self) -> socket.socket:
        try:
            connection = socket.create_connection(
                (self.host, self.port), timeout=self.connect_timeout
            )
        except OSError as error:
            reason = error.strerror or str(error) or type(error).__name__
            raise SourceError(
                f"The socket source cannot connect to {self.address}: {reason}. Start a server "
                f"there first (for example `nc -lk {self.port}`) or fix the 'host' and 'port' "
                "options."
            ) from error
        connection.settimeout(None)
        return connection

    def _receive(self) -> None:
        pending = bytearray()
        try:
            while True:
                chunk = self._socket.recv(_RECEIVE_BYTES)
                if not chunk:
                    break
                pending += chunk
                cut = pending.rfind(b"\n")
                if cut >= 0:
                    complete = bytes(pending[:cut]).split(b"\n")
                    del pending[: cut + 1]
                    self._append(complete)
        except OSError as error:
            if not self._stopping:
                log.warning("The socket source lost its connection to %s: %s", self.address, error)
        finally:
            if pending and not self._stopping:
                self._append([bytes(pending)])  # the last line may lack its newline
            if not self._stopping:
                log.info("The server at %s closed the connection; no more lines.", self.address)
            self._finished.set()

    def _append(self, raw_lines: list[bytes]) -> None:
        now = time.time_ns() // 1000
        lines = [line.removesuffix(b"\r").decode("utf-8", errors="replace") for line in raw_lines]
        with self._lock:
            self._lines.extend(lines)
            self._stamps.extend([now] * len(lines))
            self._received += len(lines)
        try:
            self._wake()
        except Exception:  # the engine's callback must not kill the reader thread
            log.exception("wake() of the socket source failed")

    def _anchor(self, offset: int) -> None:
        """Number the lines held from ``offset`` on, the first time an offset is known."""
        if not self._anchored:
            self._first = offset
            self._anchored = True


def _lines(offset: mb.Offset) -> int:
    value = offset.get("offset") if isinstance(offset, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SourceError(
            f"offset {offset!r} was not made by the socket source: expected {_OFFSET_SHAPE}. "
            "Was the checkpoint written by a query with another source?"
        )
    return value
