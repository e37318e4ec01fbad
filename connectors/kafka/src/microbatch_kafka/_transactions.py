"""The exactly-once protocol of the ``kafka`` sink: one Kafka transaction per batch.

One transactional producer per query run, ``transactional.id = <prefix>-<query id>``, made in
the first ``commit`` of the process; its ``init_transactions()`` fences any older writer of
the same query (a zombie's next call fails) and settles the transaction it left open. Each
batch is one transaction holding its records and the **batch marker**: an offset of the
dedicated consumer group ``<prefix>-<query id>-batches`` for partition 0 of the marker topic,
``batch id + 1`` (with metadata ``{"query": ..., "batch": N}``), sent with
``send_offsets_to_transaction`` so that it commits atomically with the records. The marker is
read back after each producer's ``init_transactions()`` (a run's first batch, and the retry of
a failed one, which gets a new producer); a batch at or below it is applied
already and is skipped (the stored value can move backwards, so nothing at or below it is
ever sent again).

The marker is a committed group offset, and Kafka drops those ``offsets.retention.minutes``
(7 days by default) after the group's last commit. Every batch commits it again, and a
running query without batches commits it again once a day (an empty transaction), so a running
query keeps it. To notice a loss after a longer stop, the writer
keeps a record in its checkpoint state (``eos.json``): ``committing`` before the transaction
begins, ``committed`` once it is committed. A missing marker is then resolved from it:

- ``committed`` for N: batches up to N are applied (a warning says the marker was lost);
- ``committing`` for N, the first batch this sink ever wrote, less than the retention ago:
  no marker ever existed, so N was not committed: it is written;
- ``committing`` for N otherwise: N may or may not be in the topic. ``exactlyOnceUnknownBatch``
  decides: ``fail`` (default, a ``SinkError`` saying all this), ``rewrite`` (may duplicate),
  ``skip`` (may lose).

A marker whose stable read never answers (a commit to the group left hanging by a broker
stopped mid-commit: ``UNSTABLE_OFFSET_COMMIT`` for good) is read without waiting instead, and
the checkpoint's commits and the record say which later batches were applied.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from microbatch import RetriableError, SinkError, StateStore

from ._producing import (
    Delivery,
    delivery_timeout,
    is_transient,
    produce_batch,
    producer_settings,
)
from ._sink_schema import Layout

__all__ = [
    "RETENTION_SECONDS",
    "STATE_FILE",
    "TRANSACTION_TIMEOUT_MS",
    "Transactions",
    "marker_group",
    "transactional_config",
]

log = logging.getLogger("microbatch.kafka.sink")

STATE_FILE = "eos.json"
RETENTION_SECONDS = 7 * 24 * 3600
"""Kafka's default ``offsets.retention.minutes`` (10080), in seconds."""
REFRESH_SECONDS = 24 * 3600.0
"""How often a running query without batches commits its marker again (an empty
transaction), so that it does not expire while the query waits for data."""
TIMEOUT = 60.0
"""Seconds each transactional call may take (the ``exactlyOnceTimeout`` option's default)."""
GRACE = 5.0
"""Seconds past its own timeout after which a call that has not returned is abandoned:
librdkafka can wait far longer for a transaction or group coordinator after a broker restart
(confluentinc/librdkafka#5456, #5511)."""
CONFIRM_SECONDS = 3.0
"""Seconds the stable read of the marker gets a second time, once a read that does not wait
for pending commits answered: a group that still does not answer it holds a hanging commit."""
PLAIN_READ_TIMEOUT = 10.0
"""Seconds the read of an unsettled batch marker may take (it does not wait for pending
commits, so it answers at once when the group coordinator does)."""
CLOSE_TIMEOUT = 10.0
"""Seconds ``stop()`` waits for the abort of an open transaction (a broker that is away
would hold the query's stop for the whole call timeout); the next run's
``init_transactions()`` settles it anyway."""
TRANSACTION_TIMEOUT_MS = 900_000
"""The sink's default ``transaction.timeout.ms``: 15 minutes, the broker's default
``transaction.max.timeout.ms`` (librdkafka's own default, 60 s, aborts a batch that takes
longer to write)."""

