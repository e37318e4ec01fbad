"""The sink's target table: its name, reflection, creation from an Arrow schema, and the check
that a batch fits it.

Identifiers only ever reach SQL through SQLAlchemy's quoting (``Table``/``Column`` objects), so
a table or column name cannot inject SQL. Column types of a created table, per Arrow type:

============================  ===================  ==================  ==================
Arrow                         PostgreSQL           SQLite              other dialects
============================  ===================  ==================  ==================
bool                          boolean              BOOLEAN             BOOLEAN
int8, int16, uint8            smallint             SMALLINT            SMALLINT
int32, uint16                 integer              INTEGER             INTEGER
int64, uint32                 bigint               BIGINT              BIGINT
uint64                        numeric(20, 0)       NUMERIC(20, 0)      NUMERIC(20, 0)
float16, float32              real                 REAL                REAL
float64                       double precision     DOUBLE              DOUBLE
decimal(p, s)                 numeric(p, s)        NUMERIC(p, s)       NUMERIC(p, s)
string, large_string          text                 TEXT                TEXT
binary, large_binary, fixed   bytea                BLOB                BLOB
date32, date64                date                 DATE                DATE
timestamp without zone        timestamp            DATETIME            TIMESTAMP
timestamp with zone           timestamptz          DATETIME (UTC)      TIMESTAMP (zone)
time32, time64                time                 TIME                TIME
duration                      interval             (refused)           INTERVAL
list, struct, map             jsonb                JSON (text)         JSON
============================  ===================  ==================  ==================

A column of a non-nullable Arrow field is created ``NOT NULL``. ``createTableColumnTypes``
(Spark's ``"name TYPE, name TYPE"``) replaces the mapped type of the columns it names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import microbatch as mb

if TYPE_CHECKING:
    from sqlalchemy import Connection, Table
    from sqlalchemy.types import TypeEngine

__all__ = [
    "check_fit",
    "check_not_null",
    "create_table",
    "fit_problems",
    "parse_column_types",
    "parse_table_name",
    "reflect_table",
    "shown_name",
    "sql_type",
]

_NAME_PART = re.compile(r'\s*(?:"((?:[^"]|"")*)"|([^".]+))\s*')
_TYPE_TEXT = re.compile(r"[A-Za-z_][A-Za-z0-9_ ]*(\(\s*\d+\s*(,\s*\d+\s*)?\))?(\s*\[\])?[A-Za-z ]*")


def parse_table_name(dbtable: str) -> tuple[str | None, str]:
    """``(schema, name)`` of ``dbtable``: ``name`` or ``schema.name``, each part bare or
    double-quoted (``""`` is a quote inside). Raises ``OptionError`` for anything else."""
    parts: list[str] = []
    position = 0
    text = dbtable
    while True:
        match = _NAME_PART.match(text, position)
        if match is None or match.end() == position:
            break
        quoted, bare = match.group(1), match.group(2)
        parts.append(quoted.replace('""', '"') if quoted is not None else bare.strip())
        position = match.end()
        if position < len(text) and text[position] == ".":
            position += 1
            if position == len(text):
                position = -1  # a trailing dot
                break
            continue
        break
    if position != len(text) or not parts or len(parts) > 2 or not all(parts):
        raise mb.OptionError(
            f"invalid value for option 'dbtable': {dbtable!r}; expected 'name' or "
            "'schema.name' (double-quote a part that holds a dot: '\"my.schema\".name')"
        )
    if len(parts) == 1:
        return None, parts[0]
    return parts[0], parts[1]


def shown_name(dbtable: str) -> str:
    """The table as messages show it."""
    schema, name = parse_table_name(dbtable)
    return f"{schema}.{name}" if schema else name


def reflect_table(connection: Connection, dbtable: str) -> Table | None:
    """The table ``dbtable`` as the database describes it, or ``None`` when it does not
    exist (schema-qualified names ok)."""
    from sqlalchemy import MetaData, Table, inspect

    schema, name = parse_table_name(dbtable)
    if not inspect(connection).has_table(name, schema=schema):
        return None
    return Table(name, MetaData(), schema=schema, autoload_with=connection)


def parse_column_types(text: str | None) -> dict[str, str]:
    """Spark's ``createTableColumnTypes``: ``"name TYPE, other TYPE(10, 2)"`` as
    ``{name: type}``; names may be double-quoted or in backticks. A type must be a plain type
    name with an optional length/precision (nothing else is let into the DDL)."""
    if not text or not text.strip():
        return {}
    found: dict[str, str] = {}
    for item in _split_top_level(text):
        item = item.strip()
        match = re.match(r'"((?:[^"]|"")+)"|`([^`]+)`|(\S+)', item)
        if match is None or not item:
            raise _column_types_error(text, f"an empty column entry in {item!r}")
        name = (match.group(1) or "").replace('""', '"') or match.group(2) or match.group(3)
        type_text = item[match.end() :].strip()
        if not type_text or not _TYPE_TEXT.fullmatch(type_text):
            raise _column_types_error(
                text, f"column {name!r} needs a SQL type such as VARCHAR(64), got {type_text!r}"
            )
        found[name] = " ".join(type_text.split())
    return found


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    items.append(text[start:])
    return items


def _column_types_error(text: str, what: str) -> mb.OptionError:
    return mb.OptionError(
        f"invalid value for option 'createTableColumnTypes': {what}; expected "
        f"'name TYPE, name TYPE' (Spark's syntax), got {text!r}"
    )


def sql_type(arrow_type: pa.DataType, dialect: str) -> TypeEngine[Any]:
    """The SQLAlchemy column type a created table gets for ``arrow_type`` (see the module's
    table); raises ``SchemaError`` for a type with no mapping."""
    from sqlalchemy import types as t

    if pa.types.is_boolean(arrow_type):
        return t.Boolean()
    if pa.types.is_integer(arrow_type):
        if arrow_type in (pa.int8(), pa.int16(), pa.uint8()):
            return t.SmallInteger()
        if arrow_type in (pa.int32(), pa.uint16()):
            return t.Integer()
        if arrow_type in (pa.int64(), pa.uint32()):
            return t.BigInteger()
        return t.Numeric(20, 0)
    if pa.types.is_floating(arrow_type):
        return t.REAL() if arrow_type.bit_width <= 32 else t.Double()
    if pa.types.is_decimal(arrow_type):
        return t.Numeric(arrow_type.precision, arrow_type.scale)
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return t.Text()
    if (
        pa.types.is_binary(arrow_type)
        or pa.types.is_large_binary(arrow_type)
        or pa.types.is_fixed_size_binary(arrow_type)
    ):
        return t.LargeBinary()
    if pa.types.is_date(arrow_type):
        return t.Date()
    if pa.types.is_timestamp(arrow_type):
        return t.DateTime(timezone=arrow_type.tz is not None)
    if pa.types.is_time(arrow_type):
        return t.Time()
    if pa.types.is_duration(arrow_type) and dialect != "sqlite":
        return t.Interval(native=True)
    if pa.types.is_nested(arrow_type):
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return JSONB()
        return t.JSON()
    raise mb.SchemaError(f"no SQL column type for Arrow type {arrow_type} on {dialect}")


def create_table(
    connection: Connection,
    dbtable: str,
    schema: pa.Schema,
    column_types: dict[str, str] | None = None,
    primary_key: Sequence[str] = (),
) -> Table:
    """Create ``dbtable`` with a column per field of ``schema`` (types mapped per dialect,
    ``column_types`` overriding; ``primary_key`` columns, the upsert keys, form its primary
    key), inside the caller's transaction; returns it reflected."""
    from sqlalchemy import Column, MetaData, Table

    overrides = dict(column_types or {})
    unknown = sorted(set(overrides) - set(schema.names))
    if unknown:
        raise mb.OptionError(
            f"option 'createTableColumnTypes' names column(s) {', '.join(map(repr, unknown))} "
            f"that the batch does not have (its columns: {', '.join(schema.names)})"
        )
    dialect = connection.dialect.name
    table_schema, name = parse_table_name(dbtable)
    columns = [
        Column(
            field.name,
            _given_type(overrides[field.name])
            if field.name in overrides
            else sql_type(field.type, dialect),
            nullable=field.nullable and field.name not in primary_key,
            primary_key=field.name in primary_key,
            autoincrement=False,
        )
        for field in schema
    ]
    table = Table(name, MetaData(), *columns, schema=table_schema)
    table.create(connection)
    found = reflect_table(connection, dbtable)
    assert found is not None, "a table just created is reflected"
    return found


