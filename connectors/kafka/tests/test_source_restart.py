"""A broker stopped and started again under a running query: retried, nothing lost or doubled.

These tests stop the broker, so they need a provider that owns it
(``MICROBATCH_SERVICES=local`` or ``docker``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import microbatch as mb
from microbatch.errors import StreamingQueryException

FAST_FAILURE = {
    "kafka.socket.timeout.ms": "2000",
    "kafka.reconnect.backoff.max.ms": "200",
    "kafkaConsumer.pollTimeoutMs": "2000",
}


@pytest.fixture
def session() -> Iterator[mb.Session]:
    with mb.Session() as made:
        made.conf.set("batchRetryBackoff", "100ms")
        yield made


def _start(session: mb.Session, options: dict[str, Any], checkpoint: str) -> Any:
    return (
        session.read_stream.format("kafka")
        .options(**options)
        .load()
        .write_stream.format("memory")
        .query_name("restarted")
        .option("checkpointLocation", checkpoint)
        .start()
    )


@dataclass
class _Case:
    """A two-partition topic read from the earliest offset into the memory table
    ``restarted``, with a broker the test can stop."""

    broker: Any
    session: mb.Session
    topic: str
    options: dict[str, Any]
    checkpoint: str
    produce_each: Any
    offsets_of: Callable[[Any], dict[int, list[int]]]

    def produce(self, count: int, *, first: int = 0) -> None:
        """``count`` records into each partition, numbered from ``first``."""
        self.produce_each(self.topic, 2, count, first=first)

    def start(self) -> Any:
        return _start(self.session, self.options, self.checkpoint)

    def delivered(self) -> dict[int, list[int]]:
        return self.offsets_of(self.session.table("restarted"))


@pytest.fixture
def case(
    restartable: Any,
    make_kafka_topic: Any,
    produce_each: Any,
    source_options: Any,
    session: mb.Session,
    offsets_of: Any,
    tmp_path: Any,
) -> _Case:
    topic = make_kafka_topic(2)
    options = source_options(subscribe=topic, startingOffsets="earliest", **FAST_FAILURE)
    checkpoint = str(tmp_path / "checkpoint")
    return _Case(restartable, session, topic, options, checkpoint, produce_each, offsets_of)


def _catch_up(case: _Case, query: Any, expected: dict[int, list[int]]) -> None:
    """Wait until the query has read ``expected``. A broker just restarted may let consumers
    see records a moment after it acknowledged them (its high watermark catches up), so one
    ``process_all_available`` may end before they are visible; records the batches' offsets
    went past without reading them never come."""
    deadline = time.monotonic() + 120
    while True:
        assert query.process_all_available(timeout=90)
        if case.delivered() == expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    batches = [
        (p["sources"][0]["startOffset"], p["sources"][0]["endOffset"], p["numInputRows"])
        for p in query.recent_progress
        if p["numInputRows"]
    ]
    assert case.delivered() == expected, f"batches (start, end, rows): {batches}"


def test_a_query_rides_through_a_broker_restart(
    case: _Case, caplog: pytest.LogCaptureFixture
) -> None:
    case.session.conf.set("maxBatchRetries", 30)
    case.produce(5)
    query = case.start()
    try:
        assert query.process_all_available(timeout=30)
        with caplog.at_level(logging.WARNING), case.broker.stopped():
            time.sleep(1)  # the query's look-ups fail meanwhile, and are retried
            assert query.is_active, f"the query stopped: {query.exception()!r}"
        case.produce(5, first=5)
        _catch_up(case, query, {0: list(range(10)), 1: list(range(10))})
    finally:
        query.stop()
    assert query.exception() is None
    assert "failed with a retriable error" in caplog.text


def test_a_query_out_of_retries_fails_clearly_and_resumes_after_a_restart(case: _Case) -> None:
    case.session.conf.set("maxBatchRetries", 0)
    # without retries the first read must not fail on a slow machine; the outage still
    # fails the query through the 2 s look-ups of the latest offsets
    case.options["kafkaConsumer.pollTimeoutMs"] = "10000"
    case.produce(3)
    query = case.start()
    try:
        assert query.process_all_available(timeout=30)
        with case.broker.stopped():
            with contextlib.suppress(StreamingQueryException):  # it fails: that is the point
                query.await_termination(timeout=60)
            assert not query.is_active, "the query went on without a broker and without retries"
    finally:
        query.stop()
    error = query.exception()
    assert error is not None
    text = repr(error) + "".join(getattr(error, "__notes__", []))
    chain: BaseException | None = error
    while chain is not None:
        text += str(chain) + "".join(getattr(chain, "__notes__", []))
        chain = chain.__cause__
    assert "Kafka" in text
    assert "maxBatchRetries is 0" in text
    case.produce(3, first=3)
    case.session.conf.set("maxBatchRetries", 30)  # the restarted broker elects its leaders first
    again = case.start()
    try:
        assert again.process_all_available(timeout=60)
    finally:
        again.stop()
    assert again.exception() is None
    assert case.delivered() == {0: list(range(6)), 1: list(range(6))}


def test_commit_to_group_does_not_wait_for_a_broker_away(
    restartable: Any, make_kafka_topic: Any, source_options: Any
) -> None:
    """commitOffsetsToGroup is best effort: a broker away must not hold the query's thread."""
    import uuid

    from microbatch_kafka.source import KafkaSource

    topic = make_kafka_topic(1)
    raw = source_options(subscribe=topic, commitOffsetsToGroup="true")
    source = KafkaSource(KafkaSource.options.parse(raw, connector="kafka"))
    reader = source.stream_reader(mb.ReadContext(schema=source.schema(), query_id=uuid.uuid4().hex))
    try:
        reader.commit({topic: {"0": 0}})
        with restartable.stopped():
            started = time.monotonic()
            reader.commit({topic: {"0": 5}})
            assert time.monotonic() - started < 2
    finally:
        reader.stop()
