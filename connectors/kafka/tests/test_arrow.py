"""Consumed messages to Arrow: the fixed schema, built from constructed messages (no broker)."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
from confluent_kafka import Message

from microbatch_kafka._arrow import SCHEMA, SCHEMA_WITH_HEADERS, schema, to_batch


def _message(offset: int, **more: object) -> Message:
    fields: dict[str, object] = {
        "topic": "t",
        "partition": 2,
        "offset": offset,
        "key": b"k%d" % offset,
        "value": b"v%d" % offset,
        "timestamp": (1, 1_700_000_000_000 + offset),
    }
    fields.update(more)
    return Message(**fields)


def test_the_schema_is_sparks() -> None:
    assert (
        pa.schema(
            [
                ("key", pa.binary()),
                ("value", pa.binary()),
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("offset", pa.int64()),
                ("timestamp", pa.timestamp("us", tz="UTC")),
                ("timestampType", pa.int32()),
            ]
        )
        == SCHEMA
    )
    assert schema(False) == SCHEMA
    headers = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    assert schema(True) == SCHEMA.append(pa.field("headers", headers))
    assert SCHEMA_WITH_HEADERS.field("headers").type == headers


def test_messages_become_columns() -> None:
    batch = to_batch([_message(7), _message(8, key=None, value=None)], "t", 2, False)
    assert batch.schema == SCHEMA
    assert batch.to_pylist() == [
        {
            "key": b"k7",
            "value": b"v7",
            "topic": "t",
            "partition": 2,
            "offset": 7,
            "timestamp": datetime(2023, 11, 14, 22, 13, 20, 7000, tzinfo=UTC),
            "timestampType": 0,
        },
        {
            "key": None,
            "value": None,
            "topic": "t",
            "partition": 2,
            "offset": 8,
            "timestamp": datetime(2023, 11, 14, 22, 13, 20, 8000, tzinfo=UTC),
            "timestampType": 0,
        },
    ]


def test_timestamp_types_are_kafkas_ids() -> None:
    messages = [
        _message(0, timestamp=(1, 5)),  # CreateTime
        _message(1, timestamp=(2, 6)),  # LogAppendTime
        _message(2, timestamp=(0, -1)),  # none
    ]
    batch = to_batch(messages, "t", 2, False)
    assert batch.column("timestampType").to_pylist() == [0, 1, -1]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [5000, 6000, -1000]
    same = to_batch([_message(0, timestamp=(2, 5)), _message(1, timestamp=(2, 6))], "t", 2, False)
    assert same.column("timestampType").to_pylist() == [1, 1]


def test_headers_keep_order_repeats_and_nulls() -> None:
    messages = [
        _message(0, headers=[("a", b"1"), ("a", b"2"), ("b", None)]),
        _message(1),  # no headers: null, as in Spark
        _message(2, headers=[]),
    ]
    batch = to_batch(messages, "t", 2, True)
    assert batch.schema == SCHEMA_WITH_HEADERS
    assert batch.column("headers").to_pylist() == [
        [{"key": "a", "value": b"1"}, {"key": "a", "value": b"2"}, {"key": "b", "value": None}],
        None,
        None,
    ]


def test_an_empty_list_gives_an_empty_batch() -> None:
    assert to_batch([], "t", 0, True).num_rows == 0
    assert to_batch([], "t", 0, False).schema == SCHEMA
