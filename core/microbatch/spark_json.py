"""One JSON record read the way Spark 4's JSON reader reads it, into a pyarrow schema's values.

:class:`SparkJsonReader` reads one record (a line of a JSON Lines file, or a whole
``multiLine`` document) with Spark's JSON options (:class:`SparkJsonOptions`) and gives the
rows Spark gives, or says why the record is malformed and which values Spark keeps of it::

    reader = SparkJsonReader(schema, SparkJsonOptions(allow_comments=True), parse_datetime)
    result = reader.read(b'{"id": 1, /* c */ "tags": [\\'a\\']}')
    result.rows        # [{"id": 1, "tags": ["a"]}]
    result.malformed   # None, or e.g. "column 'id': cannot read \\"x\\" as BIGINT"
    result.partial     # for a malformed record: the rows PERMISSIVE mode emits for it

It is the slow path of JSON decoding, for records ``pyarrow.json`` rejects or options it cannot
honour; a reader keeps no state between records, so threads may share one.

**Grammar** (Jackson's, as Spark sets it up): single quotes are allowed by default, the other
leniencies with their options; ``NaN``, ``Infinity``, ``+Infinity``, ``-Infinity``, ``+INF`` and
``-INF`` are numbers. Only the first document is read (``{"a":1} xyz`` is ``{"a":1}``); a blank
record gives no row, a top-level array a row per element. Nesting deeper than 1,000 levels,
numbers of more than 1,000 digits and names of more than 50,000 bytes are malformed.

**Values** are converted as Spark converts them (see :class:`SparkJsonReader`), with one
difference: Spark reads a number as TIMESTAMP epoch seconds, here it is malformed.

**Malformed records in PERMISSIVE mode** keep what Spark keeps: a value its column cannot hold
is null and the other columns (those after it too) are read, as are the good fields of a
STRUCT, or of the STRUCTs in an ARRAY or MAP. Invalid JSON or UTF-8 and documents that are not
objects give a row of nulls, but after a syntax error inside a column's value Spark reads on
from where Jackson stopped; this reader stops where Jackson does, so it keeps the same columns.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import pyarrow as pa

from microbatch import _json_decode as engine
from microbatch._spark_json_tokens import (
    BAD_VALUE,
    BIG_DECIMAL,
    END_ARRAY,
    END_OBJECT,
    FIELD_NAME,
    INVALID_JSON,
    INVALID_UTF8,
    NOT_AN_OBJECT,
    OUT_OF_RANGE,
    SPECIAL,
    START_ARRAY,
    START_OBJECT,
    VALUE_FALSE,
    VALUE_FLOAT,
    VALUE_INT,
    VALUE_NULL,
    VALUE_STRING,
    VALUE_TRUE,
    Bad,
    Lexer,
)
from microbatch.errors import SchemaError
from microbatch.types import as_schema

__all__ = ["RecordResult", "SparkJsonOptions", "SparkJsonReader"]

ParseDatetime = Callable[[pa.DataType, str], Any]
Convert = Callable[[Lexer], Any]

_DECIMALS = Context(prec=2100, rounding=ROUND_HALF_UP)
_RANGES = {8: (-128, 255), 16: (-(1 << 15), (1 << 15) - 1), 32: (-(1 << 31), (1 << 31) - 1)}


@dataclass(frozen=True, kw_only=True)
class SparkJsonOptions:
    """Spark's JSON reader options, in snake_case, with Spark's defaults."""

    allow_comments: bool = False
    """``/* ... */`` and ``// ...`` comments (not ``#``) wherever whitespace may be."""
    allow_unquoted_field_names: bool = False
    """Field names without quotes, made of letters, digits and ``_ $ @ # * + -``."""
    allow_single_quotes: bool = True
    """Strings and names in single quotes; ``\\'`` is then a valid escape."""
    allow_numeric_leading_zeros: bool = False
    """Numbers such as ``007`` (read as 7)."""
    allow_backslash_escaping_any_character: bool = False
    """``\\`` before any character stands for that character (``"\\q"`` is ``q``)."""
    allow_unquoted_control_chars: bool = False
    """Raw control characters (tab, ...) inside strings."""
    allow_non_numeric_numbers: bool = True
    """``NaN`` and the infinities, as numbers and as strings for FLOAT and DOUBLE."""
    primitives_as_string: bool = False
    """Schema inference only: reading with a schema ignores it, as Spark does."""
    prefers_decimal: bool = False
    """Schema inference only: reading with a schema ignores it, as Spark does."""


