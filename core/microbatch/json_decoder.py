"""JSON to Arrow in a given schema, with Spark's parse modes; malformed records as data.

``parse_json`` (:class:`~microbatch._transforms.ParseJson`) decodes with :class:`JsonDecoder`;
a connector whose records are JSON (message values, lines of a file) should too, so that its
users get the same types, the same modes and the same errors (the ``json`` file source reads
files as Spark's file reader does instead, with :mod:`microbatch.spark_json`)::

    from microbatch.json_decoder import JsonDecoder, MalformedJsonError

    decoder = JsonDecoder("id BIGINT, name STRING", corrupt_column="_corrupt_record")
    result = decoder.decode_values(values)     # a string or binary array, one object per value
    result.table          # pyarrow.Table with the columns id, name, _corrupt_record
    result.malformed      # (MalformedRecord(row=2, kind=MalformedKind.BAD_VALUE, column="id",
                          #   message="column 'id': cannot read \\"x\\" as BIGINT", ...), ...)

Build a decoder once (it checks the schema and prepares pyarrow's options) and reuse it: it
keeps no state between calls, so threads may share it, and it pickles (it is rebuilt from its
schema, mode and corrupt column), so it may travel with a reader to another process.

**Modes** (Spark's ``mode`` option):

- ``PERMISSIVE`` (the default): one output row per record. The values of a malformed record
  that cannot be read are null (those that can are kept, as in Spark), and its raw text is in
  ``corrupt_column`` when one is given (null for well-formed records).
- ``DROPMALFORMED``: malformed records are left out of ``result.table``; filter your other
  columns (keys, offsets, timestamps) with ``result.kept_mask()`` to match. A dropped row must
  never go unnoticed: count ``len(result.malformed)`` in your progress metrics (Spark's
  ``numRowsDroppedByParseMode``) and log where the first one was.
- ``FAILFAST``: the first malformed record raises :class:`~microbatch.errors.MalformedJsonError`;
  its ``record`` says which record and why. Raise your connector's own error from it, naming
  where the record came from (topic, partition and offset; file and line).

**Malformed** is: invalid UTF-8; invalid JSON (two documents in one record count, as Spark
counts them); a document that is not an object (``[1]``, ``"x"``, ``null``); a value its
column's type cannot read (the JSON type must match: a number for INT or DOUBLE, a string for
STRING, an ISO-8601 string for DATE and TIMESTAMP, an object for STRUCT and MAP, an array for
ARRAY; TIMESTAMP_NTZ text must carry no UTC offset); and a number out of its type's range
(INT overflow, FLOAT beyond its range, which is not made infinite). A null, empty or blank
value is a row of nulls, not malformed; fields that are not in the schema are ignored.

Each :class:`MalformedRecord` is data (row, :class:`MalformedKind`, column, position, line and a
readable message), never a text to be parsed.

**Speed**: clean input is read by one ``pyarrow.json.read_json`` call; only input that fails
is searched for its bad records, and only those are decoded again with the stdlib ``json``
module. MAP columns are always decoded with the stdlib, so they are slower.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from microbatch import _json_decode as engine
from microbatch.errors import ConfigurationError, MalformedJsonError
from microbatch.types import as_schema

__all__ = [
    "JsonDecodeResult",
    "JsonDecoder",
    "MalformedJsonError",
    "MalformedKind",
    "MalformedRecord",
    "lines_safe_for_arrow",
]

Mode = Literal["PERMISSIVE", "DROPMALFORMED", "FAILFAST"]
MODES: tuple[Mode, ...] = ("PERMISSIVE", "DROPMALFORMED", "FAILFAST")

lines_safe_for_arrow = engine.lines_safe_for_arrow


class MalformedKind(StrEnum):
    """Why a record is malformed (a ``str``: ``MalformedKind.BAD_VALUE == "bad_value"``)."""

    INVALID_UTF8 = engine.INVALID_UTF8
    """The bytes are not UTF-8; ``position`` is the offset of the first bad byte."""
    INVALID_JSON = engine.INVALID_JSON
    """Not one JSON document (syntax error, truncated, more than one document, nested too
    deeply); ``position`` is the offset of the character where it fails, when known."""
    NOT_AN_OBJECT = engine.NOT_AN_OBJECT
    """Valid JSON, but not an object: ``[1, 2]``, ``"text"``, ``5``, ``null``."""
    BAD_VALUE = engine.BAD_VALUE
    """The value of ``column`` cannot be read as its type: another JSON type (``"x"`` for
    INT), text that is no date or timestamp, TIMESTAMP_NTZ text with a UTC offset."""
    OUT_OF_RANGE = engine.OUT_OF_RANGE
    """The number in ``column`` does not fit its type (INT overflow, FLOAT range, DECIMAL
    precision)."""


@dataclass(frozen=True)
class MalformedRecord:
    """One malformed record (``dataclasses.asdict`` turns it into JSON-able data)."""

    row: int
    """Index of the record in the input: the value's index for :meth:`JsonDecoder.decode_values`,
    the index among the non-blank lines for :meth:`JsonDecoder.decode_lines`."""
    kind: MalformedKind
    message: str
    """A readable reason, e.g. ``column 'id': cannot read "x" as BIGINT``. It may quote a
    short preview of the bad value, never the whole record."""
    column: str | None = None
    """The top-level schema column whose value is bad (BAD_VALUE, OUT_OF_RANGE), else None."""
    position: int | None = None
    """Byte (INVALID_UTF8) or character (INVALID_JSON) offset in the record, when known."""
    line: int | None = None
    """:meth:`JsonDecoder.decode_lines` only: the line number, counted from ``first_line``."""


@dataclass(frozen=True)
class JsonDecodeResult:
    """What one ``decode_*`` call gives."""

    table: pa.Table
    """The decoded rows, with the columns of :attr:`JsonDecoder.schema` (plus the corrupt
    column, when the decoder has one)."""
    malformed: tuple[MalformedRecord, ...]
    """The malformed records, by row (empty when every record was well formed)."""
    records: int
    """How many records the input held (values, or non-blank lines)."""
    dropped: bool = False
    """Whether the malformed records were left out of :attr:`table` (``DROPMALFORMED``)."""

    def kept_mask(self) -> pa.BooleanArray:
        """True for each input record that has a row in :attr:`table`, in order: filter the
        caller's other columns with it (``batch.filter(result.kept_mask())``)."""
        dropped = [record.row for record in self.malformed] if self.dropped else []
        kept: pa.BooleanArray = pc.invert(engine.mask(self.records, dropped))
        return kept


