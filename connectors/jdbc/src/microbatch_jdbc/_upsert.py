"""Upsert: insert a batch's rows, or update the rows with the same key, in the caller's
transaction.

Rows are first reduced to the last row per key, in batch order (vectorised, with Arrow's
group-by), so that each key is written once. Then, by dialect:

- PostgreSQL: a temporary staging table with the batch's columns typed as the target's
  (``CREATE TEMPORARY TABLE ... ON COMMIT DROP AS SELECT cols FROM target WITH NO DATA``),
  filled by binary COPY (or INSERT executemany without psycopg/pgpq), then ``INSERT INTO
  target SELECT ... FROM staging ON CONFLICT (keys) DO UPDATE``; the staging table is dropped
  at once (and ``ON COMMIT DROP``).
- SQLite: ``INSERT ... ON CONFLICT (keys) DO UPDATE`` executemany (SQLAlchemy's dialect).
- Dialects with ``MERGE`` (SQL Server, Oracle): ``MERGE`` executemany, one source row each.
- Any other dialect: the existing keys are looked up, then UPDATE executemany for those and
  INSERT executemany for the rest.

``ON CONFLICT`` needs a primary key or unique constraint over exactly the key columns; a table
without one is a clear ``ConfigurationError``. A NULL key is refused (SQL's NULL equals no
other value, so such a row would be inserted again on every replay instead of updated).
Identifiers are only ever rendered by SQLAlchemy's identifier preparer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement, Connection, Table

__all__ = ["UpsertKeyError", "last_per_key", "upsert_rows"]

_MERGE_DIALECTS = frozenset({"mssql", "oracle"})
_ROW = "__microbatch_row__"


class UpsertKeyError(mb.SinkError, ValueError):
    """A row whose key cannot be upserted (a NULL key column); nothing was written."""


def upsert_rows(
    connection: Connection,
    table: Table,
    batches: Iterable[pa.RecordBatch],
    keys: Sequence[str],
    *,
    batchsize: int = 1000,
) -> int:
    """Insert or update the rows of ``batches`` in ``table`` by the ``keys`` columns, inside
    the transaction of ``connection`` (nothing is committed here); the last row per key wins,
    in batch order. Returns the number of rows written (one per distinct key). ``batchsize``
    is the number of rows per executemany where one is used."""
    keys = list(keys)
    data = _combined(batches)
    _check_keys(table, data, keys)
    if data.num_rows == 0:
        return 0
    data = last_per_key(data, keys)
    try:
        _strategy(connection.dialect.name)(connection, table, data, keys, batchsize)
    except Exception as error:
        if _no_unique_constraint(error):
            raise mb.ConfigurationError(
                f"upsert into {table.fullname!r} needs a primary key or unique constraint over "
                f"exactly its key columns ({', '.join(keys)}), and the table has none: add "
                "one (ALTER TABLE ... ADD UNIQUE (...)), or let the sink create the table"
            ) from error
        raise
    return data.num_rows


def _strategy(dialect: str) -> Any:
    """The function that writes the deduplicated rows on ``dialect``."""
    if dialect == "postgresql":
        return _postgresql
    if dialect == "sqlite":
        return _sqlite
    if dialect in _MERGE_DIALECTS:
        return _merge
    return _update_then_insert


def last_per_key(data: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The rows of ``data`` that are the last with their key, in their original order."""
    if data.num_rows <= 1:
        return data
    rows = pc.indices_nonzero(pc.fill_null(pa.nulls(data.num_rows, pa.bool_()), True))
    numbered = pa.table({**{key: data[key] for key in keys}, _ROW: rows})
    last = numbered.group_by(list(keys), use_threads=False).aggregate([(_ROW, "max")])
    kept = pc.sort_indices(last[f"{_ROW}_max"])
    positions = pc.take(last[f"{_ROW}_max"], kept)
    if len(positions) == data.num_rows:
        return data
    return data.take(positions)


def _combined(batches: Iterable[pa.RecordBatch]) -> pa.Table:
    batches = list(batches)
    if not batches:
        return pa.table({})
    for batch in batches[1:]:
        if not batch.schema.equals(batches[0].schema):
            raise mb.SchemaMismatchError(
                f"the record batches of one upsert differ in schema: {batches[0].schema} "
                f"then {batch.schema}"
            )
    return pa.Table.from_batches(batches).combine_chunks()


def _check_keys(table: Table, data: pa.Table, keys: list[str]) -> None:
    if not keys:
        raise mb.ConfigurationError(f"upsert into {table.fullname!r} needs at least one key")
    for key in keys:
        if key not in table.c:
            raise mb.ConfigurationError(
                f"upsert key {key!r} is not a column of table {table.fullname!r} "
                f"(columns: {', '.join(table.c.keys())})"
            )
        if data.num_columns and key not in data.column_names:
            raise mb.SchemaMismatchError(
                f"upsert key {key!r} is not a column of the batch written to {table.fullname!r}"
            )
        if data.num_rows and data[key].null_count:
            row = pc.index(pc.is_null(data[key]), True).as_py()
            raise UpsertKeyError(
                f"upsert key column {key!r} is NULL at row {row} of the batch written to "
                f"{table.fullname!r}: a NULL key matches no row (NULL equals nothing in SQL), "
                "so the row would be inserted again instead of updated; fill or filter NULL "
                "keys before the sink"
            )


def _no_unique_constraint(error: BaseException) -> bool:
    orig = getattr(error, "orig", error)
    if getattr(orig, "sqlstate", None) == "42P10":  # invalid_column_reference (PostgreSQL)
        return True
    return "does not match any PRIMARY KEY or UNIQUE constraint" in str(orig)


