"""``rate-micro-batch``: a fixed number of rows per batch, independent of the clock."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

import microbatch as mb
from microbatch.errors import SourceError

from ._arrays import (
    CHUNK_ROWS,
    INT64_MAX,
    NUM_PARTITIONS,
    SCHEMA,
    TIMESTAMP,
    RateSourceBase,
    StridedSplit,
    foreign_split,
    int_field,
)

__all__ = [
    "RateMicroBatchReader",
    "RateMicroBatchSource",
    "RateMicroBatchSplit",
    "RateMicroBatchSplitReader",
]

_OFFSET_SHAPE = '{"offset": <rows so far>, "timestamp": <epoch milliseconds>}'


class RateMicroBatchSource(RateSourceBase):
    """Exactly ``rowsPerBatch`` rows per batch, as Spark's ``rate-micro-batch`` source.

    Batch ``k`` holds the values ``[k * rowsPerBatch, (k + 1) * rowsPerBatch)``, all stamped
    ``startTimestamp + k * advanceMillisPerBatch``, however fast or late the trigger fires:
    the output depends only on the batch, so a replayed batch is identical. Under the
    available-now trigger the query runs exactly one batch.
    """

    format_name = "rate-micro-batch"
    description = "A fixed number of rows (timestamp, value) per batch, independent of the clock."
    options = mb.OptionSpec(
        mb.Option(
            name="rowsPerBatch",
            type="int",
            required=True,
            minimum=1,
            doc="How many rows each batch holds.",
        ),
        NUM_PARTITIONS,
        mb.Option(
            name="startTimestamp",
            type="int",
            default=0,
            minimum=0,
            doc="Timestamp of the rows of the first batch, in epoch milliseconds.",
        ),
        mb.Option(
            name="advanceMillisPerBatch",
            type="int",
            default=1000,
            minimum=0,
            doc="How many milliseconds the timestamp advances from one batch to the next.",
        ),
    )
    capabilities = mb.SourceCapabilities(replayable=True, available_now=True)

    def describe(self) -> str:
        opts = self.opts
        return (
            f"RateMicroBatchSource[rowsPerBatch={opts.rows_per_batch}, "
            f"numPartitions={self.num_partitions}, startTimestamp={opts.start_timestamp}, "
            f"advanceMillisPerBatch={opts.advance_millis_per_batch}]"
        )

    def stream_reader(self, context: mb.ReadContext) -> RateMicroBatchReader:
        opts = self.opts
        return RateMicroBatchReader(
            rows_per_batch=opts.rows_per_batch,
            num_partitions=self.num_partitions,
            start_timestamp=opts.start_timestamp,
            advance_millis=opts.advance_millis_per_batch,
        )


@dataclass(frozen=True)
class RateMicroBatchSplit(StridedSplit):
    """Partition ``partition`` of ``partitions`` of the values ``[range_start, range_end)``,
    all stamped ``timestamp_ms``."""

    timestamp_ms: int


@dataclass(eq=False, kw_only=True, repr=False)
class RateMicroBatchReader(mb.StreamReader):
    """Offsets and planning for one run. Nothing is kept in state: the rows depend only on
    the offsets."""

    rows_per_batch: int
    num_partitions: int
    start_timestamp: int
    advance_millis: int
    _available_now: bool = field(default=False, init=False)
    _target: mb.Offset | None = field(default=None, init=False)
    _split_reader: RateMicroBatchSplitReader = field(
        default_factory=lambda: RateMicroBatchSplitReader(), init=False
    )

    def initial_offset(self) -> mb.Offset:
        return {"offset": 0, "timestamp": self.start_timestamp}

    def default_read_limit(self) -> mb.ReadLimit:
        return mb.ReadMaxRows(self.rows_per_batch)

    def prepare_available_now(self) -> None:
        self._available_now = True
        self._target = None

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        """One batch beyond ``start``, whatever the limit; under available-now, one batch
        beyond the offset of the first call, and ``start`` once it is reached."""
        rows, timestamp = _parse(start)
        if not self._available_now:
            return self._next(rows, timestamp)
        if self._target is None:
            self._target = self._next(rows, timestamp)
        return start if rows >= self._target["offset"] else self._target

    def partitions(self, start: mb.Offset, end: mb.Offset) -> list[RateMicroBatchSplit]:
        first, timestamp = _parse(start)
        last, _ = _parse(end)
        if last < first:
            raise SourceError(
                f"rate-micro-batch source asked for a batch that ends before it starts: "
                f"{start} > {end}"
            )
        return [
            RateMicroBatchSplit(
                partition=partition,
                partitions=self.num_partitions,
                range_start=first,
                range_end=last,
                timestamp_ms=timestamp,
            )
            for partition in range(self.num_partitions)
        ]

    def split_reader(self) -> RateMicroBatchSplitReader:
        return self._split_reader

    def _next(self, rows: int, timestamp: int) -> mb.Offset:
        end, stamp = rows + self.rows_per_batch, timestamp + self.advance_millis
        if end > INT64_MAX or stamp * 1000 > INT64_MAX:
            raise SourceError(
                f"Integer overflow: the rate-micro-batch source cannot go beyond offset {rows} "
                f"(timestamp {timestamp} ms) with rowsPerBatch={self.rows_per_batch} and "
                f"advanceMillisPerBatch={self.advance_millis}. Start a new checkpoint."
            )
        return {"offset": end, "timestamp": stamp}


class RateMicroBatchSplitReader(mb.SplitReader):
    """Reads :class:`RateMicroBatchSplit` values; holds nothing, so it pickles as it is."""

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        if not isinstance(split, RateMicroBatchSplit):
            raise foreign_split(split, "rate-micro-batch", RateMicroBatchSplit)
        count = split.count()
        if count == 0:
            return
        stamp = pa.scalar(split.timestamp_ms * 1000, TIMESTAMP)
        stamps = pa.repeat(stamp, min(count, CHUNK_ROWS))
        for values in split.values():
            column = stamps if len(values) == len(stamps) else stamps.slice(0, len(values))
            yield pa.RecordBatch.from_arrays([column, values], schema=SCHEMA)


def _parse(offset: mb.Offset) -> tuple[int, int]:
    rows = int_field(offset, "offset", what="offset", expected=_OFFSET_SHAPE)
    timestamp = int_field(offset, "timestamp", what="offset", expected=_OFFSET_SHAPE)
    return rows, timestamp