@dataclass(frozen=True)
class RecordResult:
    """What :meth:`SparkJsonReader.read` gives for one record."""

    rows: list[dict[str, Any]]
    """The rows of a well-formed record (none for a blank record or an empty array), each a
    dict of all schema columns in order. Empty when the record is malformed."""
    malformed: str | None = None
    """Why the record is malformed, naming the column when a value is the problem; or None."""
    partial: list[dict[str, Any]] = field(default_factory=list)
    """For a malformed record, the rows Spark's PERMISSIVE mode emits (each with the record's
    text in the corrupt-record column): the values it keeps and nulls, a row of nulls when it
    keeps none, a row per element of a top-level array."""
    kind: str | None = None
    """The kind of problem: a :class:`~microbatch.json_decoder.MalformedKind` value."""
    column: str | None = None
    """The top-level column whose value is the problem, when one is."""
    position: int | None = None
    """Where the text goes wrong, when known: a byte offset for invalid UTF-8, else a
    character offset."""


class _Partial(Exception):
    """A STRUCT, ARRAY or MAP (or the rows of a top-level array, ``rows``) with a bad part:
    ``value`` is what could be read."""

    def __init__(self, value: Any, cause: Bad, rows: bool = False) -> None:
        super().__init__(cause.message)
        self.value, self.cause, self.rows = value, cause, rows


def _float32(text: str, value: float) -> float:
    """``text`` (whose double is ``value``) rounded once to FLOAT, as Java's parseFloat."""
    try:
        rounded = float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)
    if rounded == value or math.isinf(rounded) or math.isnan(value):
        return rounded
    bits = struct.unpack("<I", struct.pack("<f", rounded))[0]
    bits += 1 if abs(value) > abs(rounded) else -1  # the float on the other side of value
    other = float(struct.unpack("<f", struct.pack("<I", bits))[0])
    middle = (rounded + other) / 2
    if middle != value or Fraction(text) == Fraction(middle):
        return rounded  # not a tie in double, or a true tie: the double rounding is right
    return max(rounded, other) if Fraction(text) > Fraction(middle) else min(rounded, other)


# -- the reader ------------------------------------------------------------------------------
class SparkJsonReader:
    """Reads single JSON records into values of ``schema`` as Spark 4's JSON reader does.

    ``schema`` is a ``pyarrow.Schema`` (or a DDL string) of BOOLEAN, integer, FLOAT, DOUBLE,
    DECIMAL, STRING, BINARY, DATE, TIMESTAMP, STRUCT, ARRAY and MAP<STRING, ...> columns;
    another type raises ``SchemaError``. ``parse_datetime(arrow_type, text)`` gives the value
    of the non-empty text of a DATE or TIMESTAMP, or None when it cannot read it.

    Values are Python objects ``pyarrow.array`` takes (a dict per STRUCT, a list of (key, value)
    pairs per MAP). A repeated key keeps its last value; a MAP keeps every entry. STRING takes
    another value as its exact source text (``1.00``, ``{"b": [1, 2]}``); integers take integer
    numbers in range (TINYINT also 128..255, wrapped as Jackson does: 200 is -56); FLOAT and
    DOUBLE numbers and the strings ``"NaN"``, ``"Infinity"``, ``"+Infinity"``, ``"-Infinity"``,
    ``"+INF"``, ``"-INF"``; DECIMAL numbers and numeric strings (commas dropped), rounded half
    up, malformed beyond its precision; BINARY padded base64; DATE and TIMESTAMP only text. An
    empty string is malformed but for STRING and BINARY.
    """

    def __init__(
        self, schema: pa.Schema | str, options: SparkJsonOptions, parse_datetime: ParseDatetime
    ) -> None:
        self.schema = as_schema(schema)
        self.options = options
        self.parse_datetime = parse_datetime
        self._names = list(self.schema.names)
        columns = {f.name: self._converter(f.type, f.name, f.name) for f in self.schema}
        self._row = _struct(self._names, columns)

    def read(self, record: bytes) -> RecordResult:
        """The rows of one record, or why it is malformed and what Spark keeps of it."""
        lexer = Lexer(record.decode(errors="surrogateescape"), self.options)
        lexer.pos = 1 if lexer.text.startswith("\ufeff") else 0
        try:
            token = lexer.next_token()
            return RecordResult([] if token is None else self._root(lexer, token))
        except _Partial as partial:
            kept = partial.value if partial.rows else [partial.value]
            return self._malformed(partial.cause, kept, lexer.text)
        except Bad as bad:  # the first problem is the one to tell, when one was passed over
            return self._malformed(lexer.first or bad, [dict.fromkeys(self._names)], lexer.text)
        except RecursionError:
            deep = Bad(INVALID_JSON, "invalid JSON: nested too deeply")
            return self._malformed(deep, [dict.fromkeys(self._names)], lexer.text)

    def _malformed(self, bad: Bad, kept: list[Any], text: str) -> RecordResult:
        position = bad.position
        if position is not None and bad.kind == INVALID_UTF8:
            position = len(text[:position].encode(errors="surrogateescape"))
        return RecordResult([], bad.message, kept, bad.kind, bad.column, position)

    def _root(self, lexer: Lexer, token: int) -> list[dict[str, Any]]:
        if token == START_ARRAY:
            return _array(lexer, self._element, rows=True)
        return [self._element(lexer)]

    def _element(self, lexer: Lexer) -> Any:
        """A row: the document, or an element of a top-level array."""
        if lexer.cur == START_OBJECT:
            return self._row(lexer)
        if lexer.cur == VALUE_STRING:
            lexer.string()
        raise Bad(NOT_AN_OBJECT, f"expected a JSON object, got {lexer.describe(lexer.cur)}")

    def _converter(self, dtype: pa.DataType, column: str, path: str) -> Convert:
        """Spark's converter for ``dtype``: it takes the lexer on a field name or a value."""
        if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
            return _text
        return _Value(self, dtype, column, path).read


