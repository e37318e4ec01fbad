"""Kafka from the test kit's service fixtures does what the Kafka connector will be tested on.

Runs against whichever provider ``MICROBATCH_SERVICES`` selects (the local Apache Kafka
broker on our machines).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from microbatch_testkit.services import KafkaService


def _consumer(kafka: KafkaService, **overrides: Any) -> Consumer:
    settings = {
        "group.id": f"g-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 1000,
        "heartbeat.interval.ms": 200,
        "reconnect.backoff.max.ms": 500,
        **overrides,
    }
    return Consumer(kafka.client_config(**settings))


def _drain(
    consumer: Consumer, *, expect: int, idle: float = 1.0, timeout: float = 60.0
) -> list[Any]:
    """Messages until ``expect`` have arrived and then ``idle`` seconds bring no more."""
    messages: list[Any] = []
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        batch = consumer.consume(num_messages=2000, timeout=0.2)
        for message in batch:
            assert message.error() is None, message.error()
        messages.extend(batch)
        if batch:
            quiet_since = time.monotonic()
        elif len(messages) >= expect and time.monotonic() - quiet_since >= idle:
            break
    return messages


def _assign_from_start(consumer: Consumer, topic: str, partitions: int) -> None:
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])


def _values(messages: Iterable[Any]) -> list[str]:
    return [m.value().decode() for m in messages]


def test_ten_thousand_keyed_messages_with_headers_round_trip(
    kafka_service: KafkaService, make_kafka_topic: Any
) -> None:
    topic = make_kafka_topic(3)
    producer = Producer(kafka_service.client_config(**{"linger.ms": 5, "enable.idempotence": True}))
    for seq in range(10_000):
        producer.produce(
            topic,
            key=f"key-{seq % 97}".encode(),
            value=f"value-{seq}".encode(),
            headers=[("seq", str(seq).encode()), ("origin", b"\x00binary\xff")],
        )
        if seq % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0

    consumer = _consumer(kafka_service)
    _assign_from_start(consumer, topic, 3)
    messages = _drain(consumer, expect=10_000, idle=0.5)
    consumer.close()

    assert len(messages) == 10_000
    partitions_of_key: dict[bytes, set[int]] = {}
    last_seq_of_key: dict[bytes, int] = {}
    seen = set()
    for message in messages:
        headers = dict(message.headers())
        seq = int(headers["seq"])
        assert headers["origin"] == b"\x00binary\xff"
        assert message.value() == f"value-{seq}".encode()
        assert message.key() == f"key-{seq % 97}".encode()
        partitions_of_key.setdefault(message.key(), set()).add(message.partition())
        # Within a key (hence a partition) the order of production is kept.
        assert seq > last_seq_of_key.get(message.key(), -1)
        last_seq_of_key[message.key()] = seq
        seen.add(seq)
    assert seen == set(range(10_000))
    assert all(len(found) == 1 for found in partitions_of_key.values())
    assert {m.partition() for m in messages} == {0, 1, 2}


def test_aborted_transaction_is_invisible_to_read_committed(
    kafka_service: KafkaService, make_kafka_topic: Any
) -> None:
    topic = make_kafka_topic(1)
    producer = Producer(kafka_service.client_config(**{"transactional.id": f"tx-{topic}"}))
    producer.init_transactions(30)
    for label, count, commit in (("first", 10, True), ("aborted", 7, False), ("second", 5, True)):
        producer.begin_transaction()
        for n in range(count):
            producer.produce(topic, key=b"k", value=f"{label}-{n}".encode())
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    committed = _consumer(kafka_service, **{"isolation.level": "read_committed"})
    _assign_from_start(committed, topic, 1)
    visible = _values(_drain(committed, expect=15))
    committed.close()
    assert visible == [f"first-{n}" for n in range(10)] + [f"second-{n}" for n in range(5)]

    # The aborted records were written: a read_uncommitted consumer gets them.
    uncommitted = _consumer(kafka_service, **{"isolation.level": "read_uncommitted"})
    _assign_from_start(uncommitted, topic, 1)
    everything = _values(_drain(uncommitted, expect=22))
    uncommitted.close()
    assert [v for v in everything if v.startswith("aborted")] == [f"aborted-{n}" for n in range(7)]
    assert len(everything) == 22


def _produce_numbers(kafka: KafkaService, topic: str, numbers: Iterable[int]) -> None:
    producer = Producer(kafka.client_config(**{"enable.idempotence": True}))
    for n in numbers:
        producer.produce(topic, value=str(n).encode())
    assert producer.flush(30) == 0


def test_delete_records_moves_the_low_watermark(
    kafka_service: KafkaService, make_kafka_topic: Any
) -> None:
    topic = make_kafka_topic(1)
    _produce_numbers(kafka_service, topic, range(100))
    consumer = _consumer(kafka_service)
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 100)

    futures = kafka_service.admin().delete_records([TopicPartition(topic, 0, 40)])
    (deleted,) = [future.result(timeout=30) for future in futures.values()]
    assert deleted.low_watermark == 40
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (40, 100)

    # A consumer asking for a deleted offset is sent to the new start (auto.offset.reset).
    consumer.assign([TopicPartition(topic, 0, 10)])
    messages = _drain(consumer, expect=60, idle=0.5)
    consumer.close()
    assert [m.offset() for m in messages] == list(range(40, 100))

    # With auto.offset.reset=error the loss is reported instead.
    strict = _consumer(kafka_service, **{"auto.offset.reset": "error"})
    strict.assign([TopicPartition(topic, 0, 10)])
    deadline = time.monotonic() + 30
    error = None
    while error is None and time.monotonic() < deadline:
        message = strict.poll(0.5)
        if message is not None and message.error() is not None:
            error = message.error()
    strict.close()
    assert error is not None and error.code() == KafkaError._AUTO_OFFSET_RESET


def test_short_retention_expires_old_segments(
    kafka_service: KafkaService, make_kafka_topic: Any
) -> None:
    topic = make_kafka_topic(1, config={"retention.ms": "1000", "segment.ms": "200"})
    _produce_numbers(kafka_service, topic, range(20))
    time.sleep(0.5)
    _produce_numbers(kafka_service, topic, range(20, 25))  # rolls a new segment
    consumer = _consumer(kafka_service)
    deadline = time.monotonic() + 30
    low = 0
    while low == 0 and time.monotonic() < deadline:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        time.sleep(0.3)
    consumer.close()
    assert low >= 20, "retention did not delete the first segment within 30 s"
    assert high == 25


def test_a_new_consumer_survives_broker_restarts(
    kafka_service: KafkaService, make_kafka_topic: Any
) -> None:
    if not kafka_service.can_restart:
        pytest.skip(f"the {kafka_service.provider} provider cannot restart its broker")
    topic = make_kafka_topic(2)
    producer = Producer(
        kafka_service.client_config(**{"enable.idempotence": True, "reconnect.backoff.max.ms": 500})
    )

    def produce(numbers: Iterable[int]) -> None:
        for n in numbers:
            producer.produce(topic, key=str(n % 10).encode(), value=str(n).encode())
        producer.poll(0)

    produce(range(500))
    assert producer.flush(30) == 0
    kafka_service.restart()
    produce(range(500, 1000))
    assert producer.flush(60) == 0
    with kafka_service.stopped(graceful=False):  # killed: queued records wait for it
        produce(range(1000, 1200))
        assert producer.flush(1) > 0
    assert producer.flush(60) == 0

    # a group member: a session long enough that a busy machine does not make it rebalance
    # (and read again from the earliest offset, nothing being committed)
    consumer = _consumer(
        kafka_service, **{"session.timeout.ms": 30000, "heartbeat.interval.ms": 1000}
    )
    consumer.subscribe([topic])
    received = _values(_drain(consumer, expect=1200, idle=0.5))
    consumer.close()
    assert sorted(int(v) for v in received) == list(range(1200))
