"""Helpers of the jdbc sink's tests: reading a written table back as Arrow, and the pieces
the conformance suites share (the database they run on, fewer commit kills)."""

from __future__ import annotations

import json
import os
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlalchemy as sa


class FewCommitKills:
    """Holds the kit's crash-inside-commit check to ``commit_kills`` kill points (each costs a
    fork, new engines and a read back); MICROBATCH_TESTKIT_COMMIT_KILLS=all for the soak. The
    crash tests of test_crash_*.py kill whole queries."""

    commit_kills = "10"

    @pytest.fixture(autouse=True)
    def _few_kills(self, monkeypatch: pytest.MonkeyPatch) -> None:
        if not os.environ.get("MICROBATCH_TESTKIT_COMMIT_KILLS"):
            monkeypatch.setenv("MICROBATCH_TESTKIT_COMMIT_KILLS", self.commit_kills)


class OnSqlite:
    """A suite over a SQLite file in the test's folder."""

    tmp_path: Any

    @property
    def url(self) -> str:
        return f"sqlite:///{self.tmp_path / 'sink.db'}"


class OnPostgres:
    """A suite over a database of its own on the test kit's PostgreSQL."""

    commit_kills = "4"

    @pytest.fixture(autouse=True)
    def _database(self, postgres_database: Any) -> None:
        self.database = postgres_database

    @property
    def url(self) -> str:
        return str(self.database.url)


def sqlite_stored(table: pa.Table) -> pa.Table:
    """``table`` as SQLite keeps it: the REAL -0.0 is stored as 0.0 (a property of SQLite,
    not of the sink)."""
    for index, field in enumerate(table.schema):
        if pa.types.is_floating(field.type):
            column = table.column(index)
            zero = pc.equal(column, 0.0)
            table = table.set_column(
                index, field, pc.if_else(zero, pa.scalar(0.0, field.type), column)
            )
    return table


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