def _text(lexer: Lexer) -> str | None:
    """STRING: a string's text, any other value's exact source text."""
    token = lexer.next_token() if lexer.cur == FIELD_NAME else lexer.cur
    if token == VALUE_STRING:
        return lexer.string()
    if token is None or token == VALUE_NULL:
        return None
    start = lexer.start
    lexer.skip_children()
    return lexer.raw(start)


def _struct(names: list[str], fields: dict[str, Convert]) -> Convert:
    """Spark's convertObject: a bad field is null and the others are read on."""

    def read(lexer: Lexer) -> dict[str, Any]:
        row = dict.fromkeys(names)
        cause: Bad | None = None
        while True:
            token = lexer.next_token()
            if token is None or token == END_OBJECT:
                break
            name = lexer.ctx[2] if token == FIELD_NAME else lexer.current_name()
            convert = None if name is None else fields.get(name)
            if convert is None:
                lexer.skip_children()
                continue
            try:
                row[name] = convert(lexer)  # type: ignore[index]
            except _Partial as partial:
                cause = cause or partial.cause
                row[name] = partial.value  # type: ignore[index]
            except Bad as bad:
                cause, lexer.first = cause or bad, lexer.first or bad
                lexer.skip_children()
        if cause is not None:
            raise _Partial(row, cause)
        return row

    return read


def _array(lexer: Lexer, element: Convert, rows: bool = False) -> list[Any]:
    """Spark's convertArray: only a partly bad STRUCT, ARRAY or MAP element is kept."""
    values: list[Any] = []
    cause: Bad | None = None
    while True:
        token = lexer.next_token()
        if token is None or token == END_ARRAY:
            break
        try:
            values.append(element(lexer))
        except _Partial as partial:
            cause = cause or partial.cause
            values.append(partial.value)
    if cause is not None:
        raise _Partial(values, cause, rows)
    return values


def _map(lexer: Lexer, value: Convert) -> list[tuple[str, Any]]:
    """Spark's convertMap: all entries in order, repeated keys too; a bad value makes the map
    null, a partly bad STRUCT value is kept."""
    entries: list[tuple[str, Any]] = []
    cause: Bad | None = None
    failed: Bad | None = None
    while True:
        token = lexer.next_token()
        if token is None or token == END_OBJECT:
            break
        key = lexer.current_name()
        try:
            item = value(lexer)
        except _Partial as partial:
            cause, item = cause or partial.cause, partial.value
        except Bad as bad:
            failed, lexer.first = failed or bad, lexer.first or bad
            lexer.skip_children()
            continue
        if key is None:  # only after a bad value, as Spark's parser reads on: no map then
            failed = failed or Bad(BAD_VALUE, "a map entry without a key")
        else:
            entries.append((key, item))
    if failed is not None:
        raise failed
    if cause is not None:
        raise _Partial(entries, cause)
    return entries


