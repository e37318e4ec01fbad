"""Fixtures shared by the Kafka connector's tests: producing test records, source options.

``produce(topic, records)`` writes records (dicts with ``value`` and optionally ``key``,
``partition``, ``headers``, ``timestamp`` in epoch ms) and waits until every one is
acknowledged; ``produce_each(topic, partitions, count)`` writes ``count`` records to each
partition (values ``b"<partition>-<i>"``, keys ``b"k<i>"``). ``source_options(**more)`` is
the bootstrap option of the test broker plus ``more``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import pytest


class Producer:
    """A confluent-kafka producer for test data; every call flushes before it returns."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer as KafkaProducer

        self.errors: list[Any] = []
        self._producer = KafkaProducer(
            {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True}
        )

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(error)

    def send(self, topic: str, records: Iterable[Mapping[str, Any]]) -> int:
        """Write ``records``; return how many were acknowledged."""
        count = 0
        for record in records:
            extra: dict[str, Any] = {}
            if record.get("partition") is not None:
                extra["partition"] = int(record["partition"])
            if record.get("timestamp") is not None:
                extra["timestamp"] = int(record["timestamp"])
            if record.get("headers") is not None:
                extra["headers"] = list(record["headers"])
            while True:
                try:
                    self._producer.produce(
                        topic,
                        value=record.get("value"),
                        key=record.get("key"),
                        on_delivery=self._delivered,
                        **extra,
                    )
                    break
                except BufferError:
                    self._producer.poll(0.1)
            count += 1
        left = self._producer.flush(60)
        assert left == 0, f"{left} test records were not delivered to {topic} within 60 s"
        assert not self.errors, f"producing test records to {topic} failed: {self.errors[0]}"
        return count

    def each(self, topic: str, partitions: int, count: int, *, first: int = 0) -> None:
        """``count`` records to each of ``partitions`` partitions, numbered from ``first``."""
        self.send(
            topic,
            (
                {"partition": p, "key": b"k%d" % i, "value": b"%d-%d" % (p, i)}
                for p in range(partitions)
                for i in range(first, first + count)
            ),
        )


@pytest.fixture(scope="session")
def test_producer(kafka_service: Any) -> Iterator[Producer]:
    producer = Producer(kafka_service.bootstrap_servers)
    yield producer
    producer._producer.flush(5)
    producer._producer.close()  # before the broker stops: no reconnect attempts after it


@pytest.fixture
def produce(test_producer: Producer) -> Callable[[str, Iterable[Mapping[str, Any]]], int]:
    """``produce(topic, records)``: write records (dicts) and wait for their acknowledgement."""
    test_producer.errors.clear()
    return test_producer.send


@pytest.fixture
def produce_each(test_producer: Producer) -> Callable[..., None]:
    """``produce_each(topic, partitions, count, first=0)``: equal counts per partition."""
    test_producer.errors.clear()
    return test_producer.each


@pytest.fixture
def source_options(kafka_service: Any) -> Callable[..., dict[str, Any]]:
    """``source_options(subscribe=topic, ...)``: options of a Kafka source on the test broker."""

    def options(**more: Any) -> dict[str, Any]:
        return {"kafka.bootstrap.servers": kafka_service.bootstrap_servers, **more}

    return options


def _offsets_of(table: Any) -> dict[int, list[int]]:
    """``{partition: [offsets...]}`` of a table read from the source, offsets sorted."""
    out: dict[int, list[int]] = {}
    for partition, offset in zip(
        table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True
    ):
        out.setdefault(partition, []).append(offset)
    return {partition: sorted(found) for partition, found in sorted(out.items())}


@pytest.fixture
def offsets_of() -> Callable[[Any], dict[int, list[int]]]:
    """``offsets_of(table)``: ``{partition: [offsets...]}`` of rows read from the source."""
    return _offsets_of


@pytest.fixture
def drain(tmp_path: Any) -> Iterator[Callable[..., Any]]:
    """``drain(options, checkpoint="c")``: run an available-now query from the Kafka source
    into a memory table and return the rows of that run (``checkpoint`` names a folder under
    ``tmp_path``, reused by a later call with the same name); ``drain.session`` is its session."""
    import microbatch as mb

    session = mb.Session()
    runs = {"count": 0}

    def run(options: Mapping[str, Any], *, checkpoint: str = "checkpoint", **query: Any) -> Any:
        runs["count"] += 1
        name = f"drained_{runs['count']}"
        stream = session.read_stream.format("kafka").options(**options).load()
        started = (
            stream.write_stream.format("memory")
            .query_name(name)
            .option("checkpointLocation", str(tmp_path / checkpoint))
            .trigger(available_now=True)
            .start()
        )
        started.await_termination(timeout=query.get("timeout", 60))
        assert not started.is_active, "the available-now query did not finish within its time"
        error = started.exception()
        if error is not None:
            raise error
        run.last_query = started  # type: ignore[attr-defined]
        return session.table(name)

    run.session = session  # type: ignore[attr-defined]
    yield run
    session.stop()


@pytest.fixture
def new_producer(kafka_service: Any) -> Callable[[], Producer]:
    """``new_producer()``: a producer of its own (say, one that knows new partitions)."""
    return lambda: Producer(kafka_service.bootstrap_servers)


@pytest.fixture
def restartable(kafka_service: Any) -> Any:
    """The Kafka service, for a test that stops its broker; skipped unless the provider owns
    the broker (``MICROBATCH_SERVICES=local`` or ``docker``)."""
    if not kafka_service.can_restart:
        pytest.skip(
            f"the {kafka_service.provider} Kafka provider cannot stop its broker: run with "
            "MICROBATCH_SERVICES=local"
        )
    return kafka_service
