"""Reading SQL results as Arrow: the schema probe, the type mapping and the split reader.

PostgreSQL is read through ADBC (``adbc_driver_postgresql``: the server's binary rows decoded
to Arrow in C, streamed in record batches); other dialects through SQLAlchemy with
``yield_per(fetchsize)``, each chunk of rows turned into one record batch. Both yield batches
in the schema the probe found, so a split reads the same types on every dialect path.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb

from ._connection import Database, is_retriable

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "JdbcSplitReader",
    "QuerySplit",
    "probe_schema",
    "quote_identifier",
    "quote_table",
    "select_list",
    "use_adbc",
]

_log = logging.getLogger(__name__)

_PG_NUMERIC_DEFAULT = pa.decimal128(38, 18)  # Spark's choice for an unconstrained numeric


@dataclass(frozen=True)
class QuerySplit(mb.Split):
    """One statement whose rows are one split: a range of a partitioned read or the new rows
    of a streaming batch."""

    sql: str
    index: int = 0


def run_sql(connection: Connection, sql: str) -> Any:
    """``sql`` executed as written on the DBAPI cursor of ``connection`` (inside its
    transaction), without parameters: no driver reads ``%`` or ``:name`` in it as a
    placeholder. Returns the cursor."""
    cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    cursor.execute(sql)
    return cursor


def quote_identifier(database: Database, name: str) -> str:
    """``name`` quoted by the dialect's SQLAlchemy identifier preparer (always quoted)."""
    return _dialect(database).identifier_preparer.quote_identifier(name)


def quote_table(database: Database, schema: str | None, name: str) -> str:
    """A table name, schema-qualified when ``schema`` is given, quoted by SQLAlchemy."""
    preparer = _dialect(database).identifier_preparer
    quoted = preparer.quote_identifier(name)
    return f"{preparer.quote_identifier(schema)}.{quoted}" if schema else quoted


def _dialect(database: Database) -> Any:
    from sqlalchemy.engine import make_url

    # named paramstyle: identifiers come out as written (no doubled %), for SQL run as is
    dialect_class: Any = make_url(database.url).get_dialect()
    return dialect_class(paramstyle="named")


def use_adbc(database: Database) -> bool:
    """True when ``database`` is PostgreSQL and the ADBC driver is installed."""
    if database.dialect != "postgresql":
        return False
    try:
        import adbc_driver_postgresql.dbapi  # noqa: F401
    except ImportError:
        return False
    return True