class _Value:
    """Spark's converter for a value of one type (but STRING) at ``path`` in ``column``."""

    def __init__(self, reader: SparkJsonReader, dtype: pa.DataType, column: str, path: str) -> None:
        self.dtype, self.column, self.path = dtype, column, path
        self.label, self.parse = engine.type_text(dtype), reader.parse_datetime
        types, convert = pa.types, reader._converter
        self.readers: dict[int, Convert]
        if types.is_struct(dtype):
            fields = {f.name: convert(f.type, column, f"{path}.{f.name}") for f in dtype}
            self.readers = {START_OBJECT: _struct([f.name for f in dtype], fields)}
        elif types.is_list(dtype) or types.is_large_list(dtype):
            element = convert(dtype.value_type, column, f"{path}[]")
            self.readers = {START_ARRAY: lambda lexer: _array(lexer, element)}
        elif types.is_map(dtype) and types.is_string(dtype.key_type):
            value = convert(dtype.item_type, column, f"{path}{{}}")
            self.readers = {START_OBJECT: lambda lexer: _map(lexer, value)}
        elif types.is_boolean(dtype):
            self.readers = {VALUE_TRUE: lambda lexer: True, VALUE_FALSE: lambda lexer: False}
        elif types.is_signed_integer(dtype):
            self.bounds = _RANGES.get(dtype.bit_width, (-(1 << 63), (1 << 63) - 1))
            self.readers = {VALUE_INT: self.integer}
        elif types.is_floating(dtype) and dtype.bit_width > 16:
            self.specials = SPECIAL if reader.options.allow_non_numeric_numbers else {}
            self.readers = dict.fromkeys((VALUE_INT, VALUE_FLOAT, VALUE_STRING), self.floating)
        elif types.is_decimal(dtype):
            self.quantum = Decimal(1).scaleb(-dtype.scale)
            self.readers = dict.fromkeys((VALUE_INT, VALUE_FLOAT, VALUE_STRING), self.decimal)
        elif types.is_binary(dtype) or types.is_large_binary(dtype):
            self.readers = {VALUE_STRING: self.binary}
        elif types.is_date(dtype) or types.is_timestamp(dtype):
            self.readers = dict.fromkeys((VALUE_INT, VALUE_FLOAT, VALUE_STRING), self.datetime)
        else:
            raise SchemaError(f"Column '{column}': Spark's JSON reader cannot read {self.label}")

    def read(self, lexer: Lexer) -> Any:
        """Spark's parseJsonToken: past the field name, null for null, else the reader for
        the token; without one the value is malformed."""
        token = lexer.next_token() if lexer.cur == FIELD_NAME else lexer.cur
        if token is None or token == VALUE_NULL:
            return None
        read = self.readers.get(token)
        if read is not None:
            return read(lexer)
        if token == VALUE_STRING and not lexer.string():
            raise self.wrong("an empty string")
        raise self.wrong(lexer.describe(token))

    def wrong(self, what: str, kind: str = BAD_VALUE) -> Bad:
        return Bad(kind, f"column '{self.path}': cannot read {what} as {self.label}", self.column)

    def text(self, lexer: Lexer) -> str:
        """A string's text; an empty one is malformed."""
        found = lexer.string()
        if not found:
            raise self.wrong("an empty string")
        return found

    def integer(self, lexer: Lexer) -> int:
        value = int(lexer.num)
        if not self.bounds[0] <= value <= self.bounds[1]:
            raise self.wrong(lexer.num[:80], OUT_OF_RANGE)
        return value - 256 if self.bounds[1] == 255 and value > 127 else value  # Jackson's byte

    def floating(self, lexer: Lexer) -> float:
        if lexer.cur == VALUE_STRING:
            found = self.text(lexer)
            if found not in self.specials:
                raise self.wrong(engine.preview(found))
            return self.specials[found]
        if lexer.special is not None:
            return lexer.special
        try:
            value = float(int(lexer.num) if lexer.cur == VALUE_INT else lexer.num)
        except OverflowError:  # an integer beyond DOUBLE: infinite, as in Java
            value = -math.inf if str(lexer.num).startswith("-") else math.inf
        return _float32(lexer.num, value) if self.dtype.bit_width == 32 else value

    def decimal(self, lexer: Lexer) -> Decimal:
        if lexer.cur == VALUE_STRING:  # Spark drops commas, then takes Java's BigDecimal text
            shown = engine.preview(found := self.text(lexer))
            digits = found.replace(",", "")
            if not BIG_DECIMAL.fullmatch(digits):
                raise self.wrong(shown)
        elif lexer.special is not None:
            raise self.wrong(lexer.num)
        else:
            digits, shown = lexer.num, lexer.num[:80]
        try:
            value = Decimal(digits).quantize(self.quantum, context=_DECIMALS)
        except InvalidOperation:
            raise self.wrong(shown, OUT_OF_RANGE) from None
        if len(value.as_tuple().digits) > self.dtype.precision:
            raise self.wrong(shown, OUT_OF_RANGE)
        return value if value else value.copy_abs()  # no negative zero, as in Java

    def binary(self, lexer: Lexer) -> bytes:
        value = lexer.binary()
        if value is None:
            raise self.wrong("the string (not padded base64)")
        return value

    def datetime(self, lexer: Lexer) -> Any:
        if lexer.cur != VALUE_STRING:  # Spark reads a number as TIMESTAMP epoch seconds
            raise self.wrong(f"the number {lexer.num[:80]} (write {self.label} values as text)")
        found = self.text(lexer)
        try:
            value = self.parse(self.dtype, found)
        except (ValueError, OverflowError):
            value = None
        if value is None:
            raise self.wrong(engine.preview(found))
        return value
