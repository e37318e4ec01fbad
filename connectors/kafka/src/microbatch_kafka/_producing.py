"""Rows of the sink's input into produce calls, delivery checks, and the producer cache.

Imported only when a Kafka write runs (it imports ``confluent_kafka``). The columns are taken
out of Arrow once per record batch (``to_pylist``); the remaining per-row Python is one dict
(``produce_batch``, when there is no ``headers`` column and no row names its partition) or
one ``produce()`` call per row.
Delivery reports are asked for failures only (``delivery.report.only.error``), so a healthy
write runs no Python per delivered record.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Producer

from microbatch import OptionError, RetriableError, SinkError

from ._client_config import PREFIX
from ._sink_schema import NULL_TOPIC, Layout

__all__ = [
    "CHUNK",
    "Delivery",
    "RunProducers",
    "check_settings",
    "close_run",
    "flush_and_check",
    "is_fatal",
    "is_transient",
    "open_producers",
    "produce_batch",
    "producer_settings",
    "raise_client_error",
    "run_producers",
]

CHUNK = 10_000
"""Rows per ``produce_batch`` call: large enough to amortise the call, small enough to fit
the producer's queue."""
_DEFAULT_QUEUE = 100_000  # librdkafka's queue.buffering.max.messages
_DEFAULT_QUEUE_KBYTES = 1_048_576  # librdkafka's queue.buffering.max.kbytes
_DEFAULT_DELIVERY_MS = 300_000  # librdkafka's message.timeout.ms