_FENCED = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
# Producer-only settings a consumer would warn about; the marker consumer gets the rest
# (addresses, security).
_PRODUCER_ONLY = {
    "acks",
    "batch.num.messages",
    "batch.size",
    "compression.codec",
    "compression.level",
    "compression.type",
    "delivery.report.only.error",
    "delivery.timeout.ms",
    "enable.gapless.guarantee",
    "enable.idempotence",
    "linger.ms",
    "max.in.flight",
    "max.in.flight.requests.per.connection",
    "message.send.max.retries",
    "message.timeout.ms",
    "partitioner",
    "queue.buffering.backpressure.threshold",
    "queue.buffering.max.kbytes",
    "queue.buffering.max.messages",
    "queue.buffering.max.ms",
    "request.required.acks",
    "request.timeout.ms",
    "retries",
    "sticky.partitioning.linger.ms",
    "transaction.timeout.ms",
}
# Handles made before a fork: the child keeps them referenced and never calls them
# (destroying a librdkafka handle whose threads did not survive the fork would hang).
_INHERITED: list[Any] = []
# Producers dropped with a transaction open (a retriable failure), with their process id and
# the thread of a call they never returned from (or None): closing one then could wait for a
# broker that is gone (its close() aborts the transaction); they are closed once a newer
# producer's init_transactions() settled it, and once that thread has ended.
_RETIRED: list[tuple[int, Any, threading.Thread | None]] = []
_RETIRED_LOCK = threading.Lock()
# Marker consumers whose call was abandoned (with their process id and that call's thread):
# destroying one while the call is inside it would crash, so they are kept, never closed.
_STRANDED: list[tuple[int, Any, threading.Thread]] = []


class _Unreadable(Exception):
    """The group's committed offset could not be read."""


class _Overran(Exception):
    """A client call that had not returned when its deadline passed."""

    def __init__(self, thread: threading.Thread) -> None:
        super().__init__(thread.name)
        self.thread = thread


