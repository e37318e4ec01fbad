"""The table the reader tests write with the ``delta`` sink, and how its rows compare.

:func:`write_table` streams :func:`batches` (two micro-batches from a memory stream) through
the sink into a Delta table partitioned by ``region`` (strings that need escaping in a folder
name, and null) and ``day`` (a date), with small files (``maxRecordsPerFile``) so that file
statistics matter to a filtering reader. The columns cover nulls, timestamps with and without a
time zone, dates, decimals, a nested struct with a list, a list of strings and strings with
quotes, newlines and non-ASCII text.

:func:`plain` turns any reader's values into JSON-able ones that compare equal across readers
(a timestamp as ISO text in UTC, a decimal as its text, a date as ISO text), so rows read by
delta-rs, Polars or Spark (recorded in ``tests/spark/recorded``) compare with one another.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    import microbatch as mb

REGIONS = ("north", "a b", "x/y", "é=%#?", None)
"""Partition values: plain, a space, a slash, characters a URI or folder name must escape, null."""
PARTITION_BY = ("region", "day")
ROWS_PER_FILE = 4
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("region", pa.string()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("local_ts", pa.timestamp("us")),
        ("amount", pa.decimal128(12, 2)),
        ("ratio", pa.float64()),
        ("flag", pa.bool_()),
        ("small", pa.int32()),
        ("note", pa.string()),
        (
            "device",
            pa.struct([("name", pa.string()), ("scores", pa.list_(pa.int32()))]),
        ),
        ("tags", pa.list_(pa.string())),
    ]
)


def _row(ident: int) -> dict[str, Any]:
    base = dt.datetime(2024, 2, 28, 23, 59, 58, 123456, tzinfo=dt.UTC)
    null = ident % 7 == 3  # one row in seven has nulls in its nullable columns
    return {
        "id": ident,
        "region": REGIONS[ident % len(REGIONS)],
        "day": dt.date(2024, 2, 28) + dt.timedelta(days=ident % 3),
        "ts": None if null else base + dt.timedelta(seconds=37 * ident, microseconds=ident),
        "local_ts": dt.datetime(1999, 12, 31, 23, 0, 0) + dt.timedelta(minutes=ident),
        "amount": None if null else decimal.Decimal(f"{ident * 1234 - 5000}.{ident % 100:02d}"),
        "ratio": None if null else ident / 8 - 2.5,
        "flag": None if null else ident % 2 == 0,
        "small": -ident if ident % 5 else None,
        "note": None if null else f'row {ident}: "quoted", \\back\\slash, line\nbreak, é ü 雪',
        "device": None
        if ident % 11 == 5
        else {
            "name": None if null else f"dev-{ident % 4}",
            "scores": None if ident % 4 == 1 else [ident, None, -ident][: ident % 4 + 1],
        },
        "tags": None if ident % 6 == 2 else [f"t{ident % 3}", "", "x,y"][: ident % 3 + 1],
    }


def batches(rows_per_batch: int = 30, count: int = 2) -> list[pa.Table]:
    """The micro-batches written, in order (ids 0 .. rows_per_batch * count - 1)."""
    return [
        pa.Table.from_pylist(
            [_row(i) for i in range(b * rows_per_batch, (b + 1) * rows_per_batch)], schema=SCHEMA
        )
        for b in range(count)
    ]


def write_table(table: str | Path, checkpoint: str | Path) -> mb.StreamingQuery:
    """Stream :func:`batches` into the Delta table at ``table`` through the ``delta`` sink;
    returns the stopped query (its ``id`` is the app id of the table's transactions)."""
    return _stream(batches(), table, checkpoint, PARTITION_BY, {"maxRecordsPerFile": ROWS_PER_FILE})


def merge_batches() -> list[pa.Table]:
    """The micro-batches of the merged table: keys 0-19 inserted, then 10-29 (10-19 updated,
    20-29 inserted), then 0-4 again with one key twice in the batch (its last row wins)."""
    first, second = batches(rows_per_batch=20, count=2)
    second = second.set_column(0, "id", pa.array(range(10, 30), pa.int64()))
    third = batches(rows_per_batch=6, count=1)[0]
    third = third.set_column(0, "id", pa.array([0, 1, 2, 3, 4, 2], pa.int64()))
    third = third.set_column(
        third.schema.get_field_index("note"), "note", pa.array([f"third {i}" for i in range(6)])
    )
    return [first, second, third]


def write_merged_table(table: str | Path, checkpoint: str | Path) -> mb.StreamingQuery:
    """Stream :func:`merge_batches` through the sink with ``mode=merge``, ``mergeKeys=id``
    (partitioned by ``region``; an update may move a key to another region)."""
    return _stream(
        merge_batches(), table, checkpoint, ("region",), {"mode": "merge", "mergeKeys": "id"}
    )


def merged_rows() -> list[dict[str, Any]]:
    """What the merged table holds: the last row of each id, as :func:`plain_rows`."""
    latest = {row["id"]: row for batch in merge_batches() for row in batch.to_pylist()}
    return plain_rows(list(latest.values()))


def _stream(
    data: list[pa.Table],
    table: str | Path,
    checkpoint: str | Path,
    partition_by: tuple[str, ...],
    options: dict[str, Any],
) -> mb.StreamingQuery:
    import microbatch as mb
    from microbatch_memory import MemoryStream

    session = mb.Session()
    stream = MemoryStream(SCHEMA)
    writer = stream.to_frame(session).write_stream.format("delta").partition_by(*partition_by)
    query = (
        writer.options(**options).option("checkpointLocation", str(checkpoint)).start(str(table))
    )
    try:
        for batch in data:
            stream.add_data(batch)
            query.process_all_available()
    finally:
        query.stop()
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]
    return query


def plain(value: Any) -> Any:
    """``value`` (from any reader) as JSON-able data that compares equal across readers."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
            return value.isoformat(timespec="microseconds") + "Z"
        return value.isoformat(timespec="microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return f"{value:.2f}"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def plain_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as :func:`plain` data, sorted by id, with the columns of :data:`SCHEMA`."""
    names = SCHEMA.names
    return sorted(({n: plain(row[n]) for n in names} for row in rows), key=lambda r: r["id"])


def expected_rows() -> list[dict[str, Any]]:
    """Every row written, as :func:`plain_rows`."""
    return plain_rows([row for batch in batches() for row in batch.to_pylist()])
