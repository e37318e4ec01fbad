"""The micro-batch loop and its write-ahead protocol.

Per trigger::

    end = reader.latest_offset(start, limit)        nothing new -> no batch
    checkpoint offsets/N = (start, end)              durable before any side effect
    splits = reader.partitions(start, end)
    messages = [part_writer.write(transformed(split_reader.read(split)), part) ...]  # in parallel
    writer.commit(messages, N)
    checkpoint commits/N
    reader.commit(end); progress

On start, a last offset-log entry without a commit is re-run with the same batch id and the same
offsets. A batch that fails with a :class:`RetriableError` is re-run the same way, after a
backoff, up to ``maxBatchRetries`` times. The engine runs on the query's thread, which also
reads and writes split 0; the other splits go to a pool of ``maxReadThreads - 1`` threads.
After a batch whose splits took less than :data:`INLINE_SPLITS_BELOW` (1 ms) in all, the next
one writes every split on the query's thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import pyarrow as pa

from ._checkpoint import BatchEntry, Checkpoint, SourceRange
from ._redact import describe_error
from ._transforms import Pipeline
from ._triggers import AvailableNow, Once, Trigger
from .connector import (
    CommitMessage,
    Offset,
    PartContext,
    ReadAllAvailable,
    ReadLimit,
    Sink,
    Source,
    Split,
    SplitReader,
    StreamReader,
    StreamWriter,
)
from .errors import RetriableError, SchemaMismatchError, SinkError, SourceError, cause_chain
from .progress import StreamingQueryProgress, iso_timestamp

__all__ = ["EngineJob", "EngineSettings", "MicroBatchEngine"]

log = logging.getLogger("microbatch.engine")

INLINE_SPLITS_BELOW = 0.001
"""Seconds: after a batch whose splits took less in all, the next batch writes every split on
the query's thread (handing a split to the pool costs more than such a batch gains from it)."""


