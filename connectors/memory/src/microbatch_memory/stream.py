"""``MemoryStream``: a stream fed from Python, and the ``memory`` source that reads it.

The simplest source there is, made for tests::

    stream = MemoryStream(pa.schema([("value", pa.int64())]))
    frame = stream.to_frame(session)
    stream.add_data([1, 2, 3])          # one batch; the query's next trigger reads it

Each ``add_data`` call is one batch of the stream; the offset ``{"offset": N}`` means "the first
N batches". The batches stay in memory, so a query restarted in the same process replays them;
they are gone with the process. A split (:class:`MemorySplit`) carries the rows of its batch, so
split readers pickle and read in another process too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

import microbatch as mb
from microbatch.connector import Offset
from microbatch.errors import SchemaMismatchError, SourceError
from microbatch.options import Option, OptionSpec
from microbatch.types import as_schema

from .table import show_schema as _show

__all__ = [
    "MemorySplit",
    "MemorySplitReader",
    "MemoryStream",
    "MemoryStreamReader",
    "MemoryStreamSource",
]


class MemoryStream:
    """An append-only list of batches of a fixed schema, fed by :meth:`add_data`.

    ``schema`` is a ``pyarrow.Schema`` or a DDL string (``"id BIGINT, name STRING"``).

    Thread-safe: data may be added from any thread while a query reads the stream.
    """

    def __init__(self, schema: pa.Schema | str) -> None:
        self.schema: pa.Schema = as_schema(schema)
        self._lock = threading.Lock()
        self._batches: list[pa.Table] = []
        self._listeners: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        return f"MemoryStream([{', '.join(self.schema.names)}], batches={self.num_batches})"

    @property
    def num_batches(self) -> int:
        """How many batches were added: the latest offset of the stream."""
        with self._lock:
            return len(self._batches)

    def add_data(self, data: Any) -> int:
        """Append one batch and return the stream's new offset (the number of batches).

        ``data`` is a ``pyarrow.Table`` or ``RecordBatch`` of the stream's columns, a list of
        dicts (missing keys become nulls), or, for a one-column stream, a list of values.
        Raises :class:`~microbatch.errors.SchemaMismatchError` when it does not fit the schema.
        """
        table = self._to_table(data)
        with self._lock:
            self._batches.append(table)
            offset = len(self._batches)
            listeners = list(self._listeners)
        for wake in listeners:
            wake()
        return offset

    def batch(self, index: int) -> pa.Table:
        """The batch added by the ``index``-th call of :meth:`add_data` (from 0)."""
        with self._lock:
            return self._batches[index]

    def to_frame(self, session: Any) -> Any:
        """A streaming frame reading this stream in ``session``."""
        return session.read_stream.format("memory").option("stream", self).load()

    def subscribe(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` after each :meth:`add_data` (used by the source)."""
        with self._lock:
            self._listeners.append(wake)

    def unsubscribe(self, wake: Callable[[], None]) -> None:
        """Stop calling ``wake``; unknown callables are ignored."""
        with self._lock:
            if wake in self._listeners:
                self._listeners.remove(wake)

    def _to_table(self, data: Any) -> pa.Table:
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if isinstance(data, pa.Table):
            return self._conform(data)
        if isinstance(data, Mapping) or not isinstance(data, Iterable) or isinstance(data, str):
            raise SchemaMismatchError(
                f"MemoryStream.add_data takes a pyarrow Table or RecordBatch, or a list of rows; "
                f"got {type(data).__name__}"
            )
        rows = list(data)
        if len(self.schema) == 1 and not any(isinstance(row, Mapping) for row in rows):
            rows = [{self.schema.names[0]: value} for value in rows]
        unknown = sorted(
            {str(key) for row in rows if isinstance(row, Mapping) for key in row}
            - set(self.schema.names)
        )
        if unknown:
            raise SchemaMismatchError(
                f"MemoryStream.add_data: unknown column(s) {', '.join(unknown)}; the stream's "
                f"columns are {', '.join(self.schema.names)}"
            )
        try:
            return pa.Table.from_pylist(rows, schema=self.schema)
        except (pa.ArrowException, TypeError, AttributeError) as error:
            raise SchemaMismatchError(
                f"MemoryStream.add_data: rows do not fit the schema [{_show(self.schema)}]: {error}"
            ) from None

    def _conform(self, table: pa.Table) -> pa.Table:
        if table.schema.equals(self.schema):
            return table
        missing = [name for name in self.schema.names if name not in table.schema.names]
        extra = [name for name in table.schema.names if name not in self.schema.names]
        if missing or extra:
            raise SchemaMismatchError(
                f"MemoryStream.add_data: table columns [{_show(table.schema)}] differ from the "
                f"stream's [{_show(self.schema)}]"
                + (f"; missing: {', '.join(missing)}" if missing else "")
                + (f"; unknown: {', '.join(extra)}" if extra else "")
            )
        try:
            return table.select(self.schema.names).cast(self.schema)
        except (pa.ArrowException, ValueError) as error:
            raise SchemaMismatchError(
                f"MemoryStream.add_data: cannot cast [{_show(table.schema)}] to the stream's "
                f"schema [{_show(self.schema)}]: {error}"
            ) from None


