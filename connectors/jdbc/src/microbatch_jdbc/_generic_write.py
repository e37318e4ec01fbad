"""Rows into any SQLAlchemy dialect: ``INSERT`` executemany in chunks of ``batchsize``.

The path for every database without a faster one (PostgreSQL uses binary COPY). Values are
converted per chunk with Arrow's ``to_pylist``, column by column: timestamps with a zone go as
aware datetimes (in UTC, and without the zone on SQLite, which stores them as text),
lists/structs/maps as the JSON-able lists and dicts a JSON column takes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from sqlalchemy import Connection, Table

__all__ = ["insert_rows", "python_columns"]


def insert_rows(
    connection: Connection, table: Table, batches: Iterable[pa.RecordBatch], batchsize: int
) -> int:
    """Insert the rows of ``batches`` into ``table`` inside the caller's transaction,
    ``batchsize`` rows per ``executemany``; returns the number of rows written. Columns of
    ``table`` the batches lack get their default (or NULL)."""
    from sqlalchemy import insert

    if batchsize < 1:
        raise ValueError(f"batchsize must be at least 1, got {batchsize}")
    statement = insert(table)
    sqlite = connection.dialect.name == "sqlite"
    written = 0
    for batch in batches:
        for start in range(0, batch.num_rows, batchsize):
            chunk = batch.slice(start, batchsize)
            rows = python_columns(chunk, sqlite=sqlite)
            if rows:
                connection.execute(statement, rows)
                written += len(rows)
    return written


def python_columns(batch: pa.RecordBatch, *, sqlite: bool = False) -> list[dict[str, Any]]:
    """The rows of ``batch`` as dictionaries keyed by column name, converted column by column."""
    names = batch.schema.names
    columns = [_python_values(batch.column(index), sqlite) for index in range(len(names))]
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


def _python_values(array: pa.Array, sqlite: bool) -> list[Any]:
    kind = array.type
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        values = array.cast(pa.timestamp(kind.unit, "UTC")).to_pylist()
        if sqlite:
            return [None if value is None else value.replace(tzinfo=None) for value in values]
        return values
    if pa.types.is_map(kind):
        return [None if value is None else dict(value) for value in array.to_pylist()]
    return array.to_pylist()
