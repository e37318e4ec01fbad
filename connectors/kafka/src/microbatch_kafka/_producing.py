"""Rows of the sink's input into produce calls, delivery checks, and the producer cache.

Imported only when a Kafka write runs (it imports ``confluent_kafka``). The columns are taken
out of Arrow once per record batch (``to_pylist``); the remaining per-row Python is one dict
(``produce_batch``, when there is no ``headers`` column and no row names its partition) or
one ``produce()`` call per row.
Delivery reports are asked for failures only (``delivery.report.only.error``), so a healthy
write runs no Python per delivered record.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Producer

from microbatch import RetriableError, SinkError

from ._sink_schema import NULL_TOPIC, Layout

__all__ = [
    "CHUNK",
    "Delivery",
    "cached_producer",
    "flush_and_check",
    "forget_producer",
    "is_fatal",
    "is_transient",
    "produce_batch",
    "producer_settings",
    "raise_client_error",
]

CHUNK = 10_000
"""Rows per ``produce_batch`` call: large enough to amortise the call, small enough to fit
the producer's queue."""
_DEFAULT_QUEUE = 100_000  # librdkafka's queue.buffering.max.messages
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


_PRODUCERS: dict[tuple[Any, ...], Producer] = {}
_PRODUCERS_LOCK = threading.Lock()


def cached_producer(settings: Mapping[str, Any]) -> Producer:
    """The process-local producer for ``settings``, one per thread.

    Keyed by the settings, the process id and the thread: a forked child never touches the
    parent's handles (librdkafka's threads do not survive a fork; the inherited objects are
    kept referenced, never destroyed, in the child), and each thread's ``flush()`` serves the
    delivery reports of its own records only. Producers live as long as the process.
    """
    key = (
        tuple(sorted((str(k), str(v)) for k, v in settings.items())),
        os.getpid(),
        threading.get_ident(),
    )
    with _PRODUCERS_LOCK:
        producer = _PRODUCERS.get(key)
        if producer is None:
            producer = Producer(dict(settings))
            _PRODUCERS[key] = producer
        return producer


def forget_producer(settings: Mapping[str, Any]) -> None:
    """Drop this thread's cached producer for ``settings`` (after a fatal error: librdkafka
    refuses every later call of that handle). It is destroyed here, in its own process."""
    key = (
        tuple(sorted((str(k), str(v)) for k, v in settings.items())),
        os.getpid(),
        threading.get_ident(),
    )
    with _PRODUCERS_LOCK:
        producer = _PRODUCERS.pop(key, None)
    if producer is not None:
        producer.purge(True, True, False)
        producer.close()


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

    The callback calls no function: confluent-kafka may run it while a fatal client error is
    pending, and any C call would then fail with a ``SystemError`` that hides that error.
    Reports of one producer are served by the thread that flushes it (one producer per
    thread), so the counting needs no lock.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.failed = 0
        self.first: tuple[KafkaError, Any] | None = None

    def __call__(self, error: KafkaError | None, message: Any) -> None:
        if error is None:
            return
        self.failed += 1
        if self.first is None:
            self.first = (error, message)

    def check(self) -> None:
        """Raise the first failure as a :class:`SinkError` (from a ``RetriableError`` when
        :func:`is_transient`)."""
        if self.first is None:
            return
        error, message = self.first
        topic = message.topic() if message is not None else None
        partition = message.partition() if message is not None else None
        where = f"topic '{topic}'" + (
            f" partition {partition}" if partition is not None and partition >= 0 else ""
        )
        raise_client_error(
            error,
            f"Kafka could not deliver {self.failed} record(s) of {self.where}; the first to "
            f"{where}",
        )


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
    for topic, rows in groups:
        if layout.headers or _explicit_partitions(rows, layout):
            # produce_batch sends no headers, and (confluent-kafka 2.16) ignores a message's
            # own 'partition': one produce() per row then
            _produce_rows(producer, topic, rows, layout, delivery)
        else:
            _produce_chunks(producer, topic, rows, layout, delivery, _queue_limit(settings))
    return batch.num_rows


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


def _produce_chunks(
    producer: Producer,
    topic: str,
    rows: pa.RecordBatch,
    layout: Layout,
    delivery: Delivery,
    queue_limit: int,
) -> None:
    chunk = min(CHUNK, queue_limit)
    for start in range(0, rows.num_rows, chunk):
        part = rows.slice(start, chunk)
        values = _column(part, "value", True)
        keys = _column(part, "key", layout.key)
        messages = [{"value": v, "key": k} for v, k in zip(values, keys, strict=True)]
        _enqueue(producer, topic, messages, delivery, queue_limit)


def _enqueue(
    producer: Producer,
    topic: str,
    messages: list[dict[str, Any]],
    delivery: Delivery,
    queue_limit: int,
) -> None:
    """``produce_batch`` until every message is queued: a full queue is drained by polling
    and the refused messages are offered again, in order."""
    while messages:
        while len(producer) and len(producer) + len(messages) > queue_limit:
            producer.poll(0.1)
        queued = producer.produce_batch(topic, messages, on_delivery=delivery)
        if queued == len(messages):
            return
        refused = [message for message in messages if "_error" in message]
        for message in refused:
            error = message["_error"]
            if error.code() != KafkaError._QUEUE_FULL:
                raise_client_error(error, _refused_text(topic, -1))
        messages = refused
        for message in messages:
            del message["_error"]
        producer.poll(0.1)


def _produce_rows(
    producer: Producer, topic: str, rows: pa.RecordBatch, layout: Layout, delivery: Delivery
) -> None:
    values = _column(rows, "value", True)
    keys = _column(rows, "key", layout.key)
    partitions = _column(rows, "partition", layout.partition)
    headers = _column(rows, "headers", layout.headers)
    for value, key, partition, header in zip(values, keys, partitions, headers, strict=True):
        pairs = [(entry["key"], entry["value"]) for entry in header] if header else None
        if pairs and any(name is None for name, _ in pairs):
            raise SinkError(f"A row for topic '{topic}' has a header with a null key")
        target = -1 if partition is None else partition
        while True:
            try:
                producer.produce(topic, value, key, target, delivery, headers=pairs)
                break
            except BufferError:
                producer.poll(0.1)
            except KafkaException as exc:
                raise_client_error(exc.args[0], _refused_text(topic, target))


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