class JsonDecoder:
    """Decodes JSON objects into Arrow columns of ``schema`` with a parse ``mode``.

    ``schema`` is a ``pyarrow.Schema`` or a DDL string (``"id BIGINT, tags ARRAY<STRING>"``);
    its columns come out nullable, in its order. ``mode`` is ``PERMISSIVE``,
    ``DROPMALFORMED`` or ``FAILFAST`` (any case). ``corrupt_column`` names a STRING column
    added after the schema's columns that holds the raw text of each malformed record in
    ``PERMISSIVE`` mode (always null in the other modes, where no malformed record is kept).
    Raises ``ConfigurationError`` (``SchemaError`` for the schema) for settings that cannot
    work: an unknown mode, a corrupt column that is also a schema column, a MAP whose keys are
    not strings.

    ``schema`` (the output columns, the corrupt column included), ``mode`` (upper case) and
    ``corrupt_column`` are read-only attributes.
    """

    def __init__(
        self, schema: pa.Schema | str, mode: str = "PERMISSIVE", corrupt_column: str | None = None
    ) -> None:
        parsed = as_schema(schema)
        upper = str(mode).upper()
        if upper not in MODES:
            raise ConfigurationError(
                f"Unknown JSON parse mode {mode!r}; use one of {', '.join(MODES)}"
            )
        if corrupt_column is not None and corrupt_column in parsed.names:
            raise ConfigurationError(
                f"The corrupt record column '{corrupt_column}' is also a column of the schema; "
                "choose another name, e.g. '_corrupt_record'"
            )
        core = engine.Engine(parsed)
        fields = list(core.fields)
        if corrupt_column is not None:
            fields.append(pa.field(corrupt_column, pa.string()))
        self.schema = pa.schema(fields)
        self.mode = upper
        self.corrupt_column = corrupt_column
        self._engine = core

    def __reduce__(self) -> tuple[Any, ...]:
        return (JsonDecoder, (self._data_schema(), self.mode, self.corrupt_column))

    def __repr__(self) -> str:
        return (
            f"JsonDecoder({engine.type_text(pa.struct(self._data_schema()))}, "
            f"mode={self.mode!r}, corrupt_column={self.corrupt_column!r})"
        )

    def decode_values(self, values: pa.Array | pa.ChunkedArray) -> JsonDecodeResult:
        """Decode one JSON object per value of ``values`` (string or binary).

        ``MalformedRecord.row`` is the value's index. Raises ``MalformedJsonError`` in
        ``FAILFAST`` mode (for the first malformed value) and ``TypeError`` for an array of
        another type.
        """
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not engine.is_text(values.type):
            raise TypeError(
                f"JsonDecoder decodes string or binary values, not {values.type}; cast them first"
            )
        lines, bad = engine.json_lines(values)
        if len(lines):
            columns, errors = self._engine.decode(lines)
        else:
            columns, errors = {f.name: pa.array([], f.type) for f in self._engine.fields}, {}
        for row, problem in errors.items():
            bad[row] = bad.get(row) or problem
        return self._finish(values, lines, columns, bad)

    def decode_lines(self, data: bytes, first_line: int = 1) -> JsonDecodeResult:
        """Decode a block of JSON Lines text: whole lines (as read from a file or a blob), one
        object per line.

        Blank lines are skipped (they are no records) and a line's trailing CR is removed;
        ``MalformedRecord.row`` counts the non-blank lines and ``MalformedRecord.line`` is the
        line number, the block's first line being ``first_line``. A clean block is read by
        one ``pyarrow.json.read_json`` call without being split into lines. Raises
        ``MalformedJsonError`` in ``FAILFAST`` mode, with the line number.
        """
        if not data.strip():
            return JsonDecodeResult(self.schema.empty_table(), (), 0)
        table = self._engine.read_lines(data)
        if table is not None:
            return JsonDecodeResult(self._with_corrupt(table, table.num_rows), (), table.num_rows)
        texts, numbers = engine.split_lines(data, first_line)
        try:
            result = self.decode_values(pa.array(texts, pa.binary()))
        except MalformedJsonError as error:
            record = replace(error.record, line=numbers[error.record.row])
            raise MalformedJsonError(record) from None
        lined = tuple(replace(r, line=numbers[r.row]) for r in result.malformed)
        return replace(result, malformed=lined)

    def _finish(
        self, source: pa.Array, lines: pa.Array, columns: dict[str, pa.Array], bad: engine.Bad
    ) -> JsonDecodeResult:
        count = len(source)
        if not bad:
            return JsonDecodeResult(self._table(columns, None, count), (), count)
        if self.mode == "FAILFAST":
            row = min(bad)
            raise MalformedJsonError(self._record(row, bad[row] or self._reason(source, row)))
        rows = sorted(bad)
        if self.mode == "PERMISSIVE":
            fixed, found = self._engine.python(lines.take(pa.array(rows, pa.int64())).to_pylist())
            for f, values in zip(self._engine.fields, fixed, strict=True):
                columns[f.name] = engine.patch(columns[f.name], rows, values)
            for index, row in enumerate(rows):
                bad[row] = bad[row] or found.get(index)
        malformed = tuple(self._record(row, bad[row] or self._reason(source, row)) for row in rows)
        if self.mode == "PERMISSIVE":
            texts = engine.corrupt_texts(source, rows) if self.corrupt_column else None
            return JsonDecodeResult(self._table(columns, texts, count), malformed, count)
        table = self._table(columns, None, count).filter(pc.invert(engine.mask(count, rows)))
        return JsonDecodeResult(table, malformed, count, dropped=True)

    def _table(self, columns: dict[str, pa.Array], texts: pa.Array | None, rows: int) -> pa.Table:
        arrays = [columns[f.name] for f in self._engine.fields]
        if self.corrupt_column is not None:
            arrays.append(pa.nulls(rows, pa.string()) if texts is None else texts)
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def _with_corrupt(self, table: pa.Table, rows: int) -> pa.Table:
        if self.corrupt_column is None:
            return table
        return table.append_column(self.schema.field(-1), pa.nulls(rows, pa.string()))

    def _reason(self, source: pa.Array, row: int) -> engine.Problem:
        return self._engine.reason(engine.raw_text(source, row))

    def _record(self, row: int, problem: engine.Problem) -> MalformedRecord:
        kind, message, column, position = problem
        return MalformedRecord(row, MalformedKind(kind), message, column, position)

    def _data_schema(self) -> pa.Schema:
        fields = list(self.schema)
        return pa.schema(fields[:-1] if self.corrupt_column is not None else fields)