def _given_type(text: str) -> TypeEngine[Any]:
    from sqlalchemy.types import UserDefinedType

    class _Given(UserDefinedType[Any]):
        cache_ok = True

        def get_col_spec(self, **_kw: Any) -> str:
            return text

    return _Given()


def _family(arrow_type: pa.DataType) -> str:
    if pa.types.is_boolean(arrow_type):
        return "boolean"
    if pa.types.is_integer(arrow_type):
        return "integer"
    if pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type):
        return "number"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "text"
    if (
        pa.types.is_binary(arrow_type)
        or pa.types.is_large_binary(arrow_type)
        or pa.types.is_fixed_size_binary(arrow_type)
    ):
        return "binary"
    if pa.types.is_date(arrow_type):
        return "date"
    if pa.types.is_timestamp(arrow_type):
        return "timestamp"
    if pa.types.is_time(arrow_type):
        return "time"
    if pa.types.is_duration(arrow_type):
        return "interval"
    if pa.types.is_nested(arrow_type):
        return "nested"
    return "other"


def _accepts(column_type: Any, family: str) -> bool:
    """Whether a column of SQLAlchemy type ``column_type`` takes values of ``family``."""
    from sqlalchemy import types as t
    from sqlalchemy.dialects import postgresql as pg

    if isinstance(column_type, t.NullType | t.UserDefinedType):
        return True  # a type SQLAlchemy does not know: let the database decide
    accepted: dict[str, tuple[type, ...]] = {
        "boolean": (t.Boolean,),
        "integer": (t.Integer, t.NumericCommon),
        "number": (t.NumericCommon,),
        "text": (t.String, t.Enum, t.Uuid, t.JSON),
        "binary": (t._Binary,),
        "date": (t.Date, t.DateTime),
        "timestamp": (t.DateTime,),
        "time": (t.Time,),
        "interval": (t.Interval, pg.INTERVAL),
        "nested": (t.JSON, t.ARRAY, t.String),
    }
    return isinstance(column_type, accepted.get(family, ()))


