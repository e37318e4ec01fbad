"""Topics and partitions that appear while a query runs are read from their earliest offset."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import microbatch as mb
from microbatch_testkit.services._kafka import topic_name


@pytest.fixture
def session() -> Iterator[mb.Session]:
    with mb.Session() as made:
        yield made


def _wait_for(query: Any, check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if not query.is_active:
            raise AssertionError(f"the query stopped before {what}: {query.exception()!r}")
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {timeout:g} s")


def _start(session: mb.Session, name: str, options: dict[str, Any]) -> Any:
    return (
        session.read_stream.format("kafka")
        .options(**options)
        .load()
        .write_stream.format("memory")
        .query_name(name)
        .start()
    )


def _rows(session: mb.Session, name: str) -> list[tuple[str, int, bytes]]:
    table = session.table(name)
    return sorted(
        zip(
            table.column("topic").to_pylist(),
            table.column("offset").to_pylist(),
            table.column("value").to_pylist(),
            strict=True,
        )
    )


def test_a_pattern_picks_up_a_new_topic_from_its_earliest_offset(
    kafka_service: Any, session: mb.Session, source_options: Any, produce: Any
) -> None:
    prefix = topic_name("pattern")
    first, second, other = f"{prefix}-a", f"{prefix}-b", f"x{prefix}-c"
    kafka_service.create_topic(1, name=first)
    created = [first]
    try:
        produce(first, [{"value": b"before"}])  # before the start: not read (latest)
        query = _start(
            session, "pattern", source_options(subscribePattern=re.escape(prefix) + "-.*")
        )
        try:
            assert query.process_all_available(timeout=30)
            produce(first, [{"value": b"a1"}, {"value": b"a2"}])
            for name in (second, other):
                kafka_service.create_topic(1, name=name)
                created.append(name)
            # produced before the query sees the topic: read, since new topics start at earliest
            produce(second, [{"value": b"b0"}, {"value": b"b1"}, {"value": b"b2"}])
            produce(other, [{"value": b"not matched"}])
            _wait_for(query, lambda: len(_rows(session, "pattern")) >= 5, "5 rows")
            assert query.process_all_available(timeout=30)
            assert _rows(session, "pattern") == [
                (first, 1, b"a1"),
                (first, 2, b"a2"),
                (second, 0, b"b0"),
                (second, 1, b"b1"),
                (second, 2, b"b2"),
            ]
            assert query.last_progress is not None
            assert query.last_progress["sources"][0]["description"] == (
                f"KafkaV2[SubscribePattern[{re.escape(prefix)}-.*]]"
            )
        finally:
            query.stop()
        assert query.exception() is None
    finally:
        for name in created:
            kafka_service.delete_topic(name)


def test_new_partitions_start_at_earliest(
    kafka_service: Any,
    make_kafka_topic: Any,
    session: mb.Session,
    source_options: Any,
    produce: Any,
    new_producer: Any,
) -> None:
    from confluent_kafka.admin import NewPartitions

    topic = make_kafka_topic(1)
    query = _start(session, "grown", source_options(subscribe=topic))
    try:
        assert query.process_all_available(timeout=30)
        produce(topic, [{"partition": 0, "value": b"p0"}])
        futures = kafka_service.admin().create_partitions([NewPartitions(topic, 3)])
        futures[topic].result(timeout=30)
        kafka_service.wait_ready()
        fresh = new_producer()  # one that knows the new partitions
        fresh.send(topic, [{"partition": p, "value": b"p%d" % p} for p in (1, 2)])
        _wait_for(query, lambda: session.table("grown").num_rows >= 3, "3 rows")
        assert query.process_all_available(timeout=30)
        table = session.table("grown")
        assert sorted(
            zip(
                table.column("partition").to_pylist(),
                table.column("offset").to_pylist(),
                strict=True,
            )
        ) == [(0, 0), (1, 0), (2, 0)]
    finally:
        query.stop()
    assert query.exception() is None
