"""JSON files read as Spark 4 reads them: blocks of JSON Lines records and multiLine documents.

Records are split as Spark splits them: at ``\\n``, ``\\r\\n`` and ``\\r`` by default, only at
``lineSep`` when it is set. Each record is read by
:class:`~microbatch.spark_json.SparkJsonReader` rules (Spark's grammar and options, its values
and what PERMISSIVE mode keeps of a malformed record), but most of them never go through it:

1. **The fast path.** A block whose records all start with ``{`` is read by one
   ``pyarrow.json.read_json`` call with the schema (DATE and TIMESTAMP columns as text, then
   parsed vectorised by :class:`~microbatch.spark_datetime.DatetimeParser`; FLOAT as DOUBLE,
   then rounded). pyarrow's grammar is strict JSON, which Spark reads alike, so a row it gives
   is Spark's row. When it fails, Arrow kernels split the block into records and set aside
   those of a visibly wrong shape or type; pyarrow reads the others in one call, and a record
   it still rejects is found from the row its error names (or, failing that, by reading the
   records again in sixteen parts, down to a few records).
2. **The slow path.** The other records go to ``SparkJsonReader``, in order, each giving 0..n
   rows: what pyarrow rejects (invalid JSON, single quotes, comments, trailing text, repeated
   keys, a value of another JSON type, top-level arrays, invalid UTF-8...), the rows whose
   datetime text the vectorised parser rejects, FLOAT values that pyarrow would round twice,
   and text whose meaning pyarrow does not share (``-NaN``; ``NaN`` and ``Infinity`` when
   allowNonNumericNumbers is off). Columns that pyarrow cannot read as Spark does (MAP,
   BINARY, datetimes or FLOAT inside a STRUCT or ARRAY) send every record there.

A multiLine file is one record, read by ``SparkJsonReader``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from microbatch.spark_datetime import DatetimeParser
from microbatch.spark_json import RecordResult, SparkJsonOptions, SparkJsonReader

from ._datetimes import DatetimeOptions
from ._parse_modes import CORRUPT, DropCounter, MalformedRecordError, failfast_error
from ._records import count_separators, row_mask, split_records

__all__ = ["JsonReading", "JsonSettings", "json_reading"]

_BLOCK = 1 << 20
"""The block size of ``read_json`` (it reads larger inputs on several threads)."""
_PARTS = 16
"""A list of records that fails to read is split in this many parts to find the bad ones..."""
_FEW = 8
"""... and a failing part this small goes to the slow path whole."""
_SCANS = 3
"""Reads of a list of records, each after the bad ones pyarrow named, before splitting it."""
_ROW_OF_ERROR = re.compile(r" in row (\d+)$")
_READ_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, ValueError)
_ENCODED_SURROGATE = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]?")
_BLANK = b" \t\r\n"
_BLANK_TEXT = _BLANK.decode()
_EMPTY_OBJECT = pa.scalar("{}")
_NEWLINE = pa.scalar("\n")
_TWO = pa.scalar(2.0)
_ONE, _ZERO_FLOAT = pa.scalar(1.0), pa.scalar(0.0)
_FLOAT32, _FLOAT64 = pa.float32(), pa.float64()
_FLOAT32_TINY = pa.scalar(2.0**-126)
_TIMESTAMP, _NTZ = pa.timestamp("us", tz="UTC"), pa.timestamp("us")

_DATE = r"[1-9]\d{3}-\d{2}-\d{2}"
_TIME = r"[T ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?"
_OFFSET = r"(Z|[+-](0\d|1[0-7])(:?[0-5]\d)?|[+-]18(:?00)?)"
_ISO_ZONED = f"^{_DATE}{_TIME}{_OFFSET}$"
_ISO_LOCAL = f"^{_DATE}{_TIME}$"
_ISO_DATE = f"^{_DATE}$"
"""The ISO shapes that pyarrow's cast reads exactly as Spark's default datetime parsing does
(other text, and text the cast refuses, is parsed by DatetimeParser)."""
_TWO_DOCUMENTS = r"\}[ \t\r]*[^,}\] \t\r\n]"
"""Where a record may hold more after its document (``{"a": 1} {"a": 2}``, ``{} null``),
which pyarrow reads as more rows; or a string holds such text."""
_SHORTEST_UTC = len("2000-01-01T00:00:00Z")


@dataclass(frozen=True)
class JsonSettings:
    """The JSON options of one source, as the reader needs them (picklable, hashable)."""

    options: SparkJsonOptions = field(default_factory=SparkJsonOptions)
    """Spark's grammar and inference options."""
    datetimes: DatetimeOptions = field(default_factory=DatetimeOptions)
    """timestampFormat, timestampNTZFormat, dateFormat and timeZone."""
    line_sep: str | None = None
    """The record separator; None: ``\\n``, ``\\r\\n`` or ``\\r``."""
    drop_field_if_all_null: bool = False
    """Schema inference: leave out columns whose values are all null (or empty arrays)."""
    corrupt_name: str = "_corrupt_record"
    """Schema inference in PERMISSIVE mode: the column malformed records add."""
    encoding: str | None = None
    """The files' charset; None: UTF-8 (a multiLine file: as Jackson detects it)."""

    @property
    def separator(self) -> bytes | None:
        return None if self.line_sep is None else self.line_sep.encode()