def _libpq_uri(database: Database) -> str:
    from sqlalchemy.engine import make_url

    url = make_url(database.url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


@contextlib.contextmanager
def _adbc_cursor(database: Database) -> Iterator[Any]:
    import adbc_driver_postgresql.dbapi as adbc

    try:
        connection = adbc.connect(_libpq_uri(database))
    except Exception as error:
        raise _failure(database, error, "could not connect to") from None
    try:
        with connection.cursor() as cursor:
            if database.init_statement:
                cursor.execute(database.init_statement)
                if cursor.description:
                    cursor.fetchall()
            yield cursor
    finally:
        connection.close()


def _failure(database: Database, error: BaseException, what: str) -> Exception:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    message = f"{what} {database.shown}: {text}"
    lowered = text.lower()
    transient = is_retriable(error) or any(
        word in lowered for word in ("connection refused", "could not connect", "terminating")
    )
    return mb.RetriableError(message) if transient else mb.MicrobatchError(message)


# -- the schema ------------------------------------------------------------------------------


def probe_schema(
    database: Database, from_sql: str, table: tuple[str | None, str] | None
) -> pa.Schema:
    """The Arrow schema of ``SELECT * FROM <from_sql>``, found without reading rows (a
    ``WHERE 1=0`` probe, as Spark does); see the README for the mapping per dialect."""
    if use_adbc(database):
        return _probe_postgresql(database, from_sql)
    return _probe_generic(database, from_sql, table)


TEXT_CAST = b"microbatch.jdbc.read_as_text"
"""Field metadata key of a PostgreSQL column read as ``CAST(col AS text)``: a type ADBC only
gives as the server's binary form (point, inet, enums, ranges...)."""


def select_list(database: Database, schema: pa.Schema) -> str:
    """``*``, or the columns one by one when some must be read as their text."""
    metadata = [field.metadata or {} for field in schema]
    if not any(TEXT_CAST in item for item in metadata):
        return "*"
    columns = []
    for field, item in zip(schema, metadata, strict=True):
        quoted = quote_identifier(database, field.name)
        columns.append(f"CAST({quoted} AS text) AS {quoted}" if TEXT_CAST in item else quoted)
    return ", ".join(columns)


def _probe_postgresql(database: Database, from_sql: str) -> pa.Schema:
    probe = f"SELECT * FROM {from_sql} WHERE 1=0"
    with _adbc_cursor(database) as cursor:
        cursor.execute(probe)
        found = cursor.fetch_arrow_table().schema
    description: list[Any] = [None] * len(found)
    if any(_opaque_numeric(item.type) for item in found):
        # ADBC gives no precision or scale: ask the server's description (psycopg)
        engine = database.engine()
        try:
            with database.connect(engine) as connection:
                description = list(run_sql(connection, probe).description)
        finally:
            engine.dispose()
    fields = []
    for item, column in zip(found, description, strict=True):
        kind = _pg_type(item.type, column)
        if kind is None:  # known to the server only: read its text
            fields.append(pa.field(item.name, pa.string(), metadata={TEXT_CAST: b"1"}))
        else:
            fields.append(pa.field(item.name, kind))
    return pa.schema(fields)


def _opaque_numeric(found: pa.DataType) -> bool:
    return (
        isinstance(found, pa.BaseExtensionType)
        and getattr(found, "extension_name", "") == "arrow.opaque"
        and getattr(found, "type_name", "") == "numeric"
    )


def _pg_type(found: pa.DataType, column: Any) -> pa.DataType | None:
    if isinstance(found, pa.BaseExtensionType):
        name = getattr(found, "extension_name", "")
        if name == "arrow.opaque" and getattr(found, "type_name", "") == "numeric":
            precision, scale = getattr(column, "precision", None), getattr(column, "scale", None)
            if precision and precision <= 38:
                return pa.decimal128(precision, scale or 0)
            return _PG_NUMERIC_DEFAULT
        if name in ("arrow.json", "arrow.uuid"):
            return pa.string()
        return None
    if pa.types.is_list(found):
        inner = _pg_type(found.value_type, None)
        return None if inner is None else pa.list_(inner)
    return found


def _probe_generic(
    database: Database, from_sql: str, table: tuple[str | None, str] | None
) -> pa.Schema:
    import sqlalchemy as sa

    engine = database.engine()
    try:
        with database.connect(engine) as connection:
            if table is not None:
                columns = sa.inspect(connection).get_columns(table[1], schema=table[0])
                return pa.schema(
                    [pa.field(c["name"], _sqlalchemy_type(c["type"])) for c in columns]
                )
            cursor = run_sql(connection, f"SELECT * FROM {from_sql} LIMIT 1000")
            names = [column[0] for column in cursor.description]
            rows = cursor.fetchall()
    finally:
        engine.dispose()
    fields = []
    for position, name in enumerate(names):
        values = [row[position] for row in rows]
        kind = pa.array(values).type if values else pa.null()
        fields.append(pa.field(name, pa.string() if pa.types.is_null(kind) else kind))
    return pa.schema(fields)


def _sqlalchemy_type(kind: Any) -> pa.DataType:
    import sqlalchemy as sa
    from sqlalchemy.types import NullType, _Binary

    if isinstance(kind, sa.Boolean):
        return pa.bool_()
    if isinstance(kind, sa.SmallInteger):
        return pa.int16()
    if isinstance(kind, sa.Integer):
        return pa.int64()
    if isinstance(kind, sa.Float):
        return pa.float64()
    if isinstance(kind, sa.Numeric):
        precision, scale = kind.precision, kind.scale
        if precision and precision <= 38:
            return pa.decimal128(precision, scale or 0)
        return pa.float64() if kind.asdecimal is False else _PG_NUMERIC_DEFAULT
    if isinstance(kind, sa.DateTime):
        return pa.timestamp("us", tz="UTC" if kind.timezone else None)
    if isinstance(kind, sa.Date):
        return pa.date32()
    if isinstance(kind, sa.Time):
        return pa.time64("us")
    if isinstance(kind, _Binary):
        return pa.binary()
    if isinstance(kind, NullType):  # SQLite: a column declared without a type
        return pa.string()
    return pa.string()


# -- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class JdbcSplitReader(mb.SplitReader):
    """Reads :class:`QuerySplit` values: picklable, opens its own connection in ``read``."""

    database: Database
    schema: pa.Schema
    fetchsize: int

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        assert isinstance(split, QuerySplit), split
        if use_adbc(self.database):
            yield from self._read_adbc(split.sql)
        else:
            yield from self._read_generic(split.sql)

    def _read_adbc(self, sql: str) -> Iterator[pa.RecordBatch]:
        with _adbc_cursor(self.database) as cursor:
            cursor.adbc_statement.set_options(
                **{"adbc.postgresql.batch_size_hint_bytes": str(max(self.fetchsize, 1) * 256)}
            )
            try:
                cursor.execute(sql)
                stream = cursor.fetch_record_batch()
            except Exception as error:
                raise _failure(self.database, error, "could not read from") from None
            for batch in stream:
                if batch.num_rows:
                    yield conform(batch, self.schema)

    def _read_generic(self, sql: str) -> Iterator[pa.RecordBatch]:
        engine = self.database.engine()
        try:
            with self.database.connect(engine) as connection:
                yield from _chunks(connection, sql, self.schema, self.fetchsize)
        finally:
            engine.dispose()


def _chunks(
    connection: Connection, sql: str, schema: pa.Schema, fetchsize: int
) -> Iterator[pa.RecordBatch]:
    cursor = run_sql(connection, sql)
    cursor.arraysize = fetchsize
    while rows := cursor.fetchmany(fetchsize):
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
        pairs = zip(columns, schema, strict=True)
        arrays = [_column(list(values), field) for values, field in pairs]
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _column(values: list[Any], field: pa.Field) -> pa.Array:
    try:
        return pa.array(values, type=field.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        try:
            return pc.cast(pa.array(values), field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
            raise mb.MicrobatchError(
                f"column {field.name!r}: a value does not fit {field.type}: {error}"
            ) from None


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (as ADBC decoded it) in ``schema``: json and other extension types as their
    text, uuids as their canonical text, numeric text as decimals."""
    pairs = zip(batch.columns, schema, strict=True)
    arrays = [_conform_array(column, field) for column, field in pairs]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _conform_array(array: pa.Array, field: pa.Field) -> pa.Array:
    if isinstance(array.type, pa.BaseExtensionType):
        if getattr(array.type, "extension_name", "") == "arrow.uuid":
            array = _uuid_text(array.storage)
        else:
            array = array.storage
    if pa.types.is_list(array.type) and pa.types.is_list(field.type):
        values = _conform_array(array.values, pa.field("item", field.type.value_type))
        array = pa.ListArray.from_arrays(array.offsets, values, mask=array.is_null())
    if array.type == field.type:
        return array
    try:
        if pa.types.is_decimal(field.type) and pa.types.is_integer(array.type):
            # Arrow wants room for every int64 before the scale: go through 38 digits, then
            # check each value fits the narrower type
            array = array.cast(pa.decimal128(38, field.type.scale))
        return array.cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise mb.MicrobatchError(
            f"column {field.name!r}: a value does not fit {field.type}: {error}"
        ) from None


def _uuid_text(storage: pa.Array) -> pa.Array:
    """16-byte uuids as 36-character text, without a Python loop over the values."""
    count = len(storage)
    raw = storage.buffers()[1].to_pybytes()[storage.offset * 16 : (storage.offset + count) * 16]
    offsets = pa.array(range(0, 32 * (count + 1), 32), type=pa.int32()).buffers()[1]
    digits = pa.StringArray.from_buffers(count, offsets, pa.py_buffer(raw.hex().encode()))
    pieces = [
        pc.utf8_slice_codeunits(digits, start, stop)
        for start, stop in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))
    ]
    text = pc.binary_join_element_wise(*pieces, "-")
    return pc.if_else(pc.is_valid(storage), text, pa.scalar(None, pa.string()))