@dataclass(frozen=True)
class EngineSettings:
    """Session settings the loop needs."""

    polling_delay: float = 0.01
    idle_progress_interval: float = 10.0
    max_workers: int = 2
    max_batch_retries: int = 3
    retry_backoff: float = 1.0
    """Seconds before the first retry of a failed batch; doubled per retry, at most 60."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """Option values to keep out of log messages (never in this object's ``repr``)."""


@dataclass
class _Counts:
    """Rows counted by the split readers of one batch (each reader owns one slot)."""

    input_rows: list[int] = field(default_factory=list)
    output_rows: list[int] = field(default_factory=list)


@dataclass(frozen=True, eq=False, repr=False)
class EngineJob:
    """What the engine works with for one run of a query, made when the query starts.

    ``report`` receives each progress record; ``report_idle`` receives the idle ones;
    ``set_status`` sets the query's status; ``phase`` is called at each step of the protocol
    (``microbatch_batch_phase`` hook).
    """

    source: Source
    reader: StreamReader
    source_schema: pa.Schema
    sink: Sink
    writer: StreamWriter
    query_id: str
    pipeline: Pipeline
    output_schema: pa.Schema
    checkpoint: Checkpoint
    trigger: Trigger
    identity: dict[str, Any]
    report: Callable[[StreamingQueryProgress], None]
    report_idle: Callable[[StreamingQueryProgress], None]
    set_status: Callable[[str, bool, bool], None]
    phase: Callable[[int, str], None]


class MicroBatchEngine:
    """Runs one query: recovers from the checkpoint, then runs batches until told to stop."""

    def __init__(self, job: EngineJob, settings: EngineSettings) -> None:
        self.job = job
        self.settings = settings
        self.stop_requested = threading.Event()
        self.wake = threading.Event()
        self.caught_up_at = float("-inf")
        """Start time of the latest trigger that found nothing new, all batches committed."""
        self.idle_condition = threading.Condition()
        self._pool: ThreadPoolExecutor | None = None
        self._next_batch_id = 0
        self._start: Offset = {}
        self._pending: BatchEntry | None = None
        self._last_trigger_start: float | None = None  # of any trigger: drives the schedule
        self._last_batch_start: float | None = None  # of a trigger that ran a batch: for rates
        self._last_idle_report = float("-inf")
        self._reported_latest: Offset | None = None
        """What the source last said of where its data ends (``latestOffset`` in progress)."""
        self._offsets_written = False
        self._retries = 0
        """Retries of the batch now running (shown in its progress record)."""
        self._splits_inline = False
        """Whether the next batch writes all its splits on this thread (the last one was quick)."""
        self._source_name = job.source.describe()
        self._sink_name = job.sink.describe()
        """The connectors' descriptions, made once: they name them in every status and record."""

    # -- lifecycle ------------------------------------------------------------------------
    def run(self) -> None:
        """Run until stopped or, for once/available-now, until the data is processed."""
        try:
            if isinstance(self.job.trigger, Once):
                self._run_once()
            elif isinstance(self.job.trigger, AvailableNow):
                self._run_available_now()
            else:
                self._run_continuously()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)

    def request_stop(self) -> None:
        self.stop_requested.set()
        self.wake.set()

    def recover(self) -> None:
        """Read the checkpoint and decide where the run starts; call once before :meth:`run`.

        A corrupted or inconsistent checkpoint raises here, before anything is written.
        """
        self.job.set_status("Initializing sources", False, False)
        latest = self.job.checkpoint.latest_offsets(sources=1)
        if latest is None:
            self._start = self.job.reader.initial_offset()
            self._next_batch_id = 0
        elif self.job.checkpoint.is_committed(latest.batch_id):
            self._start = latest.end
            self._next_batch_id = latest.batch_id + 1
            self.job.reader.commit(latest.end)
        else:
            log.info(
                "re-running batch %d of %s, planned but not committed before the last stop",
                latest.batch_id,
                self.job.checkpoint.url,
            )
            self._pending = latest
            self._start = latest.start if latest.start is not None else latest.end
            self._next_batch_id = latest.batch_id

    def _run_pending(self) -> None:
        if self._pending is not None and not self.stop_requested.is_set():
            entry, self._pending = self._pending, None
            self._reported_latest = None  # a replay does not ask the source for its end
            self._run_with_retries(entry, trigger_start=time.time(), latest_ms=0.0, replay=True)

    def _run_once(self) -> None:
        if self._pending is not None:
            self._run_pending()
        elif not self.stop_requested.is_set():
            self._trigger(ReadAllAvailable())

    def _run_available_now(self) -> None:
        self._run_pending()
        if type(self.job.source).capabilities.available_now:
            self.job.reader.prepare_available_now()
            limit = self.job.reader.default_read_limit()
            while not self.stop_requested.is_set() and self._trigger(limit):
                pass
        elif not self.stop_requested.is_set():
            self._trigger(ReadAllAvailable())

    def _run_continuously(self) -> None:
        self._run_pending()
        limit = self.job.reader.default_read_limit()
        while not self.stop_requested.is_set():
            now = time.time()
            due = self.job.trigger.next_start(now, self._last_trigger_start)
            if due > now:
                self.job.set_status("Waiting for next trigger", False, False)
                self.wake.wait(due - now)
                self.wake.clear()
                if self.stop_requested.is_set():
                    break
                if time.time() < due:
                    continue  # woken early (e.g. to check for data): honour the interval
            if not self._trigger(limit):
                self.job.set_status("Waiting for data to arrive", False, False)
                self.wake.wait(self.settings.polling_delay)
                self.wake.clear()

    # -- one trigger ----------------------------------------------------------------------
    def _trigger(self, limit: ReadLimit) -> bool:
        """Ask the source for new data and run a batch when there is some."""
        trigger_start = time.time()
        self._last_trigger_start = trigger_start
        self.job.set_status(f"Getting offsets from {self._source_name}", False, True)
        clock = time.perf_counter()
        end = self._latest_offset(limit)
        latest_ms = (time.perf_counter() - clock) * 1000
        if end == self._start:
            self._idle(trigger_start, latest_ms)
            return False
        entry = BatchEntry(
            batch_id=self._next_batch_id,
            sources=(SourceRange(self._start, end),),
            timestamp_ms=int(trigger_start * 1000),
            conf=self.job.checkpoint.fixed_conf,
        )
        self._run_with_retries(
            entry, trigger_start=trigger_start, latest_ms=latest_ms, replay=False
        )
        return True

    def _latest_offset(self, limit: ReadLimit) -> Offset:
        """``reader.latest_offset``, retried like a batch when it raises a RetriableError."""
        attempt = 0
        while True:
            try:
                end = self.job.reader.latest_offset(self._start, limit)
                self._reported_latest = self.job.reader.report_latest_offset()
                return end
            except Exception as error:
                attempt += 1
                self._before_retry(
                    error, attempt, f"getting offsets for batch {self._next_batch_id}"
                )

    # -- retries --------------------------------------------------------------------------
    def _run_with_retries(
        self, entry: BatchEntry, *, trigger_start: float, latest_ms: float, replay: bool
    ) -> None:
        """Run one batch; re-run it, same id and offsets, after each retriable failure."""
        self._retries = 0
        self._offsets_written = False
        while True:
            try:
                self._run_batch(
                    entry, trigger_start=trigger_start, latest_ms=latest_ms, replay=replay
                )
                return
            except Exception as error:
                self._retries += 1
                self._before_retry(error, self._retries, f"batch {entry.batch_id}")
                replay = replay or self._offsets_written

    def _before_retry(self, error: Exception, attempt: int, what: str) -> None:
        """Wait before retry ``attempt`` of ``what``; re-raise ``error`` when it is not
        retriable, when the retries are used up, or when the query is being stopped."""
        if not _retriable(error):
            raise error
        limit = self.settings.max_batch_retries
        if attempt > limit or self.stop_requested.is_set():
            error.add_note(
                f"{what} failed {attempt} times; maxBatchRetries is {limit}"
                if attempt > limit
                else f"{what} was not retried: the query is stopping"
            )
            raise error
        delay = min(60.0, self.settings.retry_backoff * 2 ** (attempt - 1))
        reason = _with_causes(error, self.settings.secrets)
        log.warning(
            "%s failed with a retriable error (retry %d of %d in %.1f s): %s",
            what,
            attempt,
            limit,
            delay,
            reason,
        )
        self.job.set_status(
            f"Retrying {what} (retry {attempt} of {limit}) after: {reason}", True, True
        )
        self.wake.clear()
        self.stop_requested.wait(delay)

    def _idle(self, trigger_start: float, latest_ms: float) -> None:
        with self.idle_condition:
            self.caught_up_at = trigger_start
            self.idle_condition.notify_all()
        if trigger_start - self._last_idle_report < self.settings.idle_progress_interval:
            return
        self._last_idle_report = trigger_start
        elapsed = (time.time() - trigger_start) * 1000
        progress = self._progress(
            batch_id=self._next_batch_id,
            trigger_start=trigger_start,
            durations={"latestOffset": round(latest_ms), "triggerExecution": round(elapsed)},
            start=self._start,
            end=self._start,
            input_rows=0,
            output_rows=0,
        )
        self.job.report_idle(progress)

    def _run_batch(
        self, entry: BatchEntry, *, trigger_start: float, latest_ms: float, replay: bool
    ) -> None:
        batch_id = entry.batch_id
        start = entry.start if entry.start is not None else entry.end
        timings: dict[str, float] = {"latestOffset": latest_ms}

        clock = time.perf_counter()
        if not replay:
            self.job.set_status("Writing offsets to log", True, True)
            self.job.checkpoint.write_offsets(entry)
            self._offsets_written = True
            self.job.phase(batch_id, "offsets_written")
        timings["walCommit"] = (time.perf_counter() - clock) * 1000

        self.job.set_status("Processing new data", True, True)
        clock = time.perf_counter()
        splits = list(self.job.reader.partitions(start, entry.end))
        for split in splits:
            if not isinstance(split, Split):
                raise SourceError(
                    f"{self._source_name}: partitions() returned {split!r}, which is not "
                    "a microbatch.Split"
                )
        timings["getBatch"] = (time.perf_counter() - clock) * 1000

        clock = time.perf_counter()
        counts = _Counts(input_rows=[0] * len(splits), output_rows=[0] * len(splits))
        messages = self._write_splits(batch_id, splits, counts)
        try:
            self.job.writer.commit(messages, batch_id)
        except BaseException:
            self._abort(batch_id, messages)
            raise
        self.job.phase(batch_id, "sink_committed")
        timings["addBatch"] = (time.perf_counter() - clock) * 1000

        clock = time.perf_counter()
        input_rows = sum(counts.input_rows)
        self.job.checkpoint.write_commit(batch_id, input_rows)
        self.job.phase(batch_id, "batch_committed")
        self.job.reader.commit(entry.end)
        timings["commitOffsets"] = (time.perf_counter() - clock) * 1000

        self._start = entry.end
        self._next_batch_id = batch_id + 1
        timings["triggerExecution"] = (time.time() - trigger_start) * 1000
        progress = self._progress(
            batch_id=batch_id,
            trigger_start=trigger_start,
            durations={key: round(value) for key, value in timings.items()},
            start=entry.start,
            end=entry.end,
            input_rows=input_rows,
            output_rows=sum(counts.output_rows),
            retries=self._retries,
        )
        self._last_batch_start = trigger_start
        self._last_idle_report = trigger_start  # as Spark: idle progress again only after a pause
        self.job.report(progress)

    # -- splits ---------------------------------------------------------------------------
    def _write_splits(
        self, batch_id: int, splits: list[Split], counts: _Counts
    ) -> list[CommitMessage | None]:
        split_reader = self.job.reader.split_reader()
        part_writer = self.job.writer.part_writer()

        def write_one(index: int) -> CommitMessage | None:
            data = pa.RecordBatchReader.from_batches(
                self.job.output_schema,
                self._transformed(split_reader, splits[index], index, counts),
            )
            part = PartContext(
                batch_id=batch_id,
                part_index=index,
                num_parts=len(splits),
                query_id=self.job.query_id,
            )
            message = part_writer.write(data, part)
            if message is not None and not isinstance(message, CommitMessage):
                raise SinkError(
                    f"{self._sink_name}: write() returned a {type(message).__name__}, not "
                    "a microbatch.CommitMessage (or None)"
                )
            self.job.phase(batch_id, "sink_write_done")
            return message

        messages: list[CommitMessage | None] = [None] * len(splits)
        failure: BaseException | None = None
        futures: list[Future[Any]] = []
        began = time.perf_counter()
        if len(splits) > 1 and self.settings.max_workers > 1 and not self._splits_inline:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.settings.max_workers - 1,
                    thread_name_prefix="microbatch-split",
                )
            futures = [self._pool.submit(write_one, index) for index in range(1, len(splits))]
        inline = range(len(splits)) if not futures else range(1)
        try:  # this thread writes split 0 (or all of them) while the pool writes the rest
            for index in inline:
                messages[index] = write_one(index)
        except BaseException as error:
            failure = error
        for index, future in enumerate(futures, start=1):
            if failure is not None and future.cancel():
                continue
            try:
                messages[index] = future.result()
            except BaseException as error:
                failure = failure or error
        if failure is not None:
            self._abort(batch_id, messages)
            raise failure
        self._splits_inline = time.perf_counter() - began < INLINE_SPLITS_BELOW
        return messages

    def _abort(self, batch_id: int, messages: list[CommitMessage | None]) -> None:
        """Tell the sink to clean up; ``messages`` has ``None`` for parts that wrote nothing."""
        try:
            self.job.writer.abort(messages, batch_id)
        except Exception as error:
            log.error(
                "abort of batch %d failed (it will be re-run on restart): %s",
                batch_id,
                describe_error(error, self.settings.secrets),
            )

    def _transformed(
        self, split_reader: SplitReader, split: Split, index: int, counts: _Counts
    ) -> Iterator[pa.RecordBatch]:
        schema = self.job.source_schema
        for batch in _batches(split_reader.read(split)):
            if not batch.schema.equals(schema):
                batch = _conform(batch, schema, self.job.source, split)
            counts.input_rows[index] += batch.num_rows
            out = self.job.pipeline.apply(batch) if self.job.pipeline else batch
            if not out.schema.equals(self.job.output_schema):
                out = _conform(
                    out, self.job.output_schema, self.job.source, split, after="transforms"
                )
            counts.output_rows[index] += out.num_rows
            yield out

    # -- progress -------------------------------------------------------------------------
    def _progress(
        self,
        *,
        batch_id: int,
        trigger_start: float,
        durations: dict[str, int],
        start: Offset | None,
        end: Offset,
        input_rows: int,
        output_rows: int,
        retries: int = 0,
    ) -> StreamingQueryProgress:
        previous = self._last_batch_start
        since_previous = trigger_start - previous if previous is not None else float("inf")
        input_rate = input_rows / since_previous if since_previous > 0 else 0.0
        processed_rate = input_rows / max(0.001, durations.get("triggerExecution", 0) / 1000)
        source = {
            "description": self._source_name,
            "startOffset": start,
            "endOffset": end,
            "latestOffset": self._reported_latest,
            "numInputRows": input_rows,
            "inputRowsPerSecond": input_rate,
            "processedRowsPerSecond": processed_rate,
        }
        metrics = self.job.reader.metrics()
        if metrics:
            source["metrics"] = metrics
        transform_metrics = self.job.pipeline.metrics() if self.job.pipeline else {}
        extra: dict[str, Any] = {"transformMetrics": transform_metrics} if transform_metrics else {}
        if retries:
            extra["batchRetries"] = retries
        return StreamingQueryProgress(
            id=self.job.identity["id"],
            runId=self.job.identity["runId"],
            name=self.job.identity["name"],
            timestamp=iso_timestamp(trigger_start),
            batchId=batch_id,
            batchDuration=durations.get("triggerExecution", 0),
            numInputRows=input_rows,
            inputRowsPerSecond=input_rate,
            processedRowsPerSecond=processed_rate,
            durationMs=durations,
            stateOperators=[],
            sources=[source],
            sink={"description": self._sink_name, "numOutputRows": output_rows},
            **extra,
        )


