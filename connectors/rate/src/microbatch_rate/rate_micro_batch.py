"""``rate-micro-batch``: a fixed number of rows per batch, independent of the clock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from microbatch import Offset, Option, OptionSpec, ReadLimit, ReadMaxRows, Source, SourceContext
from microbatch.errors import SourceError

from ._arrays import (
    CHUNK_ROWS,
    INT64_MAX,
    NUM_PARTITIONS,
    SCHEMA,
    TIMESTAMP,
    int_field,
    partition_count,
    resolve_partitions,
    value_chunks,
)

__all__ = ["RateMicroBatchSource"]

_OFFSET_SHAPE = '{"offset": <rows so far>, "timestamp": <epoch milliseconds>}'


class RateMicroBatchSource(Source):
    """Exactly ``rowsPerBatch`` rows per batch, as Spark's ``rate-micro-batch`` source.

    Batch ``k`` holds the values ``[k * rowsPerBatch, (k + 1) * rowsPerBatch)``, all stamped
    ``startTimestamp + k * advanceMillisPerBatch``, however fast or late the trigger fires:
    the output depends only on the batch, so a replayed batch is identical. Under the
    available-now trigger the query runs exactly one batch.
    """

    format_name = "rate-micro-batch"
    description = "A fixed number of rows (timestamp, value) per batch, independent of the clock."
    supports_available_now = True
    options = OptionSpec(
        Option(
            name="rowsPerBatch",
            type="int",
            required=True,
            minimum=1,
            doc="How many rows each batch holds.",
        ),
        NUM_PARTITIONS,
        Option(
            name="startTimestamp",
            type="int",
            default=0,
            minimum=0,
            doc="Timestamp of the rows of the first batch, in epoch milliseconds.",
        ),
        Option(
            name="advanceMillisPerBatch",
            type="int",
            default=1000,
            minimum=0,
            doc="How many milliseconds the timestamp advances from one batch to the next.",
        ),
    )

    def __init__(self, context: SourceContext) -> None:
        super().__init__(context)
        self.rows_per_batch: int = self.opts.rows_per_batch
        self.num_partitions = resolve_partitions(self.opts.num_partitions)
        self.start_timestamp: int = self.opts.start_timestamp
        self.advance_millis: int = self.opts.advance_millis_per_batch
        self._available_now = False
        self._target: Offset | None = None

    @property
    def schema(self) -> pa.Schema:
        return SCHEMA

    def describe(self) -> str:
        return (
            f"RateMicroBatchSource[rowsPerBatch={self.rows_per_batch}, "
            f"numPartitions={self.num_partitions}, startTimestamp={self.start_timestamp}, "
            f"advanceMillisPerBatch={self.advance_millis}]"
        )

    def initial_offset(self) -> Offset:
        return {"offset": 0, "timestamp": self.start_timestamp}

    def default_read_limit(self) -> ReadLimit:
        return ReadMaxRows(self.rows_per_batch)

    def prepare_available_now(self) -> None:
        self._available_now = True
        self._target = None

    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        """One batch beyond ``start``, whatever the limit; under available-now, one batch
        beyond the offset of the first call, and ``start`` once it is reached."""
        rows, timestamp = _parse(start)
        if not self._available_now:
            return self._next(rows, timestamp)
        if self._target is None:
            self._target = self._next(rows, timestamp)
        return start if rows >= self._target["offset"] else self._target

    def plan(self, start: Offset, end: Offset) -> list[Any]:
        first, timestamp = _parse(start)
        last, _ = _parse(end)
        if last < first:
            raise SourceError(
                f"rate-micro-batch source asked for a batch that ends before it starts: "
                f"{start} > {end}"
            )
        return [
            {
                "partition": partition,
                "partitions": self.num_partitions,
                "range_start": first,
                "range_end": last,
                "timestamp_ms": timestamp,
            }
            for partition in range(self.num_partitions)
        ]

    def read(self, split: Any) -> Iterator[pa.RecordBatch]:
        shape = "a split planned by the rate-micro-batch source"
        partition = int_field(split, "partition", what="split", expected=shape)
        partitions = int_field(split, "partitions", what="split", expected=shape)
        range_start = int_field(split, "range_start", what="split", expected=shape)
        range_end = int_field(split, "range_end", what="split", expected=shape)
        timestamp_ms = int_field(split, "timestamp_ms", what="split", expected=shape)
        count = partition_count(range_start, range_end, partition, partitions)
        if count == 0:
            return
        stamp = pa.scalar(timestamp_ms * 1000, TIMESTAMP)
        stamps = pa.repeat(stamp, min(count, CHUNK_ROWS))
        for values in value_chunks(range_start + partition, count, partitions):
            column = stamps if len(values) == len(stamps) else stamps.slice(0, len(values))
            yield pa.RecordBatch.from_arrays([column, values], schema=SCHEMA)

    def _next(self, rows: int, timestamp: int) -> Offset:
        end, stamp = rows + self.rows_per_batch, timestamp + self.advance_millis
        if end > INT64_MAX or stamp * 1000 > INT64_MAX:
            raise SourceError(
                f"Integer overflow: the rate-micro-batch source cannot go beyond offset {rows} "
                f"(timestamp {timestamp} ms) with rowsPerBatch={self.rows_per_batch} and "
                f"advanceMillisPerBatch={self.advance_millis}. Start a new checkpoint."
            )
        return {"offset": end, "timestamp": stamp}


def _parse(offset: Offset) -> tuple[int, int]:
    rows = int_field(offset, "offset", what="offset", expected=_OFFSET_SHAPE)
    timestamp = int_field(offset, "timestamp", what="offset", expected=_OFFSET_SHAPE)
    return rows, timestamp