def producer_settings(user: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka settings of the sink's producers: the user's, over the sink's defaults.

    ``partitioner=murmur2_random`` puts keyed records where the Java clients (and so Spark)
    put them; ``enable.idempotence`` is on, as in Java clients since 3.0; failed deliveries
    only are reported to Python.
    """
    settings: dict[str, Any] = {
        "partitioner": "murmur2_random",
        "enable.idempotence": True,
        "delivery.report.only.error": True,
    }
    settings.update(user)
    return settings


def check_settings(
    config: Mapping[str, Any], user: Mapping[str, Any], secrets: Sequence[str]
) -> None:
    """Raise :class:`OptionError` when librdkafka refuses producer ``config`` (an unknown
    name, a bad value), naming the ``kafka.`` option of ``user`` (the user's settings) at
    fault. The client is built without ``bootstrap.servers`` (it asks no broker; its
    threads end before this returns) and closed at once."""
    trial = {k: v for k, v in config.items() if k != "bootstrap.servers"}
    trial["log_level"] = 0  # no "no bootstrap.servers" notice
    problem = _refusal(trial)
    if problem is None:
        return
    culprits = [key for key in user if f'"{key}"' in problem]
    if not culprits:  # librdkafka may name an alias (linger.ms: queue.buffering.max.ms)
        culprits = [
            key
            for key, value in user.items()
            if key != "bootstrap.servers" and _refusal({key: value, "log_level": 0})
        ]
    for secret in secrets:
        problem = problem.replace(secret, "***")
    if len(culprits) == 1:
        raise OptionError(
            f"Kafka option '{PREFIX}{culprits[0]}' is refused by the Kafka client: {problem}"
        )
    raise OptionError(f"The Kafka options (kafka.*) are refused by the Kafka client: {problem}")


def _refusal(config: Mapping[str, Any]) -> str | None:
    try:
        producer = Producer(dict(config))
    except KafkaException as exc:
        return str(exc.args[0].str())
    except (TypeError, ValueError) as exc:
        return str(exc)
    producer.close()
    return None


class RunProducers:
    """The at-least-once producers of one query run in one process: one per thread that
    writes parts, made when it first writes, all closed by :meth:`close`.

    One per thread, not one shared: a thread's ``flush()`` then waits for, and serves the
    delivery reports of, its own part's records only, so a part's check never returns before
    a failed report of its records was counted (with a shared producer, another thread could
    be running that report's callback when this thread's ``flush()`` returns).
    """

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = dict(settings)
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._by_thread: dict[int, Producer] = {}

    def get(self) -> Producer:
        """This thread's producer (made now if it has none)."""
        thread = threading.get_ident()
        with self._lock:
            producer = self._by_thread.get(thread)
            if producer is None:
                producer = Producer(dict(self.settings))
                self._by_thread[thread] = producer
            return producer

    def forget(self) -> None:
        """Destroy this thread's producer (after a fatal error: librdkafka refuses every
        later call of that handle); the thread's next write makes a new one."""
        with self._lock:
            producer = self._by_thread.pop(threading.get_ident(), None)
        if producer is not None:
            _close(producer)

    def close(self) -> None:
        """Destroy every producer of the run, dropping what they still hold (a clean batch
        was flushed before it returned: anything left belongs to a failed one)."""
        with self._lock:
            producers, self._by_thread = list(self._by_thread.values()), {}
        for producer in producers:
            _close(producer)

    def __len__(self) -> int:
        return len(self._by_thread)


def _close(producer: Producer) -> None:
    try:
        producer.purge(True, True, False)
        producer.close()
    except Exception:  # already broken: nothing more to release
        pass


_RUNS: dict[tuple[str, int], RunProducers] = {}
_RUNS_LOCK = threading.Lock()


def run_producers(run: str, settings: Mapping[str, Any]) -> RunProducers:
    """The producers of run ``run`` in this process (a forked child gets its own: it
    never calls, nor destroys, the handles it inherited, whose threads did not survive the
    fork)."""
    key = (run, os.getpid())
    with _RUNS_LOCK:
        producers = _RUNS.get(key)
        if producers is None:
            producers = _RUNS[key] = RunProducers(settings)
        return producers


def close_run(run: str) -> None:
    """Close the producers of run ``run`` in this process (the stream writer's ``stop()``)."""
    with _RUNS_LOCK:
        producers = _RUNS.pop((run, os.getpid()), None)
    if producers is not None:
        producers.close()


def open_producers() -> int:
    """How many at-least-once producers this process holds open."""
    with _RUNS_LOCK:
        return sum(len(p) for (_, pid), p in _RUNS.items() if pid == os.getpid())


@atexit.register
def _close_at_exit() -> None:
    """Part writers whose run was not stopped in this process (pickled to another one)
    close their producers when it exits."""
    with _RUNS_LOCK:
        mine = [key for key in _RUNS if key[1] == os.getpid()]
        runs = [_RUNS.pop(key) for key in mine]
    for producers in runs:
        producers.close()


def is_fatal(error: BaseException) -> bool:
    """True when ``error`` was raised from a fatal client error (or a client call that
    failed without saying why)."""
    link: BaseException | None = error
    while link is not None:
        if isinstance(link, SystemError):
            return True
        if isinstance(link, KafkaException) and link.args[0].fatal():
            return True
        link = link.__cause__
    return False


class Delivery:
    """Failed delivery reports of one write: the first one and how many.

    A record purged from the producer's queue (``_PURGE_QUEUE``, ``_PURGE_INFLIGHT``) was
    not refused by Kafka: librdkafka purges the rest of a transaction that failed, and the
    sink purges a producer it drops. The first other failure is reported in preference, and
    inside a transaction (``transactional``) a purge alone aborts and retries the batch.

    The callback calls no function but ``code()``: confluent-kafka may run it while a fatal
    client error is pending, and any producer call would then fail with a ``SystemError``
    that hides that error. Reports of one write are served by the thread that flushes it,
    so the counting needs no lock.
    """

    def __init__(self, where: str, *, transactional: bool = False) -> None:
        self.where = where
        self.transactional = transactional
        self.failed = 0
        self.first: tuple[KafkaError, Any] | None = None
        self.first_purge: tuple[KafkaError, Any] | None = None

    def __call__(self, error: KafkaError | None, message: Any) -> None:
        if error is None:
            return
        self.failed += 1
        if error.code() in _PURGED:
            if self.first_purge is None:
                self.first_purge = (error, message)
        elif self.first is None:
            self.first = (error, message)

    def check(self) -> None:
        """Raise the first failure as a :class:`SinkError` (from a ``RetriableError`` when
        :func:`is_transient`, or for a purge inside a transaction)."""
        reported = self.first or self.first_purge
        if reported is None:
            return
        error, message = reported
        topic = message.topic() if message is not None else None
        partition = message.partition() if message is not None else None
        where = f"topic '{topic}'" + (
            f" partition {partition}" if partition is not None and partition >= 0 else ""
        )
        what = (
            f"Kafka could not deliver {self.failed} record(s) of {self.where}; the first to {where}"
        )
        if self.first is None and self.transactional:  # purged by a failed transaction
            raise SinkError(
                f"{what}: {error.str()} [{error.name()}]; the transaction is aborted and the "
                "batch is retried"
            ) from RetriableError(error.str())
        raise_client_error(error, what)


_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
"""Delivery report codes of records purged from the producer (never sent, or their
outcome not waited for), not refused by Kafka."""

_TRANSIENT = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._QUEUE_FULL,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.CONCURRENT_TRANSACTIONS,
    }
)
"""Codes that running the batch again may cure (a delivery report's error does not carry the
client's ``retriable()`` flag, so it is judged by its code)."""


def is_transient(error: KafkaError) -> bool:
    """True when retrying may cure ``error``: the client says so, or its code is one of a
    broker being away, slow or moving leadership."""
    return bool(error.retriable()) or (error.code() in _TRANSIENT and not error.fatal())


