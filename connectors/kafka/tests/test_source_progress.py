"""What the source shows besides rows: headers, progress metrics, offsets committed to a group."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def topic3(make_kafka_topic: Any, produce_each: Any) -> str:
    topic = make_kafka_topic(3)
    produce_each(topic, 3, 10)
    return topic


def test_include_headers(
    make_kafka_topic: Any, produce: Any, drain: Any, source_options: Any
) -> None:
    topic = make_kafka_topic(1)
    produce(
        topic,
        [
            {"value": b"with", "headers": [("a", b"1"), ("a", b"2"), ("empty", None)]},
            {"value": b"without"},
        ],
    )
    options = source_options(subscribe=topic, startingOffsets="earliest", includeHeaders="true")
    table = drain(options)
    assert table.column_names[-1] == "headers"
    assert table.column("headers").to_pylist() == [
        [{"key": "a", "value": b"1"}, {"key": "a", "value": b"2"}, {"key": "empty", "value": None}],
        None,
    ]
    plain = drain({**options, "includeHeaders": "false"}, checkpoint="plain")
    assert "headers" not in plain.column_names
    assert plain.num_rows == 2


def test_progress_shows_offsets_behind_latest(topic3: str, drain: Any, source_options: Any) -> None:
    options = source_options(subscribe=topic3, startingOffsets="earliest", maxOffsetsPerTrigger=6)
    assert drain(options).num_rows == 30
    progress = [p for p in drain.last_query.recent_progress if p["numInputRows"]]
    assert len(progress) == 5
    first = progress[0]["sources"][0]
    assert first["description"] == f"KafkaV2[Subscribe[{topic3}]]"
    assert first["endOffset"] == {topic3: {"0": 2, "1": 2, "2": 2}}
    assert first["latestOffset"] == {topic3: {"0": 10, "1": 10, "2": 10}}
    assert first["metrics"]["minOffsetsBehindLatest"] == "8"
    assert first["metrics"]["maxOffsetsBehindLatest"] == "8"
    assert first["metrics"]["avgOffsetsBehindLatest"] == "8.0"
    assert first["metrics"]["dataLoss"] == "0"
    assert first["metrics"]["offsetOutOfRange"] == "0"
    last = progress[-1]["sources"][0]
    assert last["endOffset"] == {topic3: {"0": 10, "1": 10, "2": 10}}
    assert last["metrics"]["maxOffsetsBehindLatest"] == "0"


def _committed(kafka_service: Any, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(kafka_service.client_config(**{"group.id": group}))
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


def test_commit_offsets_to_group(
    kafka_service: Any, topic3: str, drain: Any, source_options: Any, produce_each: Any
) -> None:
    options = source_options(
        subscribe=topic3,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=6,
        commitOffsetsToGroup="true",
        groupIdPrefix="lag-dashboard",
    )
    drain(options)
    group = f"lag-dashboard-{drain.last_query.id}"
    assert _committed(kafka_service, group, topic3, 3) == {0: 10, 1: 10, 2: 10}
    produce_each(topic3, 3, 1, first=10)
    drain(options)  # the same checkpoint, so the same query id and group
    assert _committed(kafka_service, group, topic3, 3) == {0: 11, 1: 11, 2: 11}


def test_offsets_are_not_committed_by_default(
    kafka_service: Any, topic3: str, drain: Any, source_options: Any
) -> None:
    drain(source_options(subscribe=topic3, startingOffsets="earliest"))
    group = f"microbatch-kafka-source-{drain.last_query.id}"
    assert set(_committed(kafka_service, group, topic3, 3).values()) == {-1001}
