"""The source's fixed schema (Spark's) and consumed messages turned into Arrow record batches.

The cost of reading is the per-message method calls the client forces (``key()``,
``value()``, ``offset()``, ``timestamp()``, and ``headers()`` when asked for); everything else is
built column-wise: constant columns (topic, partition, usually the timestamp type) with
``pyarrow.repeat``, timestamps by one multiplication and cast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["HEADERS_FIELD", "HEADERS_TYPE", "SCHEMA", "SCHEMA_WITH_HEADERS", "schema", "to_batch"]

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
HEADERS_FIELD = pa.field("headers", HEADERS_TYPE)

SCHEMA = pa.schema(
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
"""Spark's Kafka schema: ``timestampType`` is Kafka's id (0 CreateTime, 1 LogAppendTime, -1
none); ``timestamp`` is in microseconds, UTC."""

SCHEMA_WITH_HEADERS = SCHEMA.append(HEADERS_FIELD)
"""With ``includeHeaders=true``: ``headers`` is a list of ``{key, value}`` (null when a record
has none)."""

_THOUSAND = pa.scalar(1000, pa.int64())
_TIMESTAMP = SCHEMA.field("timestamp").type


def schema(include_headers: bool) -> pa.Schema:
    """The source's schema, with or without the ``headers`` column."""
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


def to_batch(
    messages: Sequence[Any], topic: str, partition: int, include_headers: bool
) -> pa.RecordBatch:
    """One record batch of ``messages`` (data messages of one topic partition, no events).

    librdkafka's timestamp types (0 none, 1 CreateTime, 2 LogAppendTime) become Kafka's ids
    (-1, 0, 1).
    """
    count = len(messages)
    keys = pa.array([m.key() for m in messages], pa.binary())
    values = pa.array([m.value() for m in messages], pa.binary())
    offsets = pa.array([m.offset() for m in messages], pa.int64())
    stamps = [m.timestamp() for m in messages]
    millis = pa.array([s[1] for s in stamps], pa.int64())
    timestamps = pc.multiply(millis, _THOUSAND).cast(_TIMESTAMP)
    kinds = [s[0] for s in stamps]
    if not count or kinds.count(kinds[0]) == count:  # the usual case: one type per topic
        types = pa.repeat(pa.scalar((kinds[0] if count else 1) - 1, pa.int32()), count)
    else:
        types = pc.subtract(pa.array(kinds, pa.int32()), pa.scalar(1, pa.int32()))
    columns = [
        keys,
        values,
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        offsets,
        timestamps,
        types,
    ]
    if include_headers:
        columns.append(pa.array([m.headers() or None for m in messages], HEADERS_TYPE))
        return pa.RecordBatch.from_arrays(columns, schema=SCHEMA_WITH_HEADERS)
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)
