"""``socket``: lines of UTF-8 text read from a TCP server, for testing.

Lines live only in this process's memory until their batch is committed, and a restarted
query cannot read them again: the source is not fault tolerant.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pyarrow as pa

from microbatch import Offset, Option, OptionSpec, ReadLimit, ReadMaxRows, Source, SourceContext
from microbatch.errors import SourceError, UnsupportedOperationError

__all__ = ["SocketSource"]

log = logging.getLogger(__name__)

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_CHUNK_ROWS = 65_536
_RECEIVE_BYTES = 65_536
_OFFSET_SHAPE = '{"offset": <number of lines received>}'


class SocketSource(Source):
    """Lines read from ``host:port``, one row each, as Spark's ``socket`` source.

    The source connects when it is created and reads on a background thread. Lines are split
    on ``\\n`` (a trailing ``\\r`` is dropped) and decoded as UTF-8, invalid bytes replaced.
    The offset ``{"offset": N}`` counts the lines received; a committed batch's lines are
    dropped from memory. When the server closes the connection the source keeps what it
    received and produces nothing more.
    """

    format_name = "socket"
    description = "Lines of text read from a TCP server, for testing (not fault tolerant)."
    replayable = False
    options = OptionSpec(
        Option(
            name="host",
            required=True,
            doc='Host name or address of the server to read from: option("host", "localhost").',
        ),
        Option(
            name="port",
            type="int",
            required=True,
            minimum=1,
            maximum=65535,
            doc='TCP port of the server to read from, e.g. option("port", 9999).',
        ),
        Option(
            name="includeTimestamp",
            type="bool",
            default=False,
            doc="Add a column 'timestamp' holding the time each line was received.",
        ),
        Option(
            name="numPartitions",
            type="int",
            minimum=1,
            doc="Accepted for compatibility with Spark and ignored: every batch is one split.",
        ),
    )
    connect_timeout: ClassVar[float] = 10.0
    """Seconds to wait for the server to accept the connection."""

    def __init__(self, context: SourceContext) -> None:
        super().__init__(context)
        if not context.streaming:
            raise UnsupportedOperationError(
                "The socket source only supports streaming reads: use "
                "session.read_stream.format('socket')."
            )
        self.host: str = self.opts.host
        self.port: int = self.opts.port
        self.include_timestamp: bool = self.opts.include_timestamp
        self.address = (
            f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        )
        fields = [pa.field("value", pa.string())]
        if self.include_timestamp:
            fields.append(pa.field("timestamp", _TIMESTAMP))
        self._schema = pa.schema(fields)
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._stamps: list[int] = []
        self._first = 0  # the offset number of self._lines[0]
        self._anchored = False  # whether _first is known (set by the first offset we see)
        self._stopping = False
        self._finished = threading.Event()
        self._socket = self._connect()
        self._thread = threading.Thread(
            target=self._receive, name=f"microbatch-socket-{self.address}", daemon=True
        )
        self._thread.start()

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    @property
    def connected(self) -> bool:
        """False once the server closed the connection, the connection failed or ``stop()``."""
        return not self._finished.is_set()

    @property
    def buffered_lines(self) -> int:
        """How many received lines are held in memory (not yet committed)."""
        with self._lock:
            return len(self._lines)

    def describe(self) -> str:
        return f"SocketSource[host={self.host}, port={self.port}]"

    def initial_offset(self) -> Offset:
        with self._lock:
            self._anchor(0)
        return {"offset": 0}

    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        current = _lines(start)
        with self._lock:
            self._anchor(current)
            end = max(current, self._first + len(self._lines))
        if isinstance(limit, ReadMaxRows):
            end = min(end, current + limit.max_rows)
        return start if end == current else {"offset": end}

    def plan(self, start: Offset, end: Offset) -> list[Any]:
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
        return [{"start": first, "end": last}]

    def read(self, split: Any) -> Iterator[pa.RecordBatch]:
        first, last = _split_range(split)
        with self._lock:
            low = max(first, self._first)
            high = max(low, min(last, self._first + len(self._lines)))
            lines = self._lines[low - self._first : high - self._first]
            stamps = self._stamps[low - self._first : high - self._first]
        if high - low < last - first:
            log.warning(
                "The socket source no longer holds all of lines %d to %d (only %d of them); "
                "the others are not read again.",
                first + 1,
                last,
                high - low,
            )
        for begin in range(0, len(lines), _CHUNK_ROWS):
            columns = [pa.array(lines[begin : begin + _CHUNK_ROWS], pa.string())]
            if self.include_timestamp:
                chunk = pa.array(stamps[begin : begin + _CHUNK_ROWS], pa.int64())
                columns.append(chunk.view(_TIMESTAMP))
            yield pa.RecordBatch.from_arrays(columns, schema=self._schema)

    def commit(self, end: Offset) -> None:
        last = _lines(end)
        with self._lock:
            done = min(max(0, last - self._first), len(self._lines))
            del self._lines[:done]
            del self._stamps[:done]
            self._first += done

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
        try:
            self.context.wake()
        except Exception:  # the engine's callback must not kill the reader thread
            log.exception("wake() of the socket source failed")

    def _anchor(self, offset: int) -> None:
        """Number the lines held from ``offset`` on, the first time an offset is known."""
        if not self._anchored:
            self._first = offset
            self._anchored = True


def _lines(offset: Offset) -> int:
    value = offset.get("offset") if isinstance(offset, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SourceError(
            f"offset {offset!r} was not made by the socket source: expected {_OFFSET_SHAPE}. "
            "Was the checkpoint written by a query with another source?"
        )
    return value


def _split_range(split: Any) -> tuple[int, int]:
    first = split.get("start") if isinstance(split, dict) else None
    last = split.get("end") if isinstance(split, dict) else None
    if not isinstance(first, int) or not isinstance(last, int) or last < first:
        raise SourceError(
            f'split {split!r} was not planned by the socket source: expected {{"start": N, '
            '"end": M}'
        )
    return first, last
