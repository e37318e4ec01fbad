"""Helpers of the jdbc sink's tests: reading a written table back as Arrow."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import sqlalchemy as sa


def as_stored(schema: pa.Schema) -> pa.Schema:
    """``schema`` as the sink's tables give it back: timestamps with a zone in UTC."""
    fields = []
    for field in schema:
        kind = field.type
        if pa.types.is_timestamp(kind) and kind.tz is not None:
            kind = pa.timestamp(kind.unit, "UTC")
        fields.append(pa.field(field.name, kind, field.nullable))
    return pa.schema(fields)


def read_table(url: str, table: str, schema: pa.Schema, order_by: str | None = None) -> pa.Table:
    """Every row of ``table`` (reflected; its columns named as ``schema``'s) as a table of
    ``as_stored(schema)``; JSON text decoded for nested columns."""
    stored = as_stored(schema)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            if not sa.inspect(connection).has_table(table):
                return stored.empty_table()
            reflected = sa.Table(table, sa.MetaData(), autoload_with=connection)
            query = sa.select(*[reflected.c[name] for name in stored.names])
            if order_by:
                query = query.order_by(reflected.c[order_by])
            rows = [dict(row._mapping) for row in connection.execute(query)]
    finally:
        engine.dispose()
    for field in stored:
        if pa.types.is_nested(field.type):
            for row in rows:
                row[field.name] = _decoded(row[field.name])
    return pa.Table.from_pylist(rows, schema=stored)


def _decoded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
