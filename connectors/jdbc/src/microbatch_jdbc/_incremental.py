"""Streaming by a strictly increasing column: offsets, their JSON form, and the statements.

An offset is ``{"incrementalColumn": <the last value read>}`` (``None`` before the first
row). Integers stay integers; decimals, timestamps and dates are kept as text (``"12.50"``,
``"2024-05-01T12:00:00.250000+00:00"``) so that JSON keeps them exactly. A batch reads
``col > last AND col <= end`` in the column's order; the end of the next batch is the largest
value among the next ``maxRowsPerTrigger`` rows (``SELECT col ... ORDER BY col LIMIT n``),
which an index on the column answers without reading the table.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

import microbatch as mb

__all__ = ["OFFSET_KEY", "IncrementalColumn", "incremental_column"]

OFFSET_KEY = "incrementalColumn"

Kind = Literal["integer", "decimal", "float", "timestamp", "timestamptz", "date"]


@dataclass(frozen=True)
class IncrementalColumn:
    """The column a stream follows: its quoted name and how its values are written."""

    name: str
    quoted: str
    kind: Kind

    # -- values -----------------------------------------------------------------------------
    def to_json(self, value: Any) -> Any:
        """A value read from the database (or the ``startingValue`` text) as JSON."""
        if value is None:
            return None
        parsed = self.parse(value)
        if isinstance(parsed, dt.datetime | dt.date):
            return parsed.isoformat()
        if isinstance(parsed, decimal.Decimal):
            return str(parsed)
        return parsed

    def parse(self, value: Any) -> Any:
        """A JSON, text or database value as the Python value of the column's kind;
        ``ValueError`` when it is not one."""
        if self.kind == "integer":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"{value!r} is not an integer")
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        if self.kind == "decimal":
            return decimal.Decimal(str(value).strip())
        if self.kind == "float":
            return float(value)
        if self.kind == "date":
            if isinstance(value, dt.datetime):
                return value.date()
            return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value)[:10])
        moment = value if isinstance(value, dt.datetime) else None
        if moment is None:
            moment = dt.datetime.fromisoformat(str(value).strip().replace(" ", "T", 1))
        if self.kind == "timestamptz":
            moment = (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)
        elif moment.tzinfo is not None:
            moment = moment.replace(tzinfo=None)
        return moment

    def literal(self, json_value: Any) -> str:
        """A JSON value as a SQL literal (rendered here from the parsed value, never from
        text as given)."""
        value = self.parse(json_value)
        if self.kind == "integer":
            return str(value)
        if self.kind == "decimal":  # never an exponent: 1E+2 would be a float literal
            return format(value, "f")
        if self.kind == "float":
            return repr(value)
        if self.kind == "date":
            return f"'{value.isoformat()}'"
        # always six fraction digits: SQLite compares timestamps as text, stored the way
        # SQLAlchemy writes them ("2024-05-01 12:00:00.000000"); without the fraction a
        # whole-second value would sort before its own stored text
        text = value.strftime("%Y-%m-%d %H:%M:%S") + f".{value.microsecond:06d}"
        if self.kind == "timestamptz":
            text += "+00:00"
        return f"'{text}'"

    # -- statements -------------------------------------------------------------------------
    def _conditions(self, last: Any, end: Any, cutoff: str | None) -> list[str]:
        conditions = [f"{self.quoted} IS NOT NULL"]
        if last is not None:
            conditions.append(f"{self.quoted} > {self.literal(last)}")
        if end is not None:
            conditions.append(f"{self.quoted} <= {self.literal(end)}")
        if cutoff is not None:
            conditions.append(f"{self.quoted} <= {cutoff}")
        return conditions

    def end_query(
        self,
        from_sql: str,
        last: Any,
        cap: Any,
        limit: int | None,
        cutoff: str | None,
        dialect: str = "",
    ) -> str:
        """The statement whose one value is the end of the next batch (NULL: nothing new);
        with ``limit``, the largest of the next ``limit`` values in the column's order."""
        where = " AND ".join(self._conditions(last, cap, cutoff))
        if limit is None:
            return f"SELECT MAX({self.quoted}) FROM {from_sql} WHERE {where}"
        count = int(limit)
        top, tail = "", f" LIMIT {count}"
        if dialect == "mssql":
            top, tail = f"TOP {count} ", ""
        elif dialect == "oracle":
            tail = f" FETCH FIRST {count} ROWS ONLY"
        inner = (
            f"SELECT {top}{self.quoted} AS mb_value FROM {from_sql} WHERE {where} "
            f"ORDER BY {self.quoted}{tail}"
        )
        return f"SELECT MAX(mb_value) FROM ({inner}) mb_next"

    def null_count_query(self, from_sql: str) -> str:
        """The statement counting the rows a stream never reads (a NULL in the column)."""
        return f"SELECT COUNT(*) FROM {from_sql} WHERE {self.quoted} IS NULL"

    def range_query(self, from_sql: str, last: Any, end: Any, columns: str = "*") -> str:
        """The rows of the batch ``(last, end]``, in the column's order."""
        where = " AND ".join(self._conditions(last, end, None))
        return f"SELECT {columns} FROM {from_sql} WHERE {where} ORDER BY {self.quoted}"

    def cutoff(self, dialect: str, delay: dt.timedelta | None) -> str | None:
        """The SQL for "now minus the delay" on the database's clock (``None`` without a
        delay); the Python clock (UTC) where the dialect has no expression here."""
        if delay is None:
            return None
        seconds = f"{delay.total_seconds():.6f}"
        if dialect == "postgresql":
            now = "CURRENT_TIMESTAMP" if self.kind == "timestamptz" else "LOCALTIMESTAMP"
            return f"({now} - make_interval(secs => {seconds}))"
        if dialect == "sqlite":
            return f"datetime('now', '-{seconds} seconds')"
        moment = dt.datetime.now(dt.UTC) - delay
        return self.literal(moment.isoformat())


def incremental_column(
    schema: pa.Schema, name: str, quote: Callable[[str], str], *, delay: dt.timedelta | None
) -> IncrementalColumn:
    """The followed column of ``schema``; ``OptionError`` when it is missing, not numeric nor
    a timestamp, or has a delay without being a timestamp."""
    index = schema.get_field_index(name)
    if index < 0:
        matches = [f.name for f in schema if f.name.lower() == name.lower()]
        if len(matches) != 1:
            raise mb.OptionError(
                f"invalid value for option 'incrementalColumn': no column {name!r} in "
                f"{', '.join(schema.names)}"
            )
        index = schema.get_field_index(matches[0])
    field = schema.field(index)
    kind: Kind
    if pa.types.is_integer(field.type):
        kind = "integer"
    elif pa.types.is_decimal(field.type):
        kind = "decimal"
    elif pa.types.is_floating(field.type):
        kind = "float"
    elif pa.types.is_timestamp(field.type):
        kind = "timestamptz" if field.type.tz else "timestamp"
    elif pa.types.is_date(field.type):
        kind = "date"
    else:
        raise mb.OptionError(
            f"invalid value for option 'incrementalColumn': column {field.name!r} is "
            f"{field.type}; it must be a numeric, date or timestamp column"
        )
    if delay is not None and kind not in ("timestamp", "timestamptz"):
        raise mb.OptionError(
            f"option 'incrementalDelay' needs a timestamp incrementalColumn; {field.name!r} "
            f"is {field.type}"
        )
    return IncrementalColumn(field.name, quote(field.name), kind)