def _arrow_exact(dtype: pa.DataType, top: bool = True) -> bool:
    """Whether pyarrow's reader gives Spark's values of ``dtype`` for every value it accepts
    (a DECIMAL only as a column of its own: pyarrow does not check that a value fits its
    precision, which :meth:`_Fast.convert` does for columns)."""
    types = pa.types
    if isinstance(dtype, pa.StructType):
        return all(_arrow_exact(f.type, top=False) for f in dtype)
    if isinstance(dtype, pa.ListType):
        return _arrow_exact(dtype.value_type, top=False)
    return bool(
        types.is_boolean(dtype)
        or types.is_signed_integer(dtype)
        or dtype == _FLOAT64
        or types.is_string(dtype)
        or (top and types.is_decimal128(dtype))
    )


def _datetime_parser(datetimes: DatetimeOptions, dtype: pa.DataType) -> DatetimeParser | None:
    """The parser of a DATE or TIMESTAMP column (of any unit or zone: the Spark type it
    stands for); None for another type."""
    if pa.types.is_timestamp(dtype):
        return datetimes.parser(pa.timestamp("us", tz="UTC" if dtype.tz else None))
    if pa.types.is_date(dtype):
        return datetimes.parser(pa.date32())
    return None


class _Fast:
    """pyarrow's reader for a schema whose columns it reads as Spark does."""

    def __init__(self, schema: pa.Schema, settings: JsonSettings) -> None:
        self.schema = schema
        self.parsers: dict[str, DatetimeParser] = {}
        fields = []
        for f in schema:
            parser = _datetime_parser(settings.datetimes, f.type)
            if parser is not None:
                self.parsers[f.name] = parser
                fields.append(f.with_type(pa.string()))
            elif f.type == _FLOAT32:
                fields.append(f.with_type(_FLOAT64))
            elif _arrow_exact(f.type):
                fields.append(f)
            else:
                raise TypeError(f"pyarrow cannot read {f.type} as Spark does")
        self.read_schema = pa.schema(fields)
        self.parse = pajson.ParseOptions(
            explicit_schema=self.read_schema,
            unexpected_field_behavior="ignore",
            newlines_in_values=False,
        )
        nonnumeric = settings.options.allow_non_numeric_numbers
        self.suspects = ("-NaN", "Inf(?:[^i]|$)") if nonnumeric else ("NaN", "Inf", "INF")
        """Text pyarrow reads otherwise than Spark (regular expressions): records holding it
        take the slow path. pyarrow reads NaN, Inf, Infinity and -NaN; Jackson, with
        allowNonNumericNumbers, NaN, Infinity and INF with or without a sign. (Each starts
        with its literal text, which pyarrow finds at memchr speed: an alternation it does
        not, 40 times slower.)"""
        self._suspect = re.compile("|".join(self.suspects).encode())
        self.mistyped = _mistyped_pattern(schema, self.parsers)
        """Where a record shows a value of another type than its column's (see
        :func:`_mistyped_pattern`)."""

    @classmethod
    def make(cls, schema: pa.Schema, settings: JsonSettings) -> _Fast | None:
        try:
            return cls(schema, settings)
        except TypeError:
            return None

    def suspect(self, record: bytes) -> bool:
        return self._suspect.search(record) is not None

    def read_whole(self, data: bytes) -> pa.Table | None:
        """A block of records in one call, when each starts with "{" and pyarrow reads them
        all, one row each; else None."""
        if data[:1] != b"{":
            return None
        text = _text(data)
        if text is None:
            return None  # not UTF-8, which read_json does not check inside strings
        if _has(text, r"\n[^{]") or (b"\r" in data and _has(text, r"\r[^\n{]")):
            return None  # a record starts otherwise than with "{" (or is blank)
        if any(_has(text, suspect) for suspect in self.suspects):
            return None
        if _has(text, _TWO_DOCUMENTS):
            return None  # maybe a record of several documents ({"a":1}{"a":2}): pyarrow
            # would read a row of each
        table = self._read(data)
        if table is None or table.num_rows != _record_count(data):
            return None  # a document across lines ({"a":\n{"b":1}}): pyarrow reads one row
        return table

    def read_records(self, records: list[bytes]) -> tuple[pa.Table, set[int]]:
        """Records that each start with "{", end with "}" and hold no line break: a row for
        each (nulls for the bad ones) and the bad ones, which pyarrow cannot read."""
        bad: set[int] = set()
        binary = pa.array(records, pa.binary())
        try:
            lines = binary.cast(pa.string())
        except pa.ArrowInvalid:
            bad = {row for row, record in enumerate(records) if not _utf8(record)}
            lines = pc.if_else(row_mask(len(records), bad), _EMPTY_OBJECT, binary).cast(pa.string())
        table, rejected = self.read_lines(lines)
        return table, bad | rejected

    def read_lines(self, lines: pa.Array) -> tuple[pa.Table, set[int]]:
        """:meth:`read_records` of records as a STRING array.

        A read that fails names the row where pyarrow stopped; the rows after it are read
        again, and so on, a call for each bad record (most of them were screened out before).
        A failure that names no row, or names rows that are read well, leaves the rest to
        :meth:`_isolate`, which reads parts of the records until it has the bad ones."""
        count, bad = len(lines), set[int]()
        current = lines
        for _ in range(_SCANS):
            joined = _joined(current)
            table, error = self._attempt(joined, count)
            if table is not None:
                return table, bad
            found = self._scan(current, joined, error)
            if not found or found <= bad:
                break
            bad |= found
            current = pc.if_else(row_mask(count, bad), _EMPTY_OBJECT, lines)
        bad |= self._isolate(current, 0, count)
        table = self._read_lines(pc.if_else(row_mask(count, bad), _EMPTY_OBJECT, lines))
        if table is None:  # never expected: then pyarrow reads none of them
            bad = set(range(count))
            table = self._read_lines(pa.array(["{}"] * count, pa.string()))
            assert table is not None
        return table, bad

    def _scan(self, lines: pa.Array, joined: pa.Buffer, error: str | None) -> set[int]:
        """The rows pyarrow names as it reads ``joined`` (``lines`` joined by line feeds)
        again and again after each, ``error`` being the first read's failure."""
        count = len(lines)
        offsets = pa.Array.from_buffers(
            pa.int32(), count + 1, [None, lines.buffers()[1]], offset=lines.offset
        )
        base = offsets[0].as_py()
        found: set[int] = set()
        cursor = 0
        while error is not None:
            hint = _ROW_OF_ERROR.search(error)
            row = cursor + int(hint.group(1)) if hint else count
            if row >= count:
                break
            found.add(row)
            cursor = row + 1
            if cursor == count:
                break
            rest = joined.slice(offsets[cursor].as_py() - base + cursor)
            _, error = self._attempt(rest, count - cursor)
        return found

    def _attempt(self, data: pa.Buffer, count: int) -> tuple[pa.Table | None, str | None]:
        """``data`` read in one block (so that an error's row counts from its start): the
        table when it has ``count`` rows, else the error (None: another number of rows)."""
        options = pajson.ReadOptions(use_threads=False, block_size=len(data) + 1)
        try:
            table = pajson.read_json(pa.BufferReader(data), options, self.parse)
        except _READ_ERRORS as error:
            return None, str(error)
        return (table, None) if table.num_rows == count else (None, None)

    def _isolate(self, lines: pa.Array, start: int, stop: int) -> set[int]:
        """The rows of ``lines[start:stop]`` (which fail to read together) pyarrow rejects."""
        if stop - start <= _FEW:
            return set(range(start, stop))
        bad: set[int] = set()
        size = -(-(stop - start) // _PARTS)
        for begin in range(start, stop, size):
            end = min(begin + size, stop)
            if self._read_lines(lines.slice(begin, end - begin)) is None:
                bad |= self._isolate(lines, begin, end)
        return bad

    def _read_lines(self, lines: pa.Array) -> pa.Table | None:
        if not len(lines):
            return self.read_schema.empty_table()
        table = self._read(_joined(lines))
        return table if table is not None and table.num_rows == len(lines) else None

    def _read(self, data: bytes | pa.Buffer) -> pa.Table | None:
        size, block = len(data), _BLOCK
        while True:
            options = pajson.ReadOptions(use_threads=size > 2 * block, block_size=block)
            try:
                return pajson.read_json(pa.BufferReader(data), options, self.parse)
            except _READ_ERRORS as error:
                if "straddling" not in str(error) or block > size:
                    return None
                block = size + 1  # a record longer than a block: one block

    def convert(self, table: pa.Table) -> tuple[pa.Table, list[int]]:
        """The rows as the schema has them, and the rows the slow path must read instead:
        datetime text the vectorised parser rejects, FLOAT values rounded twice, -0.0 (the
        integer -0 is 0.0 for Jackson)."""
        columns, redo = [], None
        for f in self.schema:
            values = table.column(f.name).combine_chunks()
            odd = None
            if f.name in self.parsers:
                values, odd = _datetimes(self.parsers[f.name], values)
                if values.type != f.type:  # another unit or zone
                    values = values.cast(f.type, safe=False)
            elif f.type == _FLOAT32:
                values, odd = _float32(values)
                odd = pc.or_(odd, _negative_zero(values))
            elif f.type == _FLOAT64:
                odd = _negative_zero(values)
            elif pa.types.is_decimal128(f.type) and f.type.precision < 38:
                odd = _beyond_precision(values)  # (38 digits: pyarrow refuses more itself)
            if odd is not None:
                odd = pc.fill_null(odd, False)  # a null value is no problem
                redo = odd if redo is None else pc.or_(redo, odd)
            columns.append(values)
        rows: list[int] = []
        if redo is not None and pc.any(redo).as_py():
            rows = pc.indices_nonzero(redo).to_pylist()
        return pa.Table.from_arrays(columns, schema=self.schema), rows


def _text(data: bytes) -> pa.Array | None:
    """``data`` as a LARGE_STRING array of one value; None when it is not UTF-8."""
    try:
        return pa.array([data], pa.large_binary()).cast(pa.large_string())
    except pa.ArrowInvalid:
        return None


def _text_records(text: pa.Array, data: bytes, line_sep: str | None) -> pa.Array:
    """The records of ``data`` (as ``text``) as a STRING array (see ``split_records``)."""
    if line_sep is not None:
        parts = pc.split_pattern(text, line_sep)
    elif b"\r" in data:
        parts = pc.split_pattern_regex(text, r"\r\n|\r|\n")
    else:
        parts = pc.split_pattern(text, "\n")
    lines = parts.flatten().cast(pa.string())
    if len(lines) and not lines[len(lines) - 1].as_py():
        lines = lines.slice(0, len(lines) - 1)
    return lines


def _mistyped_pattern(schema: pa.Schema, parsers: Mapping[str, Any]) -> str | None:
    """A regular expression found in a record where a column's value has another JSON type
    than pyarrow reads (a string for a number...): such records go to the slow path without
    failing a read first. It may find a few more (a field of a nested object) and miss some
    (a key written with escapes): a read finds those."""
    starts: dict[str, list[str]] = {}
    for f in schema:
        dtype = f.type
        if f.name in parsers or pa.types.is_string(dtype):
            start = '"n'
        elif pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or _decimal(dtype):
            start = "-0-9n"
        elif pa.types.is_boolean(dtype):
            start = "tfn"
        elif pa.types.is_struct(dtype):
            start = "{n"
        elif pa.types.is_list(dtype):
            start = r"\[n"
        else:
            continue
        starts.setdefault(start, []).append("".join(map(_literal, f.name)))
    if not starts:
        return None
    return "|".join(  # (a value starts after the blanks: not a blank itself)
        f'"(?:{"|".join(names)})"[ \t\r]*:[ \t\r]*[^{start} \t\r]'
        for start, names in starts.items()
    )


def _decimal(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_decimal(dtype))


def _literal(char: str) -> str:
    """``char`` in a regular expression (RE2)."""
    return char if char.isalnum() or char == "_" else f"\\x{{{ord(char):x}}}"


def _record_count(data: bytes) -> int:
    """How many records ``data`` holds with the default separators."""
    return count_separators(data, None) + (0 if data.endswith((b"\n", b"\r")) else 1)


def _joined(lines: pa.Array) -> pa.Buffer:
    """The values of a STRING array joined by line feeds."""
    one_list = pa.ListArray.from_arrays(pa.array([0, len(lines)], pa.int32()), lines)
    return pc.binary_join(one_list, _NEWLINE)[0].as_buffer()


def _beyond_precision(values: pa.Array) -> pa.Array:
    """Where a DECIMAL value pyarrow read does not fit its precision (Spark: malformed)."""
    precision, scale = values.type.precision, values.type.scale
    wide = pa.decimal128(38, scale)
    limit = pa.scalar(Decimal(10 ** (precision - scale)), wide)
    return pc.greater_equal(pc.abs(values.cast(wide)), limit)


def _has(text: pa.Array, pattern: str) -> bool:
    """Whether ``pattern`` is found in ``text`` (a regular expression starting with one
    literal character, which pyarrow then finds at memchr speed)."""
    return bool(pc.any(pc.match_substring_regex(text, pattern)).as_py())


def record_text(record: bytes) -> str:
    """A record's bytes as text for the corrupt-record column, as Java decodes them (Spark's
    strings are Java's): bytes that are not UTF-8 become U+FFFD, one for an encoded surrogate
    (ED A0..BF, with its third byte if any) where Python would give one per byte."""
    try:
        return record.decode()
    except UnicodeDecodeError:
        return _ENCODED_SURROGATE.sub("\ufffd".encode(), record).decode(errors="replace")


def _utf8(record: bytes) -> bool:
    try:
        record.decode()
    except UnicodeDecodeError:
        return False
    return True


def _datetimes(parser: DatetimeParser, texts: pa.Array) -> tuple[pa.Array, pa.Array | None]:
    """Datetime text parsed as Spark parses it: the usual ISO shapes by a pyarrow cast, the
    rest by ``parser`` (with the rows it rejects)."""
    if parser.pattern is None:
        cast = _iso_cast(parser, texts)
        if cast is not None:
            return cast, None
    return parser.parse(texts)


def _iso_cast(parser: DatetimeParser, texts: pa.Array) -> pa.Array | None:
    """``texts`` cast by pyarrow when each has a shape it reads as Spark's default parsing does
    (a zone-less TIMESTAMP only in UTC); None when one has not, or is impossible (02-30)."""
    steps: list[tuple[str, list[pa.DataType]]]
    if parser.kind == "date":
        steps = [(_ISO_DATE, [pa.date32()])]
    elif parser.kind == "timestamp_ntz":
        steps = [(_ISO_LOCAL, [_NTZ])]
    else:
        steps = [(_ISO_ZONED, [_TIMESTAMP])]
        if parser.time_zone == "UTC":
            steps.append((_ISO_LOCAL, [_NTZ, _TIMESTAMP]))
    for shape, types in steps:
        if (shape is _ISO_ZONED and _utc_shaped(texts)) or pc.all(
            pc.match_substring_regex(texts, shape), min_count=0
        ).as_py():
            try:
                for dtype in types:
                    texts = texts.cast(dtype)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
            return texts
    return None


def _utc_shaped(texts: pa.Array) -> bool:
    """Whether each of ``texts`` that pyarrow casts to a zoned TIMESTAMP has the shape
    :data:`_ISO_ZONED` too, found faster than its regular expression: pyarrow's cast takes
    ``YYYY-MM-DD[T ]hh[:mm[:ss[.f{1,6}]]]`` with a zone ``Z`` or ``[+-]hh[[:]mm]``, each field
    in range. Ending in ``Z``, at least 20 characters long, and not from a year below 1000,
    such a text has all the fields and the zone the shape asks for."""
    lengths = pc.min_max(pc.binary_length(texts))["min"].as_py()
    return (
        (lengths is None or lengths >= _SHORTEST_UTC)
        and pc.all(pc.ends_with(texts, "Z"), min_count=0).as_py()
        and not pc.any(pc.starts_with(texts, "0")).as_py()
    )


def _negative_zero(values: pa.Array) -> pa.Array:
    """Where a floating value is -0.0."""
    return pc.and_(pc.equal(values, _ZERO_FLOAT), pc.less(pc.divide(_ONE, values), _ZERO_FLOAT))


def _float32(doubles: pa.Array) -> tuple[pa.Array, pa.Array]:
    """DOUBLE values as FLOAT, and where that rounding may differ from rounding the text once
    (Java's parseFloat): a DOUBLE halfway between two FLOATs, beyond FLOAT's range, or
    below its normal range."""
    floats = pc.cast(doubles, _FLOAT32, safe=False)
    back = pc.cast(floats, _FLOAT64)
    other = pc.subtract(pc.multiply(doubles, _TWO), back)  # exact: the value across, if any
    halfway = pc.and_(
        pc.not_equal(doubles, back),
        pc.equal(pc.cast(pc.cast(other, _FLOAT32, safe=False), _FLOAT64), other),
    )
    tiny = pc.and_(pc.less(pc.abs(doubles), _FLOAT32_TINY), pc.not_equal(doubles, pa.scalar(0.0)))
    huge = pc.and_(pc.is_inf(floats), pc.invert(pc.is_inf(doubles)))
    return floats, pc.or_(pc.or_(halfway, tiny), huge)


# -- reading ---------------------------------------------------------------------------------
class JsonReading:
    """Reads the blocks and documents of JSON files of one schema, with one parse mode.

    ``schema`` holds the data columns; with ``corrupt`` the tables get the column
    :data:`CORRUPT` too, which holds the raw text of malformed records in PERMISSIVE mode.
    """

    def __init__(self, schema: pa.Schema, corrupt: bool, mode: str, settings: JsonSettings):
        self.schema, self.corrupt, self.mode, self.settings = schema, corrupt, mode, settings
        self.output = schema.append(pa.field(CORRUPT, pa.string())) if corrupt else schema
        self.slow = SparkJsonReader(schema, settings.options, self._parse_datetime)
        self.fast = _Fast.make(schema, settings)
        self.separator = settings.separator
        self.unit = "line" if self.separator is None else "record"

    def _parse_datetime(self, dtype: pa.DataType, text: str) -> datetime | date | int | None:
        parser = _datetime_parser(self.settings.datetimes, dtype)
        assert parser is not None
        try:
            return parser.parse_one(text)
        except OverflowError:  # beyond Python's years: the value as a number, if exact
            values, bad = parser.parse(pa.array([text]))
            if bad[0].as_py() or values.type != dtype:
                return None
            return int(values[0].value)

    def block(
        self, data: bytes, where: str, first: int, drops: DropCounter
    ) -> tuple[pa.Table, int]:
        """The rows of a block of whole records, the first being record ``first`` of the file
        (a line number with the default separators), and how many records the block held."""
        fast = self.fast
        if fast is not None and self.separator is None:
            whole = fast.read_whole(data)
            if whole is not None:
                table, redo = fast.convert(whole)
                if not redo:
                    return self._with_corrupt(table), table.num_rows
                records = split_records(data, None)
                every = list(range(len(records)))
                return self._assemble(records, first, every, table, redo, where, drops), len(
                    records
                )
        if fast is not None:
            text = _text(data)
            if text is not None:
                lines = _text_records(text, data, self.settings.line_sep)
                return self._by_columns(text, lines, where, first, drops), len(lines)
        records = split_records(data, self.separator)  # (not UTF-8, or no fast path)
        candidates, rows_of = [], []
        for index, record in enumerate(records):
            body = record.strip(_BLANK)
            if (
                fast is not None
                and body[:1] == b"{"
                and body[-1:] == b"}"
                and (self.separator is None or not (b"\n" in body or b"\r" in body))
                and not fast.suspect(body)
            ):
                candidates.append(body)
                rows_of.append(index)
        if fast is None or not candidates:
            empty = self.schema.empty_table()
            return self._assemble(records, first, [], empty, [], where, drops), len(records)
        table, bad = fast.read_records(candidates)
        table, redo = fast.convert(table)
        redo = sorted(bad.union(redo))
        return self._assemble(records, first, rows_of, table, redo, where, drops), len(records)

    def _by_columns(
        self, text: pa.Array, lines: pa.Array, where: str, first: int, drops: DropCounter
    ) -> pa.Table:
        """The rows of ``lines``, the records of a block (``text``), the records picked for
        the fast path with Arrow kernels: those that start with "{" and end with "}", hold no
        text pyarrow reads otherwise than Spark, and show no value of a column's wrong JSON
        type."""
        fast = self.fast
        assert fast is not None
        body = pc.ascii_trim(lines, _BLANK_TEXT)
        picked = pc.and_(pc.starts_with(body, "{"), pc.ends_with(body, "}"))
        suspects = [suspect for suspect in fast.suspects if _has(text, suspect)]
        screens = [pc.match_substring_regex(body, suspect) for suspect in suspects]
        if self.separator is not None:
            screens.append(pc.match_substring_regex(body, r"[\r\n]"))
        if fast.mistyped is not None:
            screens.append(pc.match_substring_regex(body, fast.mistyped))
        for screen in screens:
            picked = pc.and_not(picked, screen)
        rows_of = pc.indices_nonzero(picked)
        table, bad = fast.read_lines(body.filter(picked))
        table, redo = fast.convert(table)
        blank = pc.equal(pc.binary_length(body), 0)
        slow = pc.indices_nonzero(pc.invert(pc.or_(picked, blank))).to_pylist()
        rejected = bad.union(redo)
        if rejected:
            kept = pc.invert(row_mask(len(rows_of), rejected))
            slow = sorted(slow + [rows_of[row].as_py() for row in rejected])
            table, rows_of = table.filter(kept), rows_of.filter(kept)
        fast_table = self._with_corrupt(table)
        if not slow:
            return fast_table
        rows: list[dict[str, Any]] = []
        keys: list[int] = []
        dropped, first_dropped = 0, 0
        for index in slow:
            record = lines[index].as_py().encode()
            kept_rows = self._kept(self.slow.read(record), record, where, first + index)
            if kept_rows is None:
                dropped, first_dropped = dropped + 1, first_dropped or first + index
                continue
            rows.extend(kept_rows)
            keys.extend([index] * len(kept_rows))
        if dropped:
            drops.add(dropped, where, first_dropped, "JSON", self.unit)
        if not rows:
            return fast_table
        both = pa.concat_tables([fast_table, pa.Table.from_pylist(rows, schema=self.output)])
        order = pa.concat_arrays([rows_of.cast(pa.int64()), pa.array(keys, pa.int64())])
        return both.take(pc.sort_indices(order))  # a stable sort: a record's rows stay in order

    def _assemble(
        self,
        records: list[bytes],
        first: int,
        rows_of: list[int],
        table: pa.Table,
        redo: list[int],
        where: str,
        drops: DropCounter,
    ) -> pa.Table:
        """The rows of ``records`` in order: ``table`` has one row for each record of
        ``rows_of`` (the fast path's), but those at the positions ``redo``; the slow path reads
        the rest."""
        fast_row = dict(zip(rows_of, range(len(rows_of)), strict=True))
        for position in redo:
            del fast_row[rows_of[position]]
        order: list[int] = []
        slow: list[dict[str, Any]] = []
        dropped, first_dropped = 0, 0
        for index, record in enumerate(records):
            row = fast_row.get(index)
            if row is not None:
                order.append(row)
                continue
            if not record.strip(_BLANK):
                continue
            result = self.slow.read(record)
            kept = self._kept(result, record, where, first + index)
            if kept is None:
                dropped, first_dropped = dropped + 1, first_dropped or first + index
                continue
            order.extend(range(table.num_rows + len(slow), table.num_rows + len(slow) + len(kept)))
            slow.extend(kept)
        if dropped:
            drops.add(dropped, where, first_dropped, "JSON", self.unit)
        if not slow and len(order) == table.num_rows:
            return self._with_corrupt(table)  # the fast rows only, all of them, in order
        both = pa.concat_tables(
            [self._with_corrupt(table), pa.Table.from_pylist(slow, schema=self.output)]
        )
        return both.take(pa.array(order, pa.int64()))

    def _kept(
        self, result: RecordResult, record: bytes, where: str, number: int
    ) -> list[dict[str, Any]] | None:
        """The rows a record gives in this mode (None: dropped); FAILFAST raises."""
        if result.malformed is None:
            return result.rows
        if self.mode == "FAILFAST":
            raise failfast_error("JSON", where, number, result.malformed, self.unit)
        if self.mode == "DROPMALFORMED":
            return None
        if not self.corrupt:
            return result.partial
        text = record_text(record)
        return [{**row, CORRUPT: text} for row in result.partial]

    def document(self, data: bytes, where: str, drops: DropCounter) -> pa.Table:
        """The rows of a multiLine file: one record, whatever its line breaks."""
        result = self.slow.read(data)
        if result.malformed is None:
            return pa.Table.from_pylist(result.rows, schema=self.output)
        if self.mode == "FAILFAST":
            raise MalformedRecordError(
                f"[MALFORMED_RECORD_IN_PARSING] Malformed JSON document {where}"
                f"{_at_line(data, result)} (parse mode FAILFAST, multiLine): {result.malformed}. "
                "Fix the file, or set option mode to PERMISSIVE or DROPMALFORMED."
            )
        if self.mode == "DROPMALFORMED":
            drops.add(1, where, 1, "JSON", "document")
            return self.output.empty_table()
        rows = result.partial
        if self.corrupt:
            text = record_text(data)
            rows = [{**row, CORRUPT: text} for row in rows]
        return pa.Table.from_pylist(rows, schema=self.output)

    def _with_corrupt(self, table: pa.Table) -> pa.Table:
        if not self.corrupt:
            return table
        return table.append_column(self.output.field(-1), pa.nulls(table.num_rows, pa.string()))


def _at_line(data: bytes, result: RecordResult) -> str:
    """`` at line N`` where a document goes wrong, when the reader knows."""
    if result.position is None:
        return ""
    if result.kind == "invalid_utf8":
        before = data[: result.position]
    else:
        before = data.decode(errors="surrogateescape")[: result.position].encode(
            errors="surrogateescape"
        )
    return f" at line {count_separators(before, None) + 1}"


@lru_cache(maxsize=64)
def json_reading(
    schema: pa.Schema, corrupt: bool, mode: str, settings: JsonSettings
) -> JsonReading:
    """One reader per schema, mode and options (building one prepares every column)."""
    return JsonReading(schema, corrupt, mode, settings)