def raise_client_error(error: KafkaError, what: str) -> None:
    """Raise ``SinkError("<what>: <client text> [<code name>]")``, from a RetriableError when
    :func:`is_transient`."""
    text = f"{what}: {error.str()} [{error.name()}]"
    if is_transient(error):
        raise SinkError(f"{text}; the batch is retried") from RetriableError(error.str())
    raise SinkError(text) from KafkaException(error)


def _queue_limit(settings: Mapping[str, Any]) -> int:
    try:
        return max(1, int(settings.get("queue.buffering.max.messages", _DEFAULT_QUEUE)))
    except (TypeError, ValueError):
        return _DEFAULT_QUEUE


def delivery_timeout(settings: Mapping[str, Any]) -> float:
    """Seconds ``flush()`` waits: the producer's own delivery timeout, and a margin."""
    raw = settings.get("message.timeout.ms", settings.get("delivery.timeout.ms"))
    try:
        millis = int(raw) if raw is not None else _DEFAULT_DELIVERY_MS
    except (TypeError, ValueError):
        millis = _DEFAULT_DELIVERY_MS
    return (millis or _DEFAULT_DELIVERY_MS) / 1000 + 30


def produce_batch(
    producer: Producer,
    batch: pa.RecordBatch,
    layout: Layout,
    delivery: Delivery,
    settings: Mapping[str, Any],
) -> int:
    """Hand every row of ``batch`` (columns as ``layout`` says, already checked) to
    ``producer``; returns the rows handed over. Raises :class:`SinkError` for a row the client
    refuses at once (too large, unknown partition) and for a null topic."""
    if batch.num_rows == 0:
        return 0
    if layout.topic:
        topics = batch.column(batch.schema.get_field_index("topic"))
        if topics.null_count:
            raise SinkError(NULL_TOPIC)
        groups = _rows_by_topic(batch, topics)
    else:
        assert layout.default_topic is not None
        groups = [(layout.default_topic, batch)]
    room = _Room(producer, settings)
    for topic, rows in groups:
        _produce_topic(producer, topic, rows, layout, delivery, room)
    return batch.num_rows


class _Room:
    """Waiting for room in the producer's queue, bounded: records leave it when they are
    delivered or fail (``message.timeout.ms``), so a queue still full after the delivery
    timeout fails the write (retriable), and a record refused by an empty queue can never
    fit (larger than ``queue.buffering.max.kbytes``) and fails it at once."""

    def __init__(self, producer: Producer, settings: Mapping[str, Any]) -> None:
        self.producer = producer
        self.settings = settings
        self.limit = _queue_limit(settings)
        self.patience = delivery_timeout(settings)
        self.deadline: float | None = None

    def wait(self, topic: str, size: int) -> None:
        """The queue refused a record of ``size`` bytes: wait a little for room (serving
        delivery reports), or raise :class:`SinkError` when there will be none."""
        if len(self.producer) == 0:
            raw = self.settings.get("queue.buffering.max.kbytes", _DEFAULT_QUEUE_KBYTES)
            raise SinkError(
                f"A record of {size} bytes for topic '{topic}' does not fit the producer's "
                f"queue even when it is empty: 'kafka.queue.buffering.max.kbytes' is {raw} "
                "(KiB); raise it above the largest record"
            )
        self.poll()

    def poll(self) -> None:
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.patience
        elif now > self.deadline:
            raise SinkError(
                f"The producer's queue stayed full for {self.patience:.0f} s (its records "
                "were neither delivered nor failed); the batch is retried"
            ) from RetriableError("producer queue full")
        self.producer.poll(0.1)

    def made(self) -> None:
        """Some records were queued: the wait starts again."""
        self.deadline = None


def _size(*parts: Any) -> int:
    """Bytes of a record's parts (keys, values, header names and values)."""
    return sum(
        len(part.encode() if isinstance(part, str) else part) for part in parts if part is not None
    )


def _explicit_partitions(rows: pa.RecordBatch, layout: Layout) -> bool:
    if not layout.partition:
        return False
    column = rows.column(rows.schema.get_field_index("partition"))
    return column.null_count < len(column)


def _rows_by_topic(batch: pa.RecordBatch, topics: pa.Array) -> list[tuple[str, pa.RecordBatch]]:
    """The rows of each topic, in the order of the batch (only order within a topic matters:
    Kafka orders records per partition)."""
    names = pc.unique(topics).to_pylist()
    if len(names) == 1:
        return [(str(names[0]), batch)]
    return [(str(name), batch.filter(pc.equal(topics, name))) for name in names]