def _bounded(call: Callable[[], Any], limit: float, what: str) -> Any:
    """``call()`` on a thread of its own: its result or its exception, or :class:`_Overran`
    when it has not returned after ``limit`` seconds (the thread is then left to it)."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # handed to the caller
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name=f"kafka-sink-{what}", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had (at interpreter shutdown): call it here
        return call()
    thread.join(limit)
    if not outcome:
        raise _Overran(thread)
    returned, value = outcome[0]
    if returned:
        return value
    raise value


def transactional_config(settings: Mapping[str, Any], transactional_id: str) -> dict[str, Any]:
    """The transactional producer's librdkafka settings: the user's, the sink's producer
    defaults, and ``transaction.timeout.ms`` (default :data:`TRANSACTION_TIMEOUT_MS`)."""
    config = producer_settings(settings)
    config.setdefault("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
    config.update({"transactional.id": transactional_id, "enable.idempotence": True})
    return config


def _millis(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def marker_group(transactional_id: str) -> str:
    """The consumer group whose committed offset is the batch marker."""
    return f"{transactional_id}-batches"


class Transactions:
    """The transactional producer of one query run and the batch marker it keeps.

    Thread-safe: one transaction at a time. Made without I/O; the producer, the marker
    consumer and the marker's first reading come with the first :meth:`commit` in a process.
    """

    def __init__(
        self,
        settings: Mapping[str, Any],
        *,
        transactional_id: str,
        marker_topic: str,
        query_id: str,
        state: StateStore | None,
        last_committed_batch_id: int | None,
        unknown_batch: str = "fail",
        timeout: float = TIMEOUT,
        refresh_seconds: float = REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = dict(settings)
        self.transactional_id = transactional_id
        self.group = marker_group(transactional_id)
        self.marker_topic = marker_topic
        self._query_id = query_id
        self._state = state
        self._last_committed = last_committed_batch_id
        """The newest batch known committed: the checkpoint's when the run started, then
        each batch this writer commits."""
        self._unknown_batch = unknown_batch
        self._timeout = timeout
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._producer: Any = None
        self._consumer: Any = None
        self._open = False
        self._last: int | None = None
        self._recovered = False
        self._refresh_seconds = refresh_seconds
        self._clock = clock
        self._began: float | None = None  # clock() when the open transaction began
        self._fenced: str | None = None  # why this writer was fenced: it stays so
        # an abandoned init_transactions() may still get its producer id later, fencing the
        # producer that replaced it: the next fence is then this writer's own doing
        self._abandoned_init = False
        self._timed_out: set[int] = set()  # batches whose transaction outlived its timeout
        self._commit_sent: int | None = None  # a batch whose commit_transaction() did not succeed
        self._batch: int | None = None  # the batch of the last transaction this writer began
        self._transaction_timeout_ms = _millis(
            transactional_config(settings, transactional_id)["transaction.timeout.ms"]
        )
        self._last_commit = 0.0  # monotonic time of the last transaction
        self._stopping = threading.Event()
        self._refresher: threading.Thread | None = None

    # -- the batch --------------------------------------------------------------------------
    def commit(self, tables: list[pa.Table], layout: Layout, batch_id: int) -> None:
        """Write ``tables`` and the marker of ``batch_id`` in one transaction, unless the
        marker says the batch is applied already."""
        with self._lock:
            self._refuse_if_fenced()
            self._start()
            if not self._recovered:
                marker, settled = self._read_marker()
                if settled:
                    self._last = self._recover(marker, batch_id)
                else:
                    self._last = self._recover_unsettled(marker, batch_id)
                self._recovered = True
            if self._last is not None and batch_id <= self._last:
                log.log(
                    logging.WARNING if batch_id < self._last else logging.INFO,
                    "Kafka sink: batch %d is applied already (batch marker %d of group %r): "
                    "not written again%s",
                    batch_id,
                    self._last,
                    self.group,
                    " (an older copy of the checkpoint?)" if batch_id < self._last else "",
                )
                if self._last_committed is None or batch_id > self._last_committed:
                    self._last_committed = batch_id  # the engine commits it next
                return
            previous = self._last
            self._record({"batch": batch_id, "phase": "committing", "previous": previous})
            self._transaction(tables, layout, batch_id)
            self._record({"batch": batch_id, "phase": "committed"})
            self._last = batch_id
            # a later recovery in this run (after a retriable failure) must not take the
            # batches this writer committed for ones the checkpoint never committed
            if self._last_committed is None or batch_id > self._last_committed:
                self._last_committed = batch_id
            self._last_commit = time.monotonic()
            self._start_refresher()

    def _transaction(self, tables: list[pa.Table], layout: Layout, batch_id: int) -> None:
        producer = self._producer
        settings = producer_settings(self._settings)
        self._call(producer.begin_transaction, "begin_transaction")
        self._open = True
        self._began, self._batch = self._clock(), batch_id
        delivery = Delivery(f"batch {batch_id}", transactional=True)
        try:
            for table in tables:
                for batch in table.to_batches():
                    produce_batch(producer, batch, layout, delivery, settings)
            left = self._call(lambda: producer.flush(delivery_timeout(settings)), "flush")
            delivery.check()
            if left:
                raise SinkError(
                    f"{left} record(s) of batch {batch_id} were not delivered to Kafka within "
                    f"{delivery_timeout(settings):.0f} s; the batch is retried"
                ) from RetriableError("delivery timed out")
        except SinkError as failure:
            fatal = _fatal_cause(failure)
            if fatal is not None and self._producer is not None:  # refused by a dead producer
                self._call(lambda: _raise(fatal), "produce")
            self._replace_after_failure()
            raise
        except Exception:
            self._replace_after_failure()
            raise
        self._commit_marker(producer, batch_id)
        self._open = False
        self._began = None

    def _replace_after_failure(self) -> None:
        """Abort the failed batch's transaction and drop its producer: the retry makes a new
        one. A producer that lived through a broker outage can keep a stale coordinator and
        wait on it far past its timeout in its next ``send_offsets_to_transaction()``
        (confluentinc/librdkafka#5456, #5511); a new one looks its coordinators up again."""
        self.abort_open()
        self._drop()

    def abort_open(self, timeout: float | None = None) -> None:
        """Abort the transaction this process has open, if any (best effort)."""
        if not self._open or self._pid != os.getpid():
            return
        producer, seconds = self._producer, self._timeout if timeout is None else timeout
        try:
            _bounded(lambda: producer.abort_transaction(seconds), seconds + GRACE, "abort")
            self._open = False
            self._began = None
        except KafkaException as exc:
            log.warning("Kafka sink: abort_transaction failed: %s", exc.args[0].str())
            self._drop()  # a new producer's init_transactions() settles it
        except _Overran as overran:
            log.warning(
                "Kafka sink: abort_transaction did not return within %.0f s: the producer is "
                "abandoned (the next one's init_transactions() aborts its transaction)",
                seconds + GRACE,
            )
            self._drop(stuck=overran.thread)

    # -- the producer -----------------------------------------------------------------------
    def _start(self) -> None:
        """The producer and the marker consumer of this process (new after a fork)."""
        if self._pid == os.getpid() and self._producer is not None:
            return
        if self._pid is not None and self._pid != os.getpid():
            _INHERITED.extend(handle for handle in (self._producer, self._consumer) if handle)
        self._producer = self._consumer = None
        self._open = False
        self._recovered = False
        producer = Producer(transactional_config(self._settings, self.transactional_id))
        self._pid = os.getpid()
        self._producer = producer
        self._call(lambda: producer.init_transactions(self._timeout), "init_transactions")
        _close_retired()  # their transactions are settled, they are fenced: close is quick
        try:
            self._consumer = consumer = Consumer(self._marker_consumer_config("read_committed"))
            topics = self._consumer_call(
                lambda: consumer.list_topics(timeout=self._timeout).topics,  # never creates
                "the metadata of the marker topic",
            )
        except KafkaException as exc:  # the broker went away after init_transactions()
            error = exc.args[0]
            self._drop()
            text = f"Kafka metadata of the marker group failed: {error.str()} [{error.name()}]"
            if is_transient(error):
                raise SinkError(f"{text}; the batch is retried") from RetriableError(error.str())
            raise SinkError(text) from exc
        if self.marker_topic not in topics:
            self._drop()
            raise SinkError(
                f"The exactly-once marker topic '{self.marker_topic}' does not exist: create "
                "it (the batch marker is an offset of its partition 0), or set "
                "exactlyOnceMarkerTopic to an existing topic"
            )

    def _marker_consumer_config(self, isolation: str) -> dict[str, Any]:
        """A consumer of the marker group (the user's addresses and security, no producer
        settings), reading committed offsets with ``isolation``."""
        config = {key: value for key, value in self._settings.items() if key not in _PRODUCER_ONLY}
        config.update(
            {"group.id": self.group, "isolation.level": isolation, "enable.auto.commit": False}
        )
        return config

    def _drop(self, stuck: threading.Thread | None = None) -> None:
        """Forget the producer (a retry makes a new one, whose ``init_transactions`` settles
        what this one left) without flushing what it still holds; ``stuck``: the thread of a
        call that never returned, still inside the producer."""
        producer, consumer = self._producer, self._consumer
        if (self._open or stuck is not None) and producer is not None:
            # close() would try to abort the open transaction, which may wait for a broker
            # that is gone, and must not run while a call is inside: keep the handle (never
            # destroyed in a forked child) instead
            with _RETIRED_LOCK:
                _RETIRED.append((os.getpid(), producer, stuck))
            producer = None
        self._producer = self._consumer = None
        self._pid = None
        self._open = False
        self._began = None
        self._recovered = False
        for handle, close in ((producer, _purge), (consumer, _close_consumer)):
            if handle is not None:
                try:
                    close(handle)
                except Exception as exc:  # already broken: nothing more to release
                    log.debug("Kafka sink: closing a client failed: %s", exc)

    # -- keeping the marker while idle --------------------------------------------------------
    def _start_refresher(self) -> None:
        thread = self._refresher
        if thread is not None and thread.is_alive():
            return  # (a thread object inherited through a fork is not alive)
        self._stopping = threading.Event()
        self._refresher = threading.Thread(
            target=self._refresh_loop,
            args=(self._stopping,),
            name=f"kafka-marker-refresh-{self.transactional_id}",
            daemon=True,
        )
        self._refresher.start()

    def _refresh_loop(self, stopping: threading.Event) -> None:
        while not stopping.wait(self._refresh_seconds / 4):
            if time.monotonic() - self._last_commit >= self._refresh_seconds:
                self.refresh()

    def refresh(self) -> None:
        """Commit the current marker again in an empty transaction (the batch marker's
        offset is only kept ``offsets.retention.minutes`` after its last commit)."""
        with self._lock:
            if self._pid != os.getpid() or self._producer is None or self._last is None:
                return
            if self._fenced is not None:
                return
            producer, last = self._producer, self._last
            try:
                self._call(producer.begin_transaction, "begin_transaction")
                self._open = True
                self._commit_marker(producer, last, batch=False)
                self._open = False
                self._last_commit = time.monotonic()
                log.debug("Kafka sink: batch marker %d of group %r refreshed", last, self.group)
            except SinkError as error:  # the next commit makes a new producer and reads again
                log.warning("Kafka sink: refreshing the batch marker failed: %s", error)
                self.abort_open()

    def _commit_marker(self, producer: Producer, batch_id: int, *, batch: bool = True) -> None:
        """Send the marker of ``batch_id`` (offset ``batch_id + 1``) with the open
        transaction and commit it."""
        marker = TopicPartition(self.marker_topic, 0, batch_id + 1, self._metadata(batch_id))
        self._call(
            lambda: producer.send_offsets_to_transaction(
                [marker], self._consumer.consumer_group_metadata(), self._timeout
            ),
            "send_offsets_to_transaction",
        )
        if batch:  # a batch's commit may land from here on, even if the call fails
            self._commit_sent = batch_id
        self._call(lambda: producer.commit_transaction(self._timeout), "commit_transaction")
        if batch:
            self._commit_sent = None

    def _metadata(self, batch_id: int) -> str:
        return json.dumps({"query": self._query_id, "batch": batch_id})

    def close(self) -> None:
        """Release the clients; an open transaction is aborted. Idempotent; tolerates a
        fenced or broken producer."""
        self._stopping.set()
        with self._lock:
            if self._pid != os.getpid():
                return  # made in another process: not ours to touch
            try:
                self.abort_open(timeout=min(self._timeout, CLOSE_TIMEOUT))
            finally:
                self._drop()

    def _call(self, call: Callable[[], Any], what: str) -> Any:
        """Run a transactional call; its errors become :class:`SinkError`s that say what to
        do (fenced: another writer; retriable: the batch is retried with a new producer).

        The call runs under a deadline, :data:`GRACE` seconds past its own timeout: one
        still inside librdkafka then is abandoned with its producer, and the batch is
        retried with a new producer, whose ``init_transactions()`` fences the old one and
        settles its transaction (a commit that landed is then found in the marker)."""
        limit = self._deadline(what)
        try:
            try:
                return _bounded(call, limit, what)
            except _Overran as overran:
                self._drop(stuck=overran.thread)
                self._abandoned_init = self._abandoned_init or what == "init_transactions"
                raise SinkError(
                    f"Kafka {what} did not return within {limit:.0f} s (the client can wait "
                    "far longer for a coordinator after a broker restart); the producer is "
                    "abandoned and the batch is retried with a new one"
                ) from RetriableError(f"{what} timed out")
            except SystemError as wrapped:
                # confluent-kafka: a fatal error raised while a delivery callback runs
                # surfaces as a SystemError, with the KafkaException as its context or
                # lost; the next transactional call then raises it
                inner = wrapped.__cause__ or wrapped.__context__
                if isinstance(inner, KafkaException):
                    raise inner from None
                self._probe(what)
                self._drop()
                raise SinkError(
                    f"Kafka {what} failed without an error from the client; the batch is "
                    "retried with a new producer"
                ) from RetriableError(str(wrapped))
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.code() in _FENCED:
                self._timed_out_instead(what, error, exc)
                self._drop()
                if self._abandoned_init:  # once: a second fence is another writer's
                    self._abandoned_init = False
                    raise SinkError(
                        f"Kafka producer fenced during {what}, most likely by this writer's "
                        "own init_transactions() that was abandoned earlier and has now "
                        f"completed ({error.str()} [{error.name()}]); the batch is retried "
                        "with a new producer"
                    ) from RetriableError(error.str())
                # for good: a new producer's init_transactions() would fence the live writer
                self._fenced = (
                    f"Kafka producer fenced during {what}: another writer with "
                    f"transactional.id '{self.transactional_id}' started (is this query "
                    f"running twice?): {error.str()} [{error.name()}]"
                )
                raise SinkError(self._fenced) from exc
            if error.fatal():
                self._drop()
                raise SinkError(
                    f"Kafka producer failed fatally during {what}: {error.str()} "
                    f"[{error.name()}]; the batch is retried with a new producer"
                ) from RetriableError(error.str())
            if error.txn_requires_abort():
                self.abort_open()
                raise SinkError(
                    f"Kafka transaction aborted at {what}: {error.str()} [{error.name()}]; "
                    "the batch is retried"
                ) from RetriableError(error.str())
            self._drop()
            text = f"Kafka {what} failed: {error.str()} [{error.name()}]"
            if is_transient(error):
                raise SinkError(f"{text}; the batch is retried") from RetriableError(error.str())
            raise SinkError(text) from exc

    def _consumer_call(self, call: Callable[[], Any], what: str) -> Any:
        """A call of the marker consumer under the same deadline as the producer's; one that
        overruns strands the consumer (kept, never closed) and fails the batch as retriable."""
        consumer, limit = self._consumer, self._timeout + GRACE
        try:
            return _bounded(call, limit, what)
        except _Overran as overran:
            _STRANDED.append((os.getpid(), consumer, overran.thread))
            self._consumer = None
            self._drop()
            raise SinkError(
                f"Reading {what} of group '{self.group}' did not return within {limit:.0f} s; "
                "the batch is retried"
            ) from RetriableError(f"reading {what} timed out")

    def _deadline(self, what: str) -> float:
        """Seconds a call may take before it is abandoned."""
        if what == "flush":
            return delivery_timeout(producer_settings(self._settings)) + GRACE
        return self._timeout + GRACE

    def _refuse_if_fenced(self) -> None:
        if self._fenced is not None:
            raise SinkError(f"{self._fenced}; this writer stays stopped")

    def _timed_out_instead(self, what: str, error: KafkaError, exc: KafkaException) -> None:
        """A producer fenced inside a transaction older than ``transaction.timeout.ms`` was
        most likely aborted by the broker for its age (it bumps the epoch, which the
        producer sees as a fence): raise that, retriable once per batch (a batch that
        always takes that long would fail again)."""
        limit, began, batch = self._transaction_timeout_ms, self._began, self._batch
        if not self._open or limit is None or began is None or batch is None:
            return
        took = self._clock() - began
        if took * 1000 <= limit:
            return
        self._drop()
        text = (
            f"Kafka aborted the transaction of batch {batch} during {what}: it ran "
            f"{took:.1f} s, longer than 'kafka.transaction.timeout.ms' ({limit:.0f} ms), and "
            f"the broker aborts older transactions ({error.str()} [{error.name()}]). Raise "
            "kafka.transaction.timeout.ms (at most the broker's transaction.max.timeout.ms, "
            "15 minutes by default) or write smaller batches (e.g. the source's "
            "maxOffsetsPerTrigger)"
        )
        if batch in self._timed_out:
            raise SinkError(f"{text}; it timed out twice and is not retried again") from exc
        self._timed_out.add(batch)
        raise SinkError(f"{text}; the batch is retried once") from RetriableError(error.str())

    def _probe(self, what: str) -> None:
        """After a client call failed without saying why: abort the transaction, which
        raises the producer's error (fenced, fatal) if it has one."""
        producer = self._producer
        if producer is None or not self._open:
            return
        try:  # a KafkaException goes to _call's handler
            _bounded(lambda: producer.abort_transaction(self._timeout), self._timeout + GRACE, what)
        except _Overran as overran:
            self._drop(stuck=overran.thread)
            raise SinkError(
                f"Kafka {what} failed without an error from the client, and the abort of its "
                "transaction did not return; the batch is retried with a new producer"
            ) from RetriableError(what)
        self._open = False
        self._drop()
        raise SinkError(
            f"Kafka {what} failed without an error from the client; the transaction is "
            "aborted and the batch is retried"
        ) from RetriableError(what)

    # -- the marker and the record --------------------------------------------------------------
    def _read_marker(self) -> tuple[int | None, bool]:
        """The last batch the marker records (``None`` when the group has none), and whether
        it is settled. A stable read of the group's offset waits while a transactional
        commit to it is pending; one still pending past the timeout, after this writer's
        ``init_transactions()`` settled its own transactions, is left hanging (a broker
        stopped in the middle of a commit can leave one): the plain committed offset is
        then returned, unsettled. It counts as such only when the plain read answers and a
        second stable read right after it still does not (a coordinator that was away for
        the first one answers the second)."""
        consumer = self._consumer

        def stable(seconds: float) -> int | None:
            found = self._consumer_call(
                lambda: consumer.committed([TopicPartition(self.marker_topic, 0)], timeout=seconds),
                "the batch marker",
            )
            return _batch_of(found[0].offset)

        try:
            return stable(self._timeout), True
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._TIMED_OUT:
                self._marker_read_failed(exc)
            timed_out = exc
        try:
            plain = self._plain_marker()
        except _Unreadable:
            self._marker_read_failed(timed_out)
        try:
            return stable(min(self._timeout, CONFIRM_SECONDS)), True
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._TIMED_OUT:
                self._marker_read_failed(exc)
        return plain, False

    def _marker_read_failed(self, exc: KafkaException) -> NoReturn:
        error = exc.args[0]
        self._drop()
        raise SinkError(
            f"Reading the batch marker of group '{self.group}' failed: {error.str()} "
            f"[{error.name()}]; the batch is retried"
        ) from RetriableError(error.str())

    def _plain_marker(self) -> int | None:
        """The group's committed offset without waiting for pending transactional commits
        (a read_uncommitted read) as a batch; raises :class:`_Unreadable` when that read
        fails too."""
        limit = min(self._timeout, PLAIN_READ_TIMEOUT)
        try:
            consumer = Consumer(self._marker_consumer_config("read_uncommitted"))
        except KafkaException as exc:
            raise _Unreadable from exc
        try:
            found = _bounded(
                lambda: consumer.committed([TopicPartition(self.marker_topic, 0)], timeout=limit),
                limit + GRACE,
                "the unsettled batch marker",
            )
        except _Overran as overran:
            _STRANDED.append((os.getpid(), consumer, overran.thread))
            raise _Unreadable from None
        except KafkaException as exc:
            _close_consumer(consumer)
            raise _Unreadable from exc
        _close_consumer(consumer)
        return _batch_of(found[0].offset)

    def _recover(self, marker: int | None, batch_id: int) -> int | None:
        """The last applied batch, from the marker or (when it is missing) the record."""
        last_committed = self._last_committed
        if marker is not None:
            self._refuse_ahead(marker)
            return marker
        record = self._read_record()
        if record is None:
            if last_committed is not None:
                log.warning(
                    "Kafka sink: no batch marker in group '%s' and no record in the "
                    "checkpoint's state; batches up to %d are taken as applied (the "
                    "checkpoint's commit log)",
                    self.group,
                    last_committed,
                )
            return last_committed
        recorded, phase = int(record["batch"]), record.get("phase")
        if phase == "committed":
            log.warning(
                "Kafka sink: the batch marker of group '%s' is missing (expired after "
                "offsets.retention.minutes without a commit, or deleted); the checkpoint's "
                "record says batch %d was committed last: continuing after it",
                self.group,
                recorded,
            )
            return recorded
        previous = record.get("previous")
        if batch_id != recorded:
            return recorded if batch_id < recorded else previous
        age = time.time() - float(record.get("at", 0))
        if previous is None and age < RETENTION_SECONDS:
            return None  # no marker was ever committed, and one for this batch would be here
        return self._unknown(
            recorded,
            previous,
            f"Batch {recorded} was being committed to Kafka when the query stopped "
            f"{age / 3600:.1f} h ago, and its batch marker (the committed offset of group "
            f"'{self.group}' for '{self.marker_topic}' partition 0) is gone: Kafka drops "
            "group offsets offsets.retention.minutes (7 days by default) after the last "
            "commit, and the group may have been deleted",
        )

    def _refuse_ahead(self, marker: int) -> None:
        """Refuse a marker past the batch after the checkpoint's last committed one."""
        last_committed = self._last_committed
        if last_committed is not None and marker > last_committed + 1:
            raise SinkError(
                f"The batch marker of group '{self.group}' says batch {marker} was "
                f"written, but this checkpoint committed only up to batch "
                f"{last_committed}: the topic holds batches this checkpoint never "
                "committed (a restored older checkpoint, or another query with the same "
                "id). Start a new query (a new checkpoint) to write to this topic again"
            )

    def _recover_unsettled(self, settled: int | None, batch_id: int) -> int | None:
        """The last applied batch when a transactional commit to the marker group does not
        settle: the newest of the settled marker, the checkpoint's commits and the batches
        the record knows were committed. The batch the record says was being committed is
        in doubt only if a ``commit_transaction()`` may have been sent for it."""
        if settled is not None:
            self._refuse_ahead(settled)
        record = self._read_record() or {}
        recorded = int(record["batch"]) if "batch" in record else None
        phase = record.get("phase")
        known = [batch for batch in (settled, self._last_committed) if batch is not None]
        if recorded is not None and phase == "committed":
            known.append(recorded)
        elif record.get("previous") is not None:
            known.append(int(record["previous"]))
        last = max(known, default=None)
        why = (
            f"a transactional commit to group '{self.group}' did not settle within "
            f"{self._timeout:.0f} s after this writer's init_transactions(): a transaction "
            "left hanging on __consumer_offsets (a broker stopped in the middle of a commit "
            f"can leave one). The settled batch marker says batch {settled}"
        )
        # the batch's own commit may be the one left hanging: with no record of it (no
        # state), or a record of it being committed, unless this writer knows it never sent
        # that commit (its attempt failed before)
        unrecorded = recorded is None and self._state is None
        in_doubt = (
            (unrecorded or (recorded == batch_id and phase == "committing"))
            and (last is None or batch_id > last)
            and (batch_id != self._batch or batch_id == self._commit_sent)
        )
        if in_doubt:
            return self._unknown(
                batch_id,
                last,
                f"A commit of batch {batch_id} to Kafka may have been sent (by an earlier run "
                f"or a failed attempt), and {why}",
            )
        log.warning(
            "Kafka sink: %s; batches up to %s are applied (the checkpoint and its record "
            "say so): continuing after it (a commit of this writer's own that was left "
            "hanging settles with its next commit; one of another producer stays until "
            "kafka-transactions.sh abort ends it)",
            why,
            last,
        )
        return last

    def _unknown(self, batch_id: int, previous: int | None, reason: str) -> int | None:
        text = f"{reason}. Whether batch {batch_id} is in the topic cannot be told"
        if self._unknown_batch == "rewrite":
            log.warning("Kafka sink: %s; writing it again (exactlyOnceUnknownBatch=rewrite)", text)
            return previous
        if self._unknown_batch == "skip":
            log.warning("Kafka sink: %s; skipping it (exactlyOnceUnknownBatch=skip)", text)
            return batch_id
        raise SinkError(
            f"{text}. Restart with exactlyOnceUnknownBatch=rewrite (write it again: may "
            "duplicate it) or exactlyOnceUnknownBatch=skip (may lose it)"
        )

    def _read_record(self) -> dict[str, Any] | None:
        if self._state is None:
            return None
        record = self._state.read(STATE_FILE)
        return record if isinstance(record, dict) and "batch" in record else None

    def _record(self, record: dict[str, Any]) -> None:
        if self._state is not None:
            self._state.write(STATE_FILE, {**record, "at": time.time()})


def _purge(producer: Any) -> None:
    # Destroy the handle now, in the process that made it: left to the garbage collector,
    # it could be destroyed in a forked child, where its threads do not exist.
    producer.purge(True, True, False)
    with warnings.catch_warnings():  # a fenced producer's close() warns that abort failed
        warnings.simplefilter("ignore", RuntimeWarning)
        producer.close()


def _close_retired() -> None:
    """Destroy the retired producers made in this process (one whose abandoned call has
    not returned yet stays until it has)."""

    def closable(entry: tuple[int, Any, threading.Thread | None]) -> bool:
        return entry[0] == os.getpid() and (entry[2] is None or not entry[2].is_alive())

    with _RETIRED_LOCK:
        mine = [entry for entry in _RETIRED if closable(entry)]
        _RETIRED[:] = [entry for entry in _RETIRED if not closable(entry)]
    for entry in mine:
        try:
            _purge(entry[1])
        except Exception as exc:  # fenced: close() says so, and still releases the handle
            log.debug("Kafka sink: closing a retired producer: %s", exc)


def _close_consumer(consumer: Any) -> None:
    consumer.close()


def _batch_of(offset: int) -> int | None:
    """The batch a marker offset records (``batch id + 1``); ``None`` for no offset."""
    return offset - 1 if offset >= 1 else None


def _fatal_cause(error: BaseException) -> KafkaException | None:
    """The fatal client error behind ``error``, if there is one."""
    link: BaseException | None = error
    while link is not None:
        if isinstance(link, KafkaException) and link.args[0].fatal():
            return link
        link = link.__cause__
    return None


def _raise(error: BaseException) -> None:
    raise error
