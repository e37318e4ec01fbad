"""Reading one split of a Kafka batch: an offset range of one topic partition.

:class:`KafkaSplit` and :class:`KafkaSplitReader` hold only strings, numbers and booleans, so
they pickle (the reader's librdkafka settings are never shown in its ``repr``). ``read``
borrows a consumer from the process's pool, assigns the partition at the split's start, and
consumes in large batches until the split's end:

- a message at or beyond the end, or an end-of-partition event at or beyond it, ends the
  split (a range may end on a transaction marker, which takes an offset but is never
  delivered); so does a position at or beyond the end when a poll brings nothing;
- an offset that is gone (``auto.offset.reset=error`` reports it) is data loss: with
  ``failOnDataLoss`` the batch fails naming the partition and the offsets, otherwise a warning
  is logged, the lost offsets are counted and reading goes on from the earliest offset left;
- when the broker sends nothing for ``kafkaConsumer.pollTimeoutMs`` (a broker down), the
  batch fails with a :class:`~microbatch.RetriableError`, and the engine runs it again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

import microbatch as mb
from microbatch import RetriableError, SourceError

from ._arrow import to_batch
from ._consumers import POOL, Lease
from ._data_loss import DataLoss, records_missing
from ._metadata import is_fatal
from ._offsets import describe_tp

__all__ = ["KafkaSplit", "KafkaSplitReader", "losses_for"]

log = logging.getLogger("microbatch.kafka")

_CHUNK = 10_000
"""Messages asked of one ``consume()`` call (1,000-10,000 is the client's sweet spot)."""
_BATCH_ROWS = 8_192
"""Rows gathered before a record batch is yielded. Each ``consume()`` chunk becomes Arrow
columns at once, so that few messages are alive at a time (many live messages slow the
client); a full chunk is yielded as it is, smaller ones are gathered first."""
_POLL_SECONDS = 0.5
_SHORT_GRACE = 5.0
"""Seconds a partition may end before a split's end (a restarted broker's high watermark
catching up) before the missing offsets count as lost."""

_GONE = frozenset({3, -188, -190})
"""UNKNOWN_TOPIC_OR_PART, _UNKNOWN_TOPIC, _UNKNOWN_PARTITION."""

_losses: dict[str, DataLoss] = {}
_losses_lock = threading.Lock()


def losses_for(key: str, fail: bool, group_id: str, *, custom_group_id: bool = False) -> DataLoss:
    """The process-local :class:`DataLoss` counter of one stream reader (``key``): split
    reads in this process count their skipped offsets there, where the stream reader's
    metrics find them. Reads in other processes log their warnings only."""
    with _losses_lock:
        loss = _losses.get(key)
        if loss is None:
            loss = DataLoss(fail, group_id, logger=log, custom_group_id=custom_group_id)
            _losses[key] = loss
        return loss


def forget_losses(key: str) -> None:
    """Drop the counter of ``key`` (the stream reader stopped)."""
    with _losses_lock:
        _losses.pop(key, None)


@dataclass(frozen=True)
class KafkaSplit(mb.Split):
    """Offsets ``[start, end)`` of partition ``partition`` of ``topic``; ``last`` when the
    batch reads nothing of the partition after ``end`` (the next batch's split starts there,
    so the consumer stays assigned at ``end`` for it)."""

    topic: str
    partition: int
    start: int
    end: int
    last: bool = True


@dataclass(frozen=True)
class KafkaSplitReader(mb.SplitReader):
    """Reads :class:`KafkaSplit` values; ``settings`` are the consumers' librdkafka settings
    (sorted pairs), ``loss_key`` names the data-loss counter of the stream reader."""

    settings: tuple[tuple[str, str], ...] = field(repr=False)
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    group_id: str
    loss_key: str

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        if not isinstance(split, KafkaSplit):
            raise SourceError(f"the Kafka source cannot read {split!r}, which is not a KafkaSplit")
        if split.end <= split.start:
            return
        from confluent_kafka import KafkaException

        try:
            want = (split.topic, split.partition, split.start)
            with POOL.borrow(dict(self.settings), want) as lease:
                yield from _SplitRead(self, split, lease).batches()
        except KafkaException as error:
            kafka_error = error.args[0] if error.args else None
            text = (
                f"Reading Kafka partition {describe_tp((split.topic, split.partition))} offsets "
                f"[{split.start}, {split.end}) failed: {error}"
            )
            if kafka_error is not None and is_fatal(kafka_error):
                raise SourceError(text) from None
            raise RetriableError(text) from None


def _concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """One record batch of ``batches`` (a copy of their buffers: about 10 ns a row)."""
    concat = getattr(pa, "concat_batches", None)  # pyarrow 19 and later
    if concat is not None:
        return concat(batches)
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


class _SplitRead:
    """The state of one ``read``: where it is, what it gathered, until when it may wait."""

    def __init__(self, reader: KafkaSplitReader, split: KafkaSplit, lease: Lease) -> None:
        from confluent_kafka import TopicPartition

        self.reader = reader
        self.split = split
        self.lease = lease
        self.consumer = lease.consumer
        self.tp = (split.topic, split.partition)
        self.kafka_tp = TopicPartition(split.topic, split.partition)
        self.next = split.start
        self.timeout = reader.poll_timeout_ms / 1000
        self.deadline = time.monotonic() + self.timeout
        self.last_error: Any = None
        self.short_since: float | None = None
        self.clean = True
        """False once the consumer was moved or records were skipped: not reusable as is."""
        self.done = False
        self._make_tp = TopicPartition

    def where(self) -> str:
        s = self.split
        return f"Kafka partition {describe_tp(self.tp)} offsets [{s.start}, {s.end})"

    def seek(self, offset: int) -> None:
        self.lease.tag = None  # until the read ends cleanly
        self.lease.leftover = []
        self.consumer.assign([self._make_tp(self.split.topic, self.split.partition, offset)])
        self.next = offset

    def batches(self) -> Iterator[pa.RecordBatch]:
        lease = self.lease
        end = self.split.end
        leftover: list[Any] = []
        if lease.tag == (self.split.topic, self.split.partition, self.split.start):
            leftover, lease.leftover = lease.leftover, []  # fetched already: no seek
            lease.tag = None
        else:
            self.seek(self.split.start)
        gathered: list[pa.RecordBatch] = []
        rows = 0
        overshoot: list[Any] = []
        while not self.done:
            if leftover:
                messages, leftover = leftover, []
            else:
                want = max(1, min(_CHUNK, end - self.next))
                messages = self.consumer.consume(want, _POLL_SECONDS)
            if messages and [m for m in messages if m.error() is not None]:
                messages = self._events(messages)
            if messages and messages[0].offset() < self.next:  # from an earlier assignment
                messages = [m for m in messages if m.offset() >= self.next]
            if messages:
                if messages[-1].offset() >= end:
                    self.done = True
                    cut = len(messages)
                    while cut and messages[cut - 1].offset() >= end:
                        cut -= 1
                    overshoot = messages[cut:]
                    messages = messages[:cut]
                if messages:
                    gathered.append(
                        to_batch(messages, self.split.topic, self.split.partition, self.include)
                    )
                    rows += len(messages)
                    self.next = messages[-1].offset() + 1
                    if self.next >= end:
                        self.done = True
                self.deadline = time.monotonic() + self.timeout
            elif not self.done:
                self._idle()
            if rows >= _BATCH_ROWS or (self.done and gathered):
                yield gathered[0] if len(gathered) == 1 else _concat(gathered)
                gathered, rows = [], 0
        if self.clean and self.split.last:
            # positioned at the end: the next batch's split of this partition starts there
            lease.tag = (self.split.topic, self.split.partition, end)
            lease.leftover = overshoot

    @property
    def include(self) -> bool:
        return self.reader.include_headers

    def _idle(self) -> None:
        """A poll brought nothing: the end may be reached (a marker last), or the broker
        may be away."""
        position = self.consumer.position([self.kafka_tp])[0].offset
        if position >= self.split.end:
            self.done = True
            return
        if self.short_since is not None:
            self._check_short(self.next)
            if self.done:
                return
        if time.monotonic() >= self.deadline:
            reason = f" (last error: {self.last_error.str()})" if self.last_error else ""
            raise RetriableError(
                f"Reading {self.where()}: no records from the broker for "
                f"{self.reader.poll_timeout_ms} ms at offset {self.next}{reason} "
                "(kafkaConsumer.pollTimeoutMs)"
            )

    def _events(self, messages: list[Any]) -> list[Any]:
        """The data messages of ``messages``, after acting on the events among them."""
        from confluent_kafka import KafkaError

        data = []
        for message in messages:
            error = message.error()
            if error is None:
                data.append(message)
                continue
            code = error.code()
            mine = (message.topic(), message.partition()) == self.tp
            if code == KafkaError._PARTITION_EOF and mine:
                self._eof(message.offset(), data)
            elif code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE) and mine:
                self._out_of_range(data)
            elif code in _GONE and mine:
                raise RetriableError(
                    f"Reading {self.where()}: the broker does not know the partition "
                    f"({error.str()}); it may have been deleted (planning the batch again "
                    "checks for lost data)"
                )
            elif is_fatal(error):
                raise SourceError(f"Reading {self.where()} failed: {error.str()} ({error.name()})")
            else:  # transport errors and the like: the client reconnects by itself
                self.last_error = error
                log.debug("Reading %s: %s", self.where(), error.str())
        return data

    def _eof(self, offset: int, data: list[Any]) -> None:
        """An end-of-partition event at ``offset``: the split is read when it is at or beyond
        the end; below it, the partition may have lost records (a topic created again)."""
        if offset >= self.split.end:
            self.done = True
            return
        if self.short_since is None:  # maybe short; or an event older than new records:
            self.short_since = time.monotonic()  # checked when a poll brings nothing

    def _check_short(self, after: int) -> None:
        """The partition ends before the split: lost records (a topic created again), or a
        broker just restarted whose high watermark has not caught up yet. Only what stays
        so for ``_SHORT_GRACE`` seconds is data loss."""
        _low, high = self._watermarks()
        if high >= self.split.end:
            self.short_since = None
            return
        now = time.monotonic()
        if self.short_since is None:
            self.short_since = now
        if now - self.short_since >= min(_SHORT_GRACE, self.timeout):
            self._lose(max(after, high), self.split.end)
            self.done = True

    def _out_of_range(self, data: list[Any]) -> None:
        """The consumer's next offset is gone (deleted or aged out)."""
        at = data[-1].offset() + 1 if data else self.next
        low, high = self._watermarks()
        end = self.split.end
        if at >= high or low >= end:
            self._lose(at, end)
            self.done = True
            return
        if at >= low:
            log.warning(
                "Reading %s: offset %d was reported missing but is available again; reading it",
                self.where(),
                at,
            )
        else:
            self._lose(at, low)
            at = low
        # the fetcher stopped at the missing offset: start it again where the data is
        self.clean = False
        self.consumer.assign([self._make_tp(self.split.topic, self.split.partition, at)])
        if not data:
            self.next = at

    def _lose(self, start: int, until: int) -> None:
        self.clean = False
        if until <= start:
            return
        loss = losses_for(self.reader.loss_key, self.reader.fail_on_data_loss, self.reader.group_id)
        if loss.fail != self.reader.fail_on_data_loss:  # another process's reader settings
            loss = DataLoss(self.reader.fail_on_data_loss, self.reader.group_id, logger=log)
        loss.report(
            f"{records_missing(start, until, self.tp, self.reader.group_id)} "
            f"Records in [{start}, {until}) are skipped.",
            until - start,
        )

    def _watermarks(self) -> tuple[int, int]:
        found = self.consumer.get_watermark_offsets(self.kafka_tp, timeout=10)
        if found is None:
            raise RetriableError(
                f"Reading {self.where()}: the broker did not answer for the partition's "
                "offsets within 10 s"
            )
        return int(found[0]), int(found[1])


def _reset_after_fork() -> None:
    global _losses_lock
    _losses_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