def _column(batch: pa.RecordBatch, name: str, present: bool) -> list[Any]:
    if not present:
        return [None] * batch.num_rows
    return batch.column(batch.schema.get_field_index(name)).to_pylist()


def _produce_topic(
    producer: Producer,
    topic: str,
    rows: pa.RecordBatch,
    layout: Layout,
    delivery: Delivery,
    room: _Room,
) -> None:
    """Queue the rows of one topic: in chunks through ``produce_batch``, or one ``produce()``
    per row when they carry headers or partitions (``produce_batch`` sends no headers, and
    (confluent-kafka 2.16) ignores a message's own 'partition')."""
    per_row = layout.headers or _explicit_partitions(rows, layout)
    chunk = rows.num_rows if per_row else min(CHUNK, room.limit)
    for start in range(0, rows.num_rows, chunk):
        part = rows.slice(start, chunk)
        values = _column(part, "value", True)
        keys = _column(part, "key", layout.key)
        if per_row:
            _produce_rows(producer, topic, part, values, keys, layout, delivery, room)
        else:
            messages = [{"value": v, "key": k} for v, k in zip(values, keys, strict=True)]
            _enqueue(producer, topic, messages, delivery, room)


def _enqueue(
    producer: Producer,
    topic: str,
    messages: list[dict[str, Any]],
    delivery: Delivery,
    room: _Room,
) -> None:
    """``produce_batch`` until every message is queued: a full queue is drained by polling
    and the refused messages are offered again, in order."""
    while messages:
        while len(producer) and len(producer) + len(messages) > room.limit:
            room.poll()
        queued = producer.produce_batch(topic, messages, on_delivery=delivery)
        if queued == len(messages):
            return
        refused = [message for message in messages if "_error" in message]
        for message in refused:
            error = message["_error"]
            if error.code() != KafkaError._QUEUE_FULL:
                raise_client_error(error, _refused_text(topic, -1))
        for message in refused:
            del message["_error"]
        if queued:
            room.made()
        first = refused[0]
        room.wait(topic, _size(first["value"], first["key"]))
        messages = refused


def _produce_rows(
    producer: Producer,
    topic: str,
    rows: pa.RecordBatch,
    values: list[Any],
    keys: list[Any],
    layout: Layout,
    delivery: Delivery,
    room: _Room,
) -> None:
    """One ``produce()`` per row of ``rows`` (``values`` and ``keys`` already read)."""
    partitions = _column(rows, "partition", layout.partition)
    headers = _column(rows, "headers", layout.headers)
    for value, key, partition, header in zip(values, keys, partitions, headers, strict=True):
        pairs = [(entry["key"], entry["value"]) for entry in header] if header else None
        if pairs and any(name is None for name, _ in pairs):
            raise SinkError(f"A row for topic '{topic}' has a header with a null key")
        target = -1 if partition is None else partition
        waited = False
        while True:
            try:
                producer.produce(topic, value, key, target, delivery, headers=pairs)
                break
            except BufferError:
                waited = True
                sizes = [_size(name, data) for name, data in pairs or ()]
                room.wait(topic, _size(value, key) + sum(sizes))
            except KafkaException as exc:
                raise_client_error(exc.args[0], _refused_text(topic, target))
        if waited:
            room.made()


def _refused_text(topic: str, partition: int) -> str:
    where = f"topic '{topic}'" + (f" partition {partition}" if partition >= 0 else "")
    return f"Kafka refused a record for {where}"


def flush_and_check(producer: Producer, delivery: Delivery, settings: Mapping[str, Any]) -> None:
    """Wait until every queued record is delivered or failed, then raise the first failure.

    Records still queued after the producer's own delivery timeout (and a margin) fail the
    write as retriable."""
    try:
        left = producer.flush(delivery_timeout(settings))
    except SystemError as wrapped:  # a fatal client error raised while delivery reports ran
        inner = wrapped.__cause__ or wrapped.__context__
        if isinstance(inner, KafkaException):
            raise_client_error(inner.args[0], f"Kafka failed while delivering {delivery.where}")
        retry = RetriableError(str(wrapped))
        retry.__cause__ = wrapped  # is_fatal(): the producer is replaced
        raise SinkError(
            f"Kafka failed while delivering {delivery.where} without an error from the "
            "client; the batch is retried with a new producer"
        ) from retry
    except KafkaException as exc:
        raise_client_error(exc.args[0], f"Kafka failed while delivering {delivery.where}")
    delivery.check()
    if left:
        raise SinkError(
            f"{left} record(s) of {delivery.where} were still not delivered to Kafka after "
            f"{delivery_timeout(settings):.0f} s; the batch is retried"
        ) from RetriableError("delivery timed out")
