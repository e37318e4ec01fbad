"""Edge-case input data for sink tests: small Arrow batches that catch the usual mistakes.

``edge_batches()`` covers integers at their limits, unicode and empty strings, nulls in every
column, nested lists and structs, and time-zone-aware timestamps, plus an empty batch.
``simple_batches()`` has only integers and strings, for sinks that cannot keep richer types.
Every call returns new objects, so a test may modify what it gets.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pyarrow as pa

__all__ = [
    "EDGE_SCHEMA",
    "SIMPLE_SCHEMA",
    "edge_batches",
    "edge_table",
    "simple_batches",
    "simple_table",
]

EDGE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("small", pa.int32()),
        pa.field("text", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("flag", pa.bool_()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("point", pa.struct([pa.field("x", pa.int32()), pa.field("label", pa.string())])),
        pa.field("at_utc", pa.timestamp("us", tz="UTC")),
        pa.field("at_local", pa.timestamp("us", tz="America/New_York")),
    ]
)
"""The schema of :func:`edge_batches`."""

SIMPLE_SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())]
)
"""The schema of :func:`simple_batches`."""

# Just before clocks change in New York.
_EPOCH = datetime(2024, 3, 10, 6, 59, 59, 999999, tzinfo=UTC)
_MINUS_FIVE = timezone(timedelta(hours=-5))


def _edge_rows() -> list[list[dict[str, object]]]:
    first: list[dict[str, object]] = [
        {
            "id": 0,
            "small": 2**31 - 1,
            "text": "plain ascii",
            "score": 1.5,
            "flag": True,
            "tags": ["a", "b"],
            "point": {"x": 1, "label": "one"},
            "at_utc": _EPOCH,
            "at_local": _EPOCH,
        },
        {
            "id": 1,
            "small": -(2**31),
            "text": 'héllo wörld, 日本語, emoji 🎉, quote " backslash \\ newline \n tab \t',
            "score": -0.0,
            "flag": False,
            "tags": [],
            "point": {"x": -1, "label": None},
            "at_utc": datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
            "at_local": datetime(2024, 11, 3, 1, 30, tzinfo=_MINUS_FIVE),
        },
        {
            "id": 2**62,
            "small": 0,
            "text": "",
            "score": 1e300,
            "flag": True,
            "tags": ["", None, "ünïcode"],
            "point": {"x": None, "label": ""},
            "at_utc": datetime(2262, 4, 11, tzinfo=UTC),
            "at_local": datetime(2000, 1, 1, tzinfo=UTC),
        },
    ]
    nulls: list[dict[str, object]] = [
        {
            "id": 3,
            "small": None,
            "text": None,
            "score": None,
            "flag": None,
            "tags": None,
            "point": None,
            "at_utc": None,
            "at_local": None,
        },
        {
            "id": -(2**63),
            "small": 7,
            "text": "last row",
            "score": 0.1,
            "flag": None,
            "tags": [None],
            "point": {"x": 0, "label": "zero"},
            "at_utc": _EPOCH,
            "at_local": None,
        },
    ]
    empty: list[dict[str, object]] = []
    return [first, empty, nulls]


def edge_batches() -> list[pa.RecordBatch]:
    """Three batches of :data:`EDGE_SCHEMA`: three rows, an empty batch, two rows with nulls."""
    return [pa.RecordBatch.from_pylist(rows, schema=EDGE_SCHEMA) for rows in _edge_rows()]


def edge_table() -> pa.Table:
    """:func:`edge_batches` as one table (five rows)."""
    return pa.Table.from_batches(edge_batches(), schema=EDGE_SCHEMA)


def simple_batches() -> list[pa.RecordBatch]:
    """Three batches of :data:`SIMPLE_SCHEMA`: two rows, an empty batch, two rows with a null."""
    parts: list[list[dict[str, object]]] = [
        [{"id": 1, "name": "alpha"}, {"id": 2, "name": "bêta 🎉"}],
        [],
        [{"id": 3, "name": None}, {"id": 4, "name": ""}],
    ]
    return [pa.RecordBatch.from_pylist(rows, schema=SIMPLE_SCHEMA) for rows in parts]


def simple_table() -> pa.Table:
    """:func:`simple_batches` as one table (four rows)."""
    return pa.Table.from_batches(simple_batches(), schema=SIMPLE_SCHEMA)
