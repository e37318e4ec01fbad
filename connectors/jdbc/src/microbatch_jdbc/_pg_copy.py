"""The PostgreSQL fast path: Arrow record batches into a table by binary ``COPY``.

pgpq encodes each batch into PostgreSQL's binary COPY format in native code, and psycopg 3
streams it through ``COPY ... FROM STDIN WITH (FORMAT BINARY)`` on the SQLAlchemy connection's
own psycopg connection, so the rows belong to the caller's transaction (a ledger row written on
the same connection commits or rolls back with them). No Python work is done per row.

Binary COPY is strict: the server reads each field with the receive function of the column's
type, so an ``int8`` value cannot go into an ``int4`` column. :func:`copy_rows` therefore reads
the table's column types from the server's catalogue and casts every Arrow column to the exact
Arrow type whose encoding that PostgreSQL type expects; a value that does not fit (an
overflowing integer, a malformed UUID, a timestamp finer than a microsecond...) is a
:class:`CopyValueError` naming the column and the first row that does not fit.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import microbatch as mb
from microbatch_jdbc import _pg_types

if TYPE_CHECKING:
    from sqlalchemy import Connection, Table

__all__ = ["CopyNotSupported", "CopyValueError", "can_copy", "copy_rows"]

_SLICE_ROWS = 65_536
"""Rows encoded and sent at a time: bounds the encoded bytes held in memory (about 2 MB for a
few narrow columns) at no measurable cost in speed."""


class CopyValueError(mb.SinkError, ValueError):
    """A value of the batch does not fit the type of its table column; nothing was written.

    ``column`` names the column, ``row`` is the first row (counted from 0 across the batches of
    the call) that does not fit, when it could be found."""

    def __init__(self, message: str, column: str, row: int | None = None) -> None:
        super().__init__(message)
        self.column = column
        self.row = row

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.column, self.row))


class CopyNotSupported(mb.SinkError):
    """The table has a column type the binary COPY path cannot encode (for example an array
    of ``timestamptz`` or ``varchar``); raised before anything is sent, so the caller may write
    the rows another way."""


def can_copy(connection: Connection) -> bool:
    """True when ``connection`` is PostgreSQL through psycopg 3 and pgpq is installed: the
    connections :func:`copy_rows` can write through."""
    dialect = connection.dialect
    if dialect.name != "postgresql" or dialect.driver != "psycopg":
        return False
    return importlib.util.find_spec("pgpq") is not None


def copy_rows(connection: Connection, table: Table, batches: Iterable[pa.RecordBatch]) -> int:
    """Write ``batches`` into the existing ``table`` by binary COPY, inside the transaction of
    ``connection`` (nothing is committed here); returns the number of rows written.

    The batches' columns are matched to the table's by name (table columns a batch lacks get
    their defaults) and cast to the table's types first. Raises :class:`CopyNotSupported` for a
    column type this path cannot encode and ``mb.SchemaMismatchError`` for a batch column the
    table lacks, both before anything is sent (the transaction stays usable: the caller may
    write the rows another way); :class:`CopyValueError` for a value that does not fit its
    column; a database error (a NOT NULL or unique violation, a lost connection...) as the
    ``sqlalchemy.exc.DBAPIError`` subclass ``connection.execute`` would raise, the column and
    line in its text. After any error but the first two the transaction must be rolled back.
    """
    iterator = iter(batches)
    first = _next_nonempty(iterator)
    if first is None:
        return 0
    columns = _pg_types.table_columns(connection, table)
    plan = _plan(table, first.schema, columns)
    driver = connection.connection.driver_connection
    if driver is None:  # pragma: no cover - a live pooled connection always has one
        raise mb.SinkError(f"the connection to write {table.fullname!r} is closed")
    import psycopg

    try:
        return _stream(driver, table, plan, first, iterator)
    except psycopg.Error as error:
        raise _as_sqlalchemy_error(connection, error) from error


@dataclass(frozen=True)
class _Plan:
    names: list[str]
    fits: list[_pg_types.ColumnFit]
    schema: pa.Schema
    """The Arrow types sent (one encoder for the whole COPY)."""
    encoders: dict[str, Any]
    source: pa.Schema
    """The first batch's schema, which ``fits`` were made for."""
    columns: dict[str, _pg_types.PgColumn]