def _batches(items: Any) -> Iterator[pa.RecordBatch]:
    """Record batches from what ``Source.read`` returned (tables are split into batches)."""
    for item in items:
        if isinstance(item, pa.Table):
            yield from item.to_batches()
        else:
            yield item


def _with_causes(error: BaseException, secrets: tuple[str, ...]) -> str:
    """``error`` and the errors it was raised from, each without the secrets."""
    parts = [describe_error(link, secrets) for link in islice(cause_chain(error), 4)]
    return " (caused by ".join(parts) + ")" * (len(parts) - 1)


def _retriable(error: BaseException) -> bool:
    """True for a RetriableError, or an error raised ``from`` one."""
    return any(isinstance(link, RetriableError) for link in cause_chain(error))


def _conform(
    batch: pa.RecordBatch, schema: pa.Schema, source: Source, split: Any, after: str = ""
) -> pa.RecordBatch:
    """``batch`` in ``schema`` when only metadata or nullability differ; else a clear error."""
    if batch.schema.equals(schema, check_metadata=False) or (
        batch.schema.names == schema.names and batch.schema.types == schema.types
    ):
        return pa.RecordBatch.from_arrays(batch.columns, schema=schema)
    from .types import schema_diff

    stage = f" after {after}" if after else ""
    differences = "; ".join(schema_diff(schema, batch.schema))
    raise SchemaMismatchError(
        f"Source {source.describe()} produced a batch{stage} whose schema differs from the "
        f"declared one, in split {split!r}: {differences}"
    )