def _memory_stream_problem(stream: Any) -> str | None:
    """The validator of option ``stream``."""
    if isinstance(stream, MemoryStream):
        return None
    return (
        f"must be a microbatch_memory.MemoryStream, got {type(stream).__name__}; "
        "use MemoryStream(schema).to_frame(session)"
    )


class MemoryStreamSource(mb.Source):
    """Reads a :class:`MemoryStream`: one split per added batch. Replayable in-process."""

    format_name: ClassVar[str] = "memory"
    description: ClassVar[str] = "Batches added from Python with MemoryStream.add_data (tests)."
    options: ClassVar[OptionSpec] = OptionSpec(
        Option(
            name="stream",
            type="object",
            required=True,
            validate=_memory_stream_problem,
            doc="The MemoryStream to read; MemoryStream.to_frame(session) sets it.",
        ),
    )
    capabilities: ClassVar[mb.SourceCapabilities] = mb.SourceCapabilities(replayable=True)

    @property
    def stream(self) -> MemoryStream:
        """The ``stream`` option: the :class:`MemoryStream` read."""
        stream: MemoryStream = self.opts.stream
        return stream

    def schema(self) -> pa.Schema:
        return self.stream.schema

    def describe(self) -> str:
        return f"MemoryStream[{', '.join(self.stream.schema.names)}]"

    def stream_reader(self, context: mb.ReadContext) -> MemoryStreamReader:
        return MemoryStreamReader(self.stream, context.wake)


@dataclass(frozen=True)
class MemorySplit(mb.Split):
    """The rows of one added batch: the ``index``-th call of ``add_data`` (from 0).

    The split carries its rows, so that it reads the same in another process, where the
    stream itself does not exist.
    """

    index: int
    table: pa.Table

    def __repr__(self) -> str:
        return f"MemorySplit(index={self.index}, rows={self.table.num_rows})"


class MemorySplitReader(mb.SplitReader):
    """Reads :class:`MemorySplit` values: their rows travel with them, so this holds nothing."""

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        if not isinstance(split, MemorySplit):
            raise SourceError(f"The memory source cannot read {split!r}: not a MemorySplit")
        yield from split.table.to_batches()


class MemoryStreamReader(mb.StreamReader):
    """One run's reader of a :class:`MemoryStream`: offsets count the batches added.

    It wakes the query on every ``add_data`` from when it is made until :meth:`stop`.
    """

    def __init__(self, stream: MemoryStream, wake: Callable[[], None]) -> None:
        self.stream = stream
        self._wake = wake
        self._available: int | None = None
        self._stopped = False
        stream.subscribe(wake)

    def initial_offset(self) -> Offset:
        return {"offset": 0}

    def latest_offset(self, start: Offset, limit: mb.ReadLimit) -> Offset:
        available = self._available = self.stream.num_batches
        if available <= _position(start):
            return start
        return {"offset": available}

    def report_latest_offset(self) -> Offset | None:
        """The stream's offset at the last :meth:`latest_offset` (batches added so far)."""
        return None if self._available is None else {"offset": self._available}

    def partitions(self, start: Offset, end: Offset) -> list[MemorySplit]:
        first, last = _position(start), _position(end)
        available = self.stream.num_batches
        if last > available:
            raise SourceError(
                f"The batch ending at offset {last} is not in the MemoryStream, which holds "
                f"{available} batch(es): its data lives in process memory and does not survive "
                "a restart of the process. Delete the checkpoint to start over."
            )
        return [MemorySplit(index, self.stream.batch(index)) for index in range(first, last)]

    def split_reader(self) -> MemorySplitReader:
        return MemorySplitReader()

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self.stream.unsubscribe(self._wake)


def _position(offset: Offset) -> int:
    value = offset.get("offset") if isinstance(offset, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SourceError(
            f'Invalid MemoryStream offset {offset!r}: expected {{"offset": <number of batches>}}'
        )
    return value