def _plan(table: Table, schema: pa.Schema, columns: dict[str, _pg_types.PgColumn]) -> _Plan:
    missing = [name for name in schema.names if name not in columns]
    if missing:
        raise mb.SchemaMismatchError(
            f"table {table.fullname!r} has no column "
            + ", ".join(repr(name) for name in missing)
            + f"; its columns are {', '.join(columns)}"
        )
    if len(set(schema.names)) != len(schema.names):
        raise mb.SchemaMismatchError(f"the batch written to {table.fullname!r} repeats a column")
    fits = [_pg_types.column_fit(columns[name], schema.field(name).type) for name in schema.names]
    unsupported = [fit for fit in fits if fit.problem]
    if unsupported:
        raise CopyNotSupported(
            f"binary COPY cannot write table {table.fullname!r}: "
            + "; ".join(f"column {fit.name!r}: {fit.problem}" for fit in unsupported)
        )
    target = pa.schema([pa.field(fit.name, fit.arrow_type) for fit in fits])
    encoders = {fit.name: fit.encoder(target.field(fit.name)) for fit in fits}
    return _Plan(list(schema.names), fits, target, encoders, schema, columns)


def _stream(
    driver: Any,
    table: Table,
    plan: _Plan,
    first: pa.RecordBatch,
    rest: Iterator[pa.RecordBatch],
) -> int:
    import pgpq
    from psycopg import sql

    encoder = pgpq.ArrowToPostgresBinaryEncoder.new_with_encoders(plan.schema, plan.encoders)
    parts = [table.schema, table.name] if table.schema else [table.name]
    statement = sql.SQL("COPY {} ({}) FROM STDIN WITH (FORMAT BINARY)").format(
        sql.Identifier(*parts), sql.SQL(", ").join(sql.Identifier(name) for name in plan.names)
    )
    written = 0
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        copy.write(encoder.write_header())
        batch: pa.RecordBatch | None = first
        while batch is not None:
            if batch.schema.names != plan.names:
                raise mb.SchemaMismatchError(
                    f"batches written to {table.fullname!r} changed columns: "
                    f"{plan.names} then {batch.schema.names}"
                )
            fitted = _fit_batch(batch, plan, written)
            for offset in range(0, fitted.num_rows, _SLICE_ROWS):
                copy.write(encoder.write_batch(fitted.slice(offset, _SLICE_ROWS)))
            written += batch.num_rows
            batch = _next_nonempty(rest)
        copy.write(encoder.finish())
    return written


def _as_sqlalchemy_error(connection: Connection, error: Any) -> Exception:
    """The psycopg ``error`` as the SQLAlchemy exception the same failure raises through
    ``connection.execute`` (``OperationalError``, ``DataError``, ``IntegrityError``...), with
    the connection invalidated when it was lost, so callers classify both paths alike."""
    import psycopg
    from sqlalchemy import exc

    driver = connection.connection.dbapi_connection
    lost = connection.dialect.is_disconnect(error, driver, None)
    if lost:
        connection.invalidate(error)
    return exc.DBAPIError.instance(
        "COPY ... FROM STDIN WITH (FORMAT BINARY)",
        None,
        error,
        psycopg.Error,
        connection_invalidated=lost,
        dialect=connection.dialect,
    )


def _fit_batch(batch: pa.RecordBatch, plan: _Plan, row_offset: int) -> pa.RecordBatch:
    fits = plan.fits
    if not batch.schema.equals(plan.source):  # a later batch with other Arrow types
        fits = [_refit(plan, name, batch.schema.field(name).type) for name in plan.names]
    arrays = []
    for index, fit in enumerate(fits):
        try:
            array = fit.cast(batch.column(index))
            if array.type != plan.schema.field(index).type:
                array = _pg_types.safe_cast(plan.schema.field(index).type)(array)
            arrays.append(array)
        except _pg_types.DoesNotFit as error:
            row = None if error.row is None else row_offset + error.row
            where = f" at row {row}" if row is not None else ""
            raise CopyValueError(
                f"column {fit.name!r} ({fit.pg_type}): a value{where} does not fit: {error}",
                fit.name,
                row,
            ) from None
    return pa.RecordBatch.from_arrays(arrays, schema=plan.schema)


def _refit(plan: _Plan, name: str, source: pa.DataType) -> _pg_types.ColumnFit:
    fit = _pg_types.column_fit(plan.columns[name], source)
    if fit.problem:
        raise CopyValueError(
            f"column {name!r} ({fit.pg_type}): a later batch's Arrow {source} cannot be "
            f"written: {fit.problem}",
            name,
        )
    return fit


def _next_nonempty(iterator: Iterator[pa.RecordBatch]) -> pa.RecordBatch | None:
    for batch in iterator:
        if batch.num_rows:
            return batch
    return None
