"""Topics deleted or deleted and created again under a query, and a query woken by new records.

A topic created again under the same name is told apart by its topic id: the query's
positions in the old topic mean nothing in the new one, which is data loss
(``failOnDataLoss``), however far the new topic has grown.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

import microbatch as mb
from microbatch import SourceError
from microbatch.errors import StreamingQueryException


def _text(error: BaseException | None) -> str:
    texts = []
    while error is not None:
        texts.append(str(error))
        error = error.__cause__
    return "\n".join(texts)


def _recreate(kafka_service: Any, topic: str) -> None:
    kafka_service.delete_topic(topic)
    deadline = time.monotonic() + 30
    while True:  # the broker may still be deleting it
        try:
            kafka_service.create_topic(1, name=topic)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_available_now_reports_a_topic_created_again(
    kafka_service: Any, make_kafka_topic: Any, produce: Any, drain: Any, source_options: Any
) -> None:
    topic = make_kafka_topic(1)
    produce(topic, [{"value": b"old%d" % i} for i in range(10)])
    options = source_options(subscribe=topic, startingOffsets="earliest")
    assert drain(options).num_rows == 10
    _recreate(kafka_service, topic)
    produce(topic, [{"value": b"new%d" % i} for i in range(3)])
    with pytest.raises((StreamingQueryException, SourceError)) as caught:
        drain(options)
    assert f"Partition {topic}-0 offset was changed from 10 to 3" in _text(caught.value)
    with pytest.raises((StreamingQueryException, SourceError)):
        drain(options)  # and again in the next run: nothing is read past it silently
    table = drain({**options, "failOnDataLoss": "false"})
    assert table.column("value").to_pylist() == [b"new0", b"new1", b"new2"]
    produce(topic, [{"value": b"new3"}])
    assert drain(options).column("value").to_pylist() == [b"new3"]


def test_a_stream_reports_a_topic_created_again_that_grew_past_its_position(
    kafka_service: Any, make_kafka_topic: Any, produce: Any, source_options: Any
) -> None:
    topic = make_kafka_topic(1)
    produce(topic, [{"value": b"old%d" % i} for i in range(10)])
    with mb.Session() as session:
        query = (
            session.read_stream.format("kafka")
            .options(**source_options(subscribe=topic, startingOffsets="earliest"))
            .load()
            .write_stream.format("memory")
            .query_name("recreated_" + uuid.uuid4().hex[:6])
            .start()
        )
        try:
            assert query.process_all_available(timeout=30)
            _recreate(kafka_service, topic)
            produce(topic, [{"value": b"new%d" % i} for i in range(14)])  # past 10 at once
            with pytest.raises(StreamingQueryException):
                query.await_termination(timeout=60)
            assert not query.is_active, "no data loss reported for a topic created again"
            assert f"Partition {topic}-0 offset was changed from 10 to" in _text(query.exception())
        finally:
            query.stop()


@pytest.mark.parametrize("fail", [True, False])
def test_the_only_topic_deleted(
    kafka_service: Any, make_kafka_topic: Any, produce: Any, source_options: Any, fail: bool
) -> None:
    topic = make_kafka_topic(1)
    produce(topic, [{"value": b"%d" % i} for i in range(5)])
    options = source_options(subscribe=topic, startingOffsets="earliest", failOnDataLoss=fail)
    with mb.Session() as session:
        session.conf.set("maxBatchRetries", 0)
        query = (
            session.read_stream.format("kafka")
            .options(**options)
            .load()
            .write_stream.format("memory")
            .query_name("deleted_" + uuid.uuid4().hex[:6])
            .start()
        )
        try:
            assert query.process_all_available(timeout=30)
            kafka_service.delete_topic(topic)
            if fail:
                with pytest.raises(StreamingQueryException):
                    query.await_termination(timeout=60)
                assert not query.is_active
                assert f"Partitions [{topic}-0] have been deleted." in _text(query.exception())
            else:  # a warning and the metric; the query goes on
                deadline = time.monotonic() + 20
                while query.is_active and time.monotonic() < deadline:
                    progress = query.last_progress or {}
                    sources = progress.get("sources") or [{}]
                    if (sources[0].get("metrics") or {}).get("dataLoss") == "1":
                        break
                    time.sleep(0.1)
                assert query.is_active, _text(query.exception())
                assert query.last_progress["sources"][0]["metrics"]["dataLoss"] == "1"
        finally:
            query.stop()


def test_a_record_produced_while_idle_wakes_the_query(
    make_kafka_topic: Any, produce: Any, source_options: Any
) -> None:
    """With a polling delay of 30 s, only the new-record watcher can bring the record early."""
    topic = make_kafka_topic(2)
    arrived: list[float] = []
    with mb.Session() as session:
        session.conf.set("pollingDelay", "30s")
        query = (
            session.read_stream.format("kafka")
            .options(**source_options(subscribe=topic))
            .load()
            .write_stream.foreach_batch(
                lambda frame, _id: arrived.append(time.monotonic()) if frame.num_rows else None
            )
            .start()
        )
        try:
            assert query.process_all_available(timeout=30)
            time.sleep(0.5)  # the query is idle, waiting 30 s for its next poll
            sent = time.monotonic()
            produce(topic, [{"partition": 1, "value": b"wake"}])
            deadline = sent + 15
            while not arrived and time.monotonic() < deadline:
                time.sleep(0.05)
            assert arrived, "the record did not arrive before the 30 s polling delay"
            assert arrived[0] - sent < 15
        finally:
            query.stop()
