"""``rate``: rows generated at a fixed rate per second of wall-clock time."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb
from microbatch.errors import CorruptCheckpointError, SourceError

from ._arrays import (
    INT64_MAX,
    NUM_PARTITIONS,
    SCHEMA,
    TIMESTAMP,
    RateSourceBase,
    StridedSplit,
    foreign_split,
    int_field,
)

__all__ = ["RateSource", "RateSplit", "RateSplitReader", "RateStreamReader", "value_at_second"]

log = logging.getLogger(__name__)

_START_FILE = "start.json"
_OFFSET_SHAPE = '{"seconds": <whole seconds since the source started>}'


def value_at_second(seconds: int, rows_per_second: int, ramp_up_seconds: int) -> int:
    """How many rows the source has produced ``seconds`` after it started.

    During the ramp-up the rate grows by ``rows_per_second // (ramp_up_seconds + 1)`` each
    second (10 rows/s with a 4 s ramp-up: 2, 4, 6, 8, then 10 rows per second).
    """
    step = rows_per_second // (ramp_up_seconds + 1)
    if seconds <= ramp_up_seconds:
        return step * seconds * (seconds + 1) // 2
    ramped = step * ramp_up_seconds * (ramp_up_seconds + 1) // 2
    return ramped + (seconds - ramp_up_seconds) * rows_per_second


def _whole_seconds_problem(duration: timedelta) -> str | None:
    """The validator of ``rampUpTime``: the ramp-up is counted in whole seconds."""
    if duration.total_seconds().is_integer():
        return None
    return "must be a whole number of seconds, such as '5 seconds'"


class RateSource(RateSourceBase):
    """Rows ``(timestamp, value)`` at ``rowsPerSecond``, as Spark's ``rate`` source.

    The offset is the number of whole seconds since the source first started; that start
    time is kept in the checkpoint, so a restarted query continues the same sequence. Values
    count up from 0 and the timestamps of a batch are spread evenly over its seconds.

    Making one does no I/O; the start time is read from (or saved to) the checkpoint by the
    :class:`RateStreamReader` of each run.
    """

    format_name = "rate"
    description = "Rows (timestamp, value) generated at a fixed rate per second, for testing."
    options = mb.OptionSpec(
        mb.Option(
            name="rowsPerSecond",
            type="int",
            default=1,
            minimum=1,
            doc="How many rows to generate per second.",
        ),
        mb.Option(
            name="rampUpTime",
            type="duration",
            default=timedelta(0),
            validate=_whole_seconds_problem,
            doc=(
                "How long, in whole seconds, the rate takes to grow linearly to rowsPerSecond "
                "(e.g. '5 seconds')."
            ),
        ),
        NUM_PARTITIONS,
    )
    capabilities = mb.SourceCapabilities(
        replayable=True,
        available_now=False,
        streaming_only="use session.read_stream, or the 'rate-micro-batch' source for a "
        "bounded read",
    )
    clock: ClassVar[Callable[[], float]] = time.time
    """Seconds since the epoch; tests replace it to control time."""

    @property
    def rows_per_second(self) -> int:
        """The ``rowsPerSecond`` option."""
        return int(self.opts.rows_per_second)

    @property
    def ramp_up_seconds(self) -> int:
        """The ``rampUpTime`` option in whole seconds."""
        return _whole_seconds(self.opts.ramp_up_time)

    def describe(self) -> str:
        return (
            f"RateSource[rowsPerSecond={self.rows_per_second}, "
            f"rampUpTimeSeconds={self.ramp_up_seconds}, numPartitions={self.num_partitions}]"
        )

    def stream_reader(self, context: mb.ReadContext) -> RateStreamReader:
        """The reader of one run: reads the saved start time from ``context.state``, if any
        (a :class:`~microbatch.CorruptCheckpointError` when it is not one)."""
        return RateStreamReader(
            rows_per_second=self.rows_per_second,
            ramp_up_seconds=self.ramp_up_seconds,
            num_partitions=self.num_partitions,
            state=context.state,
            clock=lambda: type(self).clock(),
        )


@dataclass(frozen=True)
class RateSplit(StridedSplit):
    """Partition ``partition`` of ``partitions`` of the values ``[range_start, range_end)``,
    stamped evenly from ``start_ms`` over ``span_ms`` milliseconds."""

    start_ms: int
    span_ms: int


@dataclass(eq=False, kw_only=True, repr=False)
class RateStreamReader(mb.StreamReader):
    """Offsets and planning for one run; keeps the source's start time in ``state``."""

    rows_per_second: int
    ramp_up_seconds: int
    num_partitions: int
    state: mb.StateStore | None
    clock: Callable[[], float]
    _start_ms: int | None = field(init=False)
    _last_ms: int = field(default=0, init=False)
    _latest: mb.Offset | None = field(default=None, init=False)
    _split_reader: RateSplitReader = field(default_factory=lambda: RateSplitReader(), init=False)

    def __post_init__(self) -> None:
        self._start_ms = self._stored_start()

    def initial_offset(self) -> mb.Offset:
        self._start_time()
        return {"seconds": 0}

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        current = _seconds(start)
        start_ms = self._start_time()
        self._last_ms = max(self._last_ms, int(self.clock() * 1000))
        elapsed = max(current, (self._last_ms - start_ms) // 1000)
        self._check_overflow(elapsed)
        self._latest = {"seconds": elapsed}
        return {"seconds": elapsed}

    def report_latest_offset(self) -> mb.Offset | None:
        """The whole seconds elapsed at the last :meth:`latest_offset` (the source takes no
        read limit, so this is also the batch's end)."""
        return self._latest

    def partitions(self, start: mb.Offset, end: mb.Offset) -> list[RateSplit]:
        first, last = _seconds(start), _seconds(end)
        if last < first:
            raise SourceError(
                f"rate source asked for a batch that ends before it starts: {start} > {end}"
            )
        self._check_overflow(last)
        start_ms = self._start_time()
        # After a restart, never report an offset below one already planned.
        self._last_ms = max(self._last_ms, start_ms + last * 1000)
        rate, ramp = self.rows_per_second, self.ramp_up_seconds
        return [
            RateSplit(
                partition=partition,
                partitions=self.num_partitions,
                range_start=value_at_second(first, rate, ramp),
                range_end=value_at_second(last, rate, ramp),
                start_ms=start_ms + first * 1000,
                span_ms=(last - first) * 1000,
            )
            for partition in range(self.num_partitions)
        ]

    def split_reader(self) -> RateSplitReader:
        return self._split_reader

    # -- start time ---------------------------------------------------------------------
    def _stored_start(self) -> int | None:
        state = self.state
        if state is None:
            return None
        stored = state.read(_START_FILE)
        if stored is None:
            return None
        value = stored.get("start_ms") if isinstance(stored, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            raise CorruptCheckpointError(
                f"Checkpoint file {state.url.rstrip('/')}/{_START_FILE} does not hold the rate "
                f"source's start time (got {stored!r}). Restore it, or start the query with a "
                "new checkpoint."
            )
        return value

    def _start_time(self) -> int:
        """The source's start time in epoch milliseconds, fixed (and saved) on first use."""
        if self._start_ms is None:
            now = int(self.clock() * 1000)
            state = self.state
            if state is not None and not state.create(_START_FILE, {"start_ms": now}):
                stored = self._stored_start()
                now = stored if stored is not None else now
            self._start_ms = now
            log.debug("rate source start time: %d ms", now)
        return self._start_ms

    def _check_overflow(self, seconds: int) -> None:
        rate, ramp = self.rows_per_second, self.ramp_up_seconds
        if value_at_second(seconds, rate, ramp) > INT64_MAX:
            raise SourceError(
                f"Integer overflow: with rowsPerSecond={rate} the rate source's values leave "
                f"the int64 range after {seconds} seconds. Lower rowsPerSecond or start the "
                "query with a new checkpoint."
            )


class RateSplitReader(mb.SplitReader):
    """Reads :class:`RateSplit` values. It holds nothing (a split says everything about its
    rows), so it pickles as it is and reads the same rows in any process."""

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        if not isinstance(split, RateSplit):
            raise foreign_split(split, "rate", RateSplit)
        if split.count() == 0:
            return
        range_start, range_end = split.range_start, split.range_end
        # typed scalars: a bare Python number costs pyarrow a failing import on every call
        base = pa.scalar(range_start, pa.int64())
        ms_per_value = pa.scalar(split.span_ms / (range_end - range_start), pa.float64())
        offset_ms = pa.scalar(split.start_ms + 0.5, pa.float64())
        thousand = pa.scalar(1000, pa.int64())
        for values in split.values():
            relative = pc.cast(pc.subtract(values, base), pa.float64())
            # Half-up rounding to whole milliseconds, as Spark's timestamps are.
            millis = pc.floor(pc.add(pc.multiply(relative, ms_per_value), offset_ms))
            micros = pc.multiply(pc.cast(millis, pa.int64()), thousand).view(TIMESTAMP)
            yield pa.RecordBatch.from_arrays([micros, values], schema=SCHEMA)


def _seconds(offset: mb.Offset) -> int:
    return int_field(offset, "seconds", what="offset", expected=_OFFSET_SHAPE)


def _whole_seconds(duration: timedelta) -> int:
    return int(duration.total_seconds())  # whole: checked by the option's validator