def _value_columns(data: pa.Table, keys: list[str]) -> list[str]:
    return [name for name in data.column_names if name not in keys]


def _postgresql(
    connection: Connection, table: Table, data: pa.Table, keys: list[str], batchsize: int
) -> None:
    from sqlalchemy import Column, MetaData, Table, select, text
    from sqlalchemy.dialects.postgresql import insert

    from . import _pg_copy
    from ._generic_write import insert_rows

    preparer = connection.dialect.identifier_preparer
    name = f"microbatch_staging_{uuid.uuid4().hex[:16]}"
    columns = ", ".join(preparer.quote(column) for column in data.column_names)
    connection.execute(  # the batch's columns with the target's types, no constraints
        text(
            f"CREATE TEMPORARY TABLE {preparer.quote(name)} ON COMMIT DROP AS "
            f"SELECT {columns} FROM {preparer.format_table(table)} WITH NO DATA"
        )
    )
    staging = Table(
        name, MetaData(), *(Column(column, table.c[column].type) for column in data.column_names)
    )
    try:
        batches = data.to_batches()
        copied = False
        if _pg_copy.can_copy(connection):
            try:
                _pg_copy.copy_rows(connection, staging, batches)
                copied = True
            except _pg_copy.CopyNotSupported:
                pass
        if not copied:
            insert_rows(connection, staging, batches, batchsize)
        names = data.column_names
        statement = insert(table).from_select(names, select(*(staging.c[n] for n in names)))
        connection.execute(_on_conflict(statement, keys, _value_columns(data, keys)))
    finally:
        if not connection.invalidated and connection.in_transaction():
            _drop_quietly(connection, name)


def _on_conflict(statement: Any, keys: list[str], values: list[str]) -> Any:
    """``statement`` (PostgreSQL's or SQLite's ``insert``) setting ``values`` from the new row
    when a row with the same ``keys`` exists (keeping it when there are no other columns)."""
    if values:
        return statement.on_conflict_do_update(
            index_elements=keys, set_={name: statement.excluded[name] for name in values}
        )
    return statement.on_conflict_do_nothing(index_elements=keys)


def _drop_quietly(connection: Connection, name: str) -> None:
    """Drop the staging table now (``ON COMMIT DROP`` drops it at commit in any case); in a
    failed transaction this is skipped, as the rollback removes it."""
    from sqlalchemy import text

    driver = connection.connection.driver_connection
    status = getattr(getattr(driver, "info", None), "transaction_status", None)
    if status is not None and int(status) == 3:  # INERROR: the rollback removes it
        return
    preparer = connection.dialect.identifier_preparer
    connection.execute(text(f"DROP TABLE IF EXISTS {preparer.quote(name)}"))


def _sqlite(
    connection: Connection, table: Table, data: pa.Table, keys: list[str], batchsize: int
) -> None:
    from sqlalchemy.dialects.sqlite import insert

    statement = _on_conflict(insert(table), keys, _value_columns(data, keys))
    for rows in _row_chunks(data, batchsize, sqlite=True):
        connection.execute(statement, rows)


def _row_chunks(data: pa.Table, batchsize: int, *, sqlite: bool = False) -> Iterable[list[Any]]:
    from ._generic_write import python_columns

    for batch in data.to_batches(max_chunksize=batchsize):
        rows = python_columns(batch, sqlite=sqlite)
        if rows:
            yield rows


def _merge(
    connection: Connection, table: Table, data: pa.Table, keys: list[str], batchsize: int
) -> None:
    from ._merge import merge_statement, parameter_name

    names = data.column_names
    statement = merge_statement(table, names, keys)
    for rows in _row_chunks(data, batchsize):
        connection.execute(
            statement,
            [{parameter_name(i): row[name] for i, name in enumerate(names)} for row in rows],
        )


def _update_then_insert(
    connection: Connection, table: Table, data: pa.Table, keys: list[str], batchsize: int
) -> None:
    from sqlalchemy import and_, bindparam, insert, or_, select, update

    values = _value_columns(data, keys)
    key_rows = data.select(keys).to_pylist()
    existing: set[tuple[Any, ...]] = set()
    for start in range(0, len(key_rows), 200):
        chunk = key_rows[start : start + 200]
        condition: ColumnElement[bool]
        if len(keys) == 1:
            condition = table.c[keys[0]].in_([row[keys[0]] for row in chunk])
        else:
            condition = or_(*(and_(*(table.c[k] == row[k] for k in keys)) for row in chunk))
        found = connection.execute(select(*(table.c[k] for k in keys)).where(condition))
        existing.update(tuple(row) for row in found)
    is_update = pa.array([tuple(row[k] for k in keys) in existing for row in key_rows])
    updates, inserts = data.filter(is_update), data.filter(pc.invert(is_update))
    if values and updates.num_rows:
        statement = (
            update(table)
            .where(and_(*(table.c[k] == bindparam(f"key_{index}") for index, k in enumerate(keys))))
            .values({n: bindparam(f"value_{index}") for index, n in enumerate(values)})
        )
        for rows in _row_chunks(updates, batchsize):
            connection.execute(
                statement,
                [
                    {
                        **{f"key_{i}": row[k] for i, k in enumerate(keys)},
                        **{f"value_{i}": row[n] for i, n in enumerate(values)},
                    }
                    for row in rows
                ],
            )
    for rows in _row_chunks(inserts, batchsize):
        connection.execute(insert(table), rows)