def fit_problems(table: Table, schema: pa.Schema) -> list[str]:
    """What keeps rows of ``schema`` from going into ``table``, one line per column: batch
    columns the table lacks, NOT NULL table columns without a default the batch lacks, and
    incompatible types. Empty when they fit."""
    problems: list[str] = []
    columns = {column.name: column for column in table.columns}
    for field in schema:
        column = columns.get(field.name)
        if column is None:
            problems.append(f"column {field.name!r} ({field.type}) is not in the table")
            continue
        if not _accepts(column.type, _family(field.type)):
            problems.append(
                f"column {field.name!r}: the table's type {_type_text(column)} does not take "
                f"the batch's {field.type}"
            )
    for name, column in columns.items():
        if name in schema.names:
            continue
        defaulted = (
            column.nullable
            or column.server_default is not None
            or column.default is not None
            or (
                column.primary_key
                and column.autoincrement in (True, "auto")
                and isinstance(column.type, _integer_type())
            )
        )
        if not defaulted:
            problems.append(
                f"column {name!r} ({_type_text(column)} NOT NULL, no default) is not in the batch"
            )
    return problems


def _integer_type() -> type:
    from sqlalchemy import types as t

    return t.Integer


def _type_text(column: Any) -> str:
    try:
        return str(column.type)
    except Exception:  # a type that cannot render without a dialect
        return type(column.type).__name__


def check_fit(table: Table, schema: pa.Schema, where: str) -> None:
    """Raise ``SchemaError`` with the per-column diff unless rows of ``schema`` fit ``table``
    (``where`` names the table and database)."""
    problems = fit_problems(table, schema)
    if problems:
        raise mb.SchemaError(
            f"the batch does not fit table {where}:\n  "
            + "\n  ".join(problems)
            + "\nAlter the table, select matching columns, or write to a new table (the sink "
            "creates a missing one)."
        )


def check_not_null(table: Table, data: pa.Table, where: str) -> None:
    """Raise ``SchemaError`` naming each NOT NULL column of ``table`` that ``data`` has nulls
    for (checked before anything is written)."""
    problems = []
    for column in table.columns:
        if column.nullable or column.name not in data.column_names:
            continue
        nulls = data.column(column.name).null_count
        if nulls:
            problems.append(
                f"column {column.name!r} is NOT NULL in the table, but {nulls} row(s) of the "
                "batch have no value for it"
            )
    if problems:
        raise mb.SchemaError(f"the batch does not fit table {where}:\n  " + "\n  ".join(problems))
