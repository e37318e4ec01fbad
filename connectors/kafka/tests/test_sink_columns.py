"""The sink's input columns as Spark's Kafka writer takes them: the checks at ``start()``
with Spark's texts, the topic option over the column, the partition column over the
partitioner, and keyed records where the Java clients put them (murmur2)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import murmur2

import microbatch as mb
from microbatch import SchemaError, WriteContext
from microbatch_kafka.sink import KafkaSink

sys.path.insert(0, str(Path(__file__).parent))
from _kafka_sink_testing import read_records, run_into_kafka

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
NOWHERE = {"kafka.bootstrap.servers": "127.0.0.1:1"}  # the checks at start ask no broker


def writer_for(schema: pa.Schema, **options: Any) -> mb.StreamWriter:
    parsed = KafkaSink.options.parse({**NOWHERE, **options}, connector="kafka")
    return KafkaSink(parsed).stream_writer(WriteContext(schema=schema, query_id="q"))


@pytest.mark.parametrize(
    ("fields", "options", "message"),
    [
        ([("key", pa.binary())], {"topic": "t"}, "Required attribute 'value' not found"),
        (
            [("value", pa.binary())],
            {},
            "topic option required when no 'topic' attribute is present. Use the topic option "
            "for setting a topic.",
        ),
        (
            [("value", pa.int64())],
            {"topic": "t"},
            "value attribute unsupported type bigint. value must be a(n) string or binary",
        ),
        (
            [("value", pa.string()), ("key", pa.int32())],
            {"topic": "t"},
            "key attribute unsupported type int. key must be a(n) string or binary",
        ),
        (
            [("value", pa.string()), ("topic", pa.int64())],
            {},
            "topic attribute unsupported type bigint. topic must be a(n) string",
        ),
        # Spark's order: topic, key, value, headers, partition
        (
            [("key", pa.int64()), ("topic", pa.int64())],
            {},
            "topic attribute unsupported type bigint. topic must be a(n) string",
        ),
        (
            [("key", pa.int64())],
            {"topic": "t"},
            "key attribute unsupported type bigint. key must be a(n) string or binary",
        ),
        (
            [("value", pa.int8()), ("headers", pa.string())],
            {"topic": "t"},
            "value attribute unsupported type tinyint. value must be a(n) string or binary",
        ),
        (
            [("value", pa.string()), ("partition", pa.string()), ("headers", pa.string())],
            {"topic": "t"},
            "headers attribute unsupported type string. headers must be a(n) "
            "array<struct<key:string,value:binary>>",
        ),
        (
            [("value", pa.string()), ("partition", pa.string())],
            {"topic": "t"},
            "partition attribute unsupported type string. partition must be a(n) int",
        ),
        (
            [("value", pa.string()), ("partition", pa.int64())],
            {"topic": "t"},
            "partition attribute unsupported type bigint. partition must be a(n) int",
        ),
        (  # shown as Spark's types, whatever the Arrow encoding
            [("value", pa.string()), ("headers", pa.large_list(pa.large_string()))],
            {"topic": "t"},
            "headers attribute unsupported type array<string>. headers must be a(n) "
            "array<struct<key:string,value:binary>>",
        ),
        (
            [("value", pa.dictionary(pa.int32(), pa.int64()))],
            {"topic": "t"},
            "value attribute unsupported type bigint. value must be a(n) string or binary",
        ),
        (
            [("value", pa.string()), ("headers", pa.list_(pa.string()))],
            {"topic": "t"},
            "headers attribute unsupported type array<string>. headers must be a(n) "
            "array<struct<key:string,value:binary>>",
        ),
    ],
)
def test_a_missing_or_mistyped_column_is_refused_at_start(
    tmp_path: Path, fields: list[tuple[str, pa.DataType]], options: dict[str, str], message: str
) -> None:
    schema = pa.schema(fields)
    with pytest.raises(SchemaError, match=re.escape(message)):
        writer_for(schema, **options)
    # the same through start(): the query never runs (no broker is asked)
    table = schema.empty_table()
    with pytest.raises(SchemaError, match=re.escape(message)):
        run_into_kafka([table], {**NOWHERE, **options}, str(tmp_path / "cp"))


@pytest.mark.parametrize(
    "fields",
    [
        [("value", pa.large_binary()), ("key", pa.large_string())],
        [("value", pa.dictionary(pa.int32(), pa.string())), ("key", pa.binary_view())],
        [("value", pa.string()), ("topic", pa.int64())],  # the topic option wins: not read
        [("value", pa.binary()), ("partition", pa.int16()), ("headers", HEADERS), ("x", pa.int8())],
    ],
)
def test_accepted_columns(fields: list[tuple[str, pa.DataType]]) -> None:
    writer_for(pa.schema(fields), topic="t").stop()


def test_the_topic_option_wins_over_the_topic_column(
    tmp_path: Path, kafka_service: Any, make_kafka_topic: Any
) -> None:
    chosen, named = make_kafka_topic(1), make_kafka_topic(1)
    table = pa.table({"value": ["a", "b"], "topic": [named, None]})
    options = {"kafka.bootstrap.servers": kafka_service.bootstrap_servers, "topic": chosen}
    query = run_into_kafka([table], options, str(tmp_path / "cp"))
    assert query.exception() is None
    assert [r["value"] for r in read_records(kafka_service, chosen)] == [b"a", b"b"]
    assert read_records(kafka_service, named) == []


def test_a_topic_column_routes_each_row(
    tmp_path: Path, kafka_service: Any, make_kafka_topic: Any
) -> None:
    first, second = make_kafka_topic(1), make_kafka_topic(2)
    table = pa.table({"value": ["1", "2", "3", "4"], "topic": [first, second, first, second]})
    options = {"kafka.bootstrap.servers": kafka_service.bootstrap_servers}
    assert run_into_kafka([table], options, str(tmp_path / "cp")).exception() is None
    assert [r["value"] for r in read_records(kafka_service, first)] == [b"1", b"3"]
    assert sorted(r["value"] for r in read_records(kafka_service, second)) == [b"2", b"4"]


def test_a_null_topic_fails_the_batch_with_sparks_text(
    tmp_path: Path, kafka_service: Any, make_kafka_topic: Any
) -> None:
    topic = make_kafka_topic(1)
    table = pa.table({"value": ["1", "2"], "topic": [topic, None]})
    options = {"kafka.bootstrap.servers": kafka_service.bootstrap_servers}
    query = run_into_kafka([table], options, str(tmp_path / "cp"))
    error = query.exception()
    assert error is not None
    assert (
        "The Kafka message data sent to the producer contains a null topic. Use the `topic` "
        "option for setting a default topic." in str(error)
    )
    assert query.last_progress is None  # batch 0 never committed


@pytest.mark.parametrize("exactly_once", [False, True])
def test_keyed_records_land_where_murmur2_says_and_the_partition_column_wins(
    tmp_path: Path, kafka_service: Any, make_kafka_topic: Any, exactly_once: bool
) -> None:
    topic = make_kafka_topic(5)
    keys = [f"key-{i}" for i in range(200)]
    partitions = [None if i % 4 else 3 for i in range(200)]  # every 4th row says partition 3
    table = pa.table(
        {
            "key": keys,
            "value": [str(i) for i in range(200)],
            "partition": pa.array(partitions, pa.int32()),
        }
    )
    options = {"kafka.bootstrap.servers": kafka_service.bootstrap_servers, "topic": topic}
    if exactly_once:
        options["exactlyOnce"] = "true"
    assert run_into_kafka([table], options, str(tmp_path / "cp")).exception() is None
    records = read_records(kafka_service, topic)
    assert len(records) == 200
    for record in records:
        row = int(record["value"])
        expected = 3 if partitions[row] == 3 else murmur2(record["key"], 5)
        assert record["partition"] == expected, (record, expected)
    assert {murmur2(k.encode(), 5) for k in keys} == set(range(5))  # the check means something
    assert murmur2(b"key-0", 3) == 1 and murmur2(b"a", 10) == 4  # Java's answers


def test_headers_keys_and_values_round_trip(
    tmp_path: Path, kafka_service: Any, make_kafka_topic: Any
) -> None:
    topic = make_kafka_topic(1)
    headers = [[{"key": "h", "value": b"1"}, {"key": "h", "value": None}], None]
    table = pa.table(
        {
            "key": pa.array([b"k", None], pa.binary()),
            "value": pa.array(["é", None], pa.string()),
            "headers": pa.array(headers, HEADERS),
        }
    )
    options = {"kafka.bootstrap.servers": kafka_service.bootstrap_servers, "topic": topic}
    assert run_into_kafka([table], options, str(tmp_path / "cp")).exception() is None
    records = read_records(kafka_service, topic)
    assert [(r["key"], r["value"], r["headers"]) for r in records] == [
        (b"k", "é".encode(), [("h", b"1"), ("h", None)]),
        (None, None, None),
    ]
    assert {r["timestamp_type"] for r in records} == {1}  # CreateTime, set by the producer


@pytest.mark.parametrize("exactly_once", [False, True])
def test_dictionary_large_and_view_columns_round_trip(
    tmp_path: Path, kafka_service: Any, make_kafka_topic: Any, exactly_once: bool
) -> None:
    first, second = make_kafka_topic(1), make_kafka_topic(1)
    table = pa.table(
        {
            "value": pa.array(["a", None, "c"], pa.string()).dictionary_encode(),
            "key": pa.array([b"k", None, b""], pa.binary_view()),
            "topic": pa.array([first, second, first], pa.large_string()).dictionary_encode(),
        }
    )
    options = {"kafka.bootstrap.servers": kafka_service.bootstrap_servers}
    if exactly_once:
        options.update(exactlyOnce="true", exactlyOnceMarkerTopic=first)
    query = run_into_kafka([table], options, str(tmp_path / "cp"))
    assert query.exception() is None, query.exception()
    assert [(r["key"], r["value"]) for r in read_records(kafka_service, first)] == [
        (b"k", b"a"),
        (b"", b"c"),
    ]
    assert [(r["key"], r["value"]) for r in read_records(kafka_service, second)] == [(None, None)]
