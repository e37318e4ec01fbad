"""The engine of :mod:`microbatch.json_decoder`: JSON texts into typed Arrow columns.

Clean input takes pyarrow's fast path; input that fails is split to find its bad rows, and
only those are checked with the stdlib ``json`` module. Each bad row gets a :class:`Problem`
(kind, message, column, position), never a text that must be parsed again.

pyarrow's JSON reader (26.0.1, apache/arrow#47409) crashes the process (SIGSEGV) when one of
its internal blocks starts with a top-level ``null`` (or such a value spans a block boundary).
Rows are joined one per line and each starts with "{", so that can only happen when the input
spans several blocks and a row holds more than one document (``{"a":1} null``). When no row
holds a line break the reader splits blocks only between rows; otherwise rows that may hold
such a ``null`` are found with a regular expression and checked with the stdlib before
pyarrow sees them, and the input is read as one block: a block that starts after a line
break inside a row with any other value than an object (``{"a":1}\\n"x"``, ``\\n1``,
``\\ntrue``) aborts the process too (an uncaught C++ exception). A block of JSON Lines text is
never handed to pyarrow when one of its lines starts with ``null`` (:func:`lines_safe_for_arrow`).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import partial
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from microbatch.errors import SchemaError
from microbatch.types import checked_cast, type_to_ddl

_JSON = json.JSONDecoder(parse_float=Decimal)
_PARTS = 16  # a JSON block that fails to read is split in this many parts to find bad rows
_SCREEN_ROWS = 512  # ... and parts this small are checked row by row with the stdlib
_AFTER_VALUE_NULL = r"[^:,\[\s\x{FEFF}][\s\x{FEFF}]*null"
"""``null`` after something that may end a JSON value: a top-level ``null`` (inside a valid
object ``null`` only follows ":", "," or "[")."""
_NULL_LINE = r"(?:^|[\r\n])[\s\x{FEFF}]*null"
"""A line that starts with ``null`` after blanks or byte-order marks (pyarrow's reader also
breaks lines at a lone CR)."""
_FLOAT32 = pa.float32()
_BLOCK = 1 << 20  # the block size of read_json
_READ_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, ValueError)
# Arrow scalars made once: a Python value given to a compute function is converted on each
# call, and pyarrow 26 then tries (and fails) to import dateutil, which costs about 0.8 ms
_EMPTY_OBJECT = pa.scalar("{}")
_NEWLINE = pa.scalar("\n")
_FALSE = pa.scalar(False)
_ZERO = pa.scalar(0, pa.uint8())
_NO_LENGTH = pa.scalar(0, pa.int32())

# the kinds of Problem (the values of microbatch.json_decoder.MalformedKind)
INVALID_UTF8 = "invalid_utf8"
INVALID_JSON = "invalid_json"
NOT_AN_OBJECT = "not_an_object"
BAD_VALUE = "bad_value"
OUT_OF_RANGE = "out_of_range"


class Problem(NamedTuple):
    """Why one row is malformed."""

    kind: str
    message: str
    column: str | None = None
    position: int | None = None


Bad = dict[int, Problem | None]
"""Malformed rows by index; None while the reason is not known yet."""


def type_text(dtype: pa.DataType) -> str:
    try:
        return type_to_ddl(dtype)
    except SchemaError:
        return str(dtype)


# -- JSON ------------------------------------------------------------------------------------
class Engine:
    """Decodes JSON object texts, one per row, into typed arrays of ``schema``.

    The fast path is one ``pyarrow.json.read_json`` call for all rows (the caller guarantees
    every row starts with "{" and ends with "}", so rows joined with newlines cannot merge, and
    a row holding two documents shows up in the row count). When it fails, parts of the rows
    are read again to find the failing ones (parts of up to ``_SCREEN_ROWS`` rows are checked
    with the stdlib instead); those rows are blanked and the rest is read once more.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self.fields = [f.with_nullable(True) for f in schema]
        self.converters = {f.name: _converter(f.type, f.name) for f in self.fields}
        self.arrow = pa.schema([f for f in self.fields if _arrow_reads(f)])
        read = pa.schema([f.with_type(_read_type(f.type)) for f in self.arrow])
        self.needs_cast = read != self.arrow
        self.options = pajson.ParseOptions(
            explicit_schema=read, unexpected_field_behavior="ignore", newlines_in_values=True
        )
        self.one_per_line = pajson.ParseOptions(
            explicit_schema=read, unexpected_field_behavior="ignore", newlines_in_values=False
        )

    def decode(self, lines: pa.Array) -> tuple[dict[str, pa.Array], Bad]:
        """Arrays by field name, aligned with ``lines``, and the bad rows (reason if known)."""
        bad: Bad = {}
        readable = lines
        if len(self.arrow):
            bad.update(_null_documents(lines))
            if bad:
                readable = pc.if_else(mask(len(lines), bad), _EMPTY_OBJECT, lines)
        table = self._read(readable)[0] if len(self.arrow) else None
        if table is None and len(self.arrow):
            bad.update(self._isolate(readable, range(len(lines)), screen=True))
            table = self._read(pc.if_else(mask(len(lines), bad), _EMPTY_OBJECT, readable))[0]
        columns = {} if table is None else {n: table[n].combine_chunks() for n in self.arrow.names}
        rest = [f for f in self.fields if f.name not in columns]
        if rest:
            arrays, errors = self.python(lines.to_pylist(), rest)
            columns.update(zip([f.name for f in rest], arrays, strict=True))
            bad = {**errors, **{row: problem or errors.get(row) for row, problem in bad.items()}}
        return columns, bad

    def read_lines(self, data: bytes) -> pa.Table | None:
        """A block of JSON Lines text in one ``read_json`` call, or None when any line is
        malformed (or may be: see :func:`lines_safe_for_arrow`) or a column is not one
        pyarrow reads. Blank lines are no rows."""
        if not len(self.arrow) or len(self.arrow) != len(self.fields):
            return None
        if not lines_safe_for_arrow(data):
            return None
        block = _BLOCK
        for _attempt in range(2):
            options = pajson.ReadOptions(use_threads=len(data) > 2 * block, block_size=block)
            try:
                table = pajson.read_json(pa.BufferReader(data), options, self.one_per_line)
                break
            except _READ_ERRORS as error:
                # a line longer than a block: read it again as one block
                if "straddling" not in str(error) or block > len(data):
                    return None
                block = len(data) + 1
        else:
            return None
        if table.num_rows != _line_count(data) and table.num_rows != _filled_lines(data):
            return None  # a line held several documents
        table = table.select(self.arrow.names)
        if self.needs_cast:
            try:
                table = checked_cast(table, self.arrow)
            except _READ_ERRORS:
                return None
        return table

    def python(
        self, lines: list[str], fields: list[pa.Field] | None = None
    ) -> tuple[list[pa.Array], dict[int, Problem]]:
        """Decode ``lines`` with the stdlib: one array per field, and the problems by row."""
        fields = self.fields if fields is None else fields
        values: list[list[Any]] = [[] for _ in fields]
        errors: dict[int, Problem] = {}
        for row, line in enumerate(lines):
            document, problem = _load_object(line)
            if problem:
                errors[row] = problem
            for out, f in zip(values, fields, strict=True):
                try:
                    out.append(self.converters[f.name](document.get(f.name)))
                except _Unreadable as exc:
                    message = f"column '{f.name}': {exc}"
                    errors.setdefault(row, Problem(exc.kind, message, f.name))
                    out.append(None)
        return [_array(out, f, errors) for out, f in zip(values, fields, strict=True)], errors

    def reason(self, line: str) -> Problem:
        """Why ``line`` cannot be decoded."""
        found = self.python([line])[1].get(0)
        if found is not None:
            return found
        return Problem(INVALID_JSON, self._read(pa.array([line]))[1] or "unknown error")

    def _isolate(self, lines: pa.Array, rows: Sequence[int], screen: bool) -> Bad:
        """The rows among ``rows`` (which fail to read together) that Arrow cannot read."""
        if len(rows) == 1:
            return {rows[0]: None}
        bad: Bad = {}
        if screen and len(rows) <= _SCREEN_ROWS:
            _, errors = self.python(_take(lines, rows).to_pylist())
            bad = {rows[i]: problem for i, problem in errors.items()}
            rest = [row for row in rows if row not in bad]
            if rest and self._read(_take(lines, rest))[0] is None:
                bad.update(self._isolate(lines, rest, screen=False))
            return bad
        size = -(-len(rows) // _PARTS)
        for start in range(0, len(rows), size):
            part = rows[start : start + size]
            if self._read(_take(lines, part))[0] is None:
                bad.update(self._isolate(lines, part, screen))
        return bad

    def _read(self, lines: pa.Array) -> tuple[pa.Table | None, str]:
        """The table for ``lines`` or ``(None, reason)``; never a partial result."""
        one_list = pa.ListArray.from_arrays(pa.array([0, len(lines)], pa.int32()), lines)
        data = pc.binary_join(one_list, _NEWLINE)[0].as_buffer()
        longest = pc.max(pc.binary_length(lines)).as_py() or 0
        block = max(_BLOCK, longest + 2)  # threads only pay off with several blocks
        parse = self.options
        if data.size > block:
            if _line_breaks(lines):
                # read_json may start a block after a line break inside a row, and a block
                # starting with a value that is not an object ({"a": 1}\n"x" or \n1 or \nnull)
                # kills the process: one block, split nowhere
                block = data.size + 1
            else:
                parse = self.one_per_line  # blocks then split only between rows
        options = pajson.ReadOptions(use_threads=data.size > 2 * block, block_size=block)
        try:
            table = pajson.read_json(pa.BufferReader(data), options, parse)
            if table.num_rows != len(lines):
                return None, f"found {table.num_rows} JSON documents in {len(lines)} rows"
            return checked_cast(table.select(self.arrow.names), self.arrow), ""
        except pa.ArrowInvalid as exc:
            return None, str(exc)


def is_text(dtype: pa.DataType) -> bool:
    """Whether values of ``dtype`` can be decoded (string or binary)."""
    return bool(
        pa.types.is_binary(dtype)
        or pa.types.is_large_binary(dtype)
        or pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
    )


def json_lines(source: pa.Array) -> tuple[pa.Array, Bad]:
    """One JSON object text per row of ``source`` (string or binary; "{}" for null, blank and
    malformed rows), and the rows known to be malformed."""
    text, bad = _utf8(source)
    shaped = _shaped(text)
    if not pc.all(shaped).as_py():
        text = pc.utf8_trim_whitespace(text)
        shaped = _shaped(text)
        odd = pc.and_(pc.invert(shaped), pc.greater(pc.binary_length(text), _NO_LENGTH))
        bad.update(dict.fromkeys(pc.indices_nonzero(pc.fill_null(odd, _FALSE)).to_pylist()))
    return pc.if_else(pc.fill_null(shaped, _FALSE), text, _EMPTY_OBJECT), bad


def lines_safe_for_arrow(data: bytes) -> bool:
    """Whether a block of JSON Lines text is valid UTF-8 (``read_json`` does not check that
    strings are) and has no line that starts with ``null`` (see the module docstring).

    When every line starts with "{" (the usual case) two searches with a literal first
    character tell so at memchr speed; only other blocks are searched for such a line.
    """
    try:
        text = pa.array([data], pa.large_binary()).cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    every_line_an_object = (
        data[:1] == b"{"
        and not _matches(text, "\n[^{]")
        and (b"\r" not in data or not _matches(text, "\r[^\n]"))
    )
    return every_line_an_object or not _matches(text, _NULL_LINE)


def split_lines(data: bytes, first_line: int) -> tuple[list[bytes], list[int]]:
    """The non-blank lines of a block (without a trailing CR) and their line numbers."""
    texts, numbers = [], []
    for offset, line in enumerate(data.split(b"\n")):
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            texts.append(line)
            numbers.append(first_line + offset)
    return texts, numbers


def _matches(text: pa.Array, pattern: str) -> bool:
    return bool(pc.any(pc.match_substring_regex(text, pattern)).as_py())


def _line_count(data: bytes) -> int:
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def _filled_lines(data: bytes) -> int:
    return sum(1 for line in data.split(b"\n") if line.strip())


def _null_documents(lines: pa.Array) -> dict[int, Problem]:
    """The rows holding a top-level ``null`` after a document, with the reason.

    Only input that ``read_json`` reads in several blocks can crash it (one block starts with
    the first row's "{"); only rows that match :data:`_AFTER_VALUE_NULL` are parsed, with the
    stdlib.
    """
    if (pc.sum(pc.binary_length(lines)).as_py() or 0) + len(lines) <= _BLOCK:
        return {}
    if not _line_breaks(lines):
        return {}  # read one row per line: every block starts with a row's "{"
    found: dict[int, Problem] = {}
    for row in pc.indices_nonzero(pc.match_substring_regex(lines, _AFTER_VALUE_NULL)).to_pylist():
        _, problem = _load_object(lines[row].as_py())
        if problem:
            found[row] = problem
    return found


def _line_breaks(lines: pa.Array) -> bool:
    """Whether a row of ``lines`` (a string array) holds a line break (LF or CR)."""
    if not len(lines):
        return False
    strings = lines.cast(pa.string())
    _, offsets_buffer, values = strings.buffers()
    if values is None:
        return False
    offsets = pa.Array.from_buffers(
        pa.int32(), len(strings) + 1, [None, offsets_buffer], offset=strings.offset
    )
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    raw = memoryview(values)[start:end].tobytes()
    return b"\n" in raw or b"\r" in raw


def _shaped(text: pa.Array) -> pa.Array:
    return pc.and_(pc.starts_with(text, "{"), pc.ends_with(text, "}"))


def _utf8(source: pa.Array) -> tuple[pa.Array, Bad]:
    try:
        return source.cast(pa.string()), {}
    except pa.ArrowInvalid:
        pass
    texts: list[str | None] = []
    bad: Bad = {}
    for row, raw in enumerate(source.to_pylist()):
        try:
            texts.append(None if raw is None else raw.decode())
        except UnicodeDecodeError as exc:
            bad[row] = Problem(INVALID_UTF8, f"invalid UTF-8 at byte {exc.start}", None, exc.start)
            texts.append("{}")
    return pa.array(texts, pa.string()), bad


def _array(values: list[Any], column: pa.Field, errors: dict[int, Problem]) -> pa.Array:
    try:
        return pa.array(values, column.type)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        pass
    for row, value in enumerate(values):
        try:
            pa.scalar(value, column.type)
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            message = f"column '{column.name}': {exc}"
            errors.setdefault(row, Problem(OUT_OF_RANGE, message, column.name))
            values[row] = None
    return pa.array(values, column.type)


def _load_object(line: str) -> tuple[dict[str, Any], Problem | None]:
    try:
        document = _JSON.decode(line)
    except json.JSONDecodeError as exc:
        return {}, Problem(INVALID_JSON, f"invalid JSON: {exc}", None, exc.pos)
    except RecursionError:
        return {}, Problem(INVALID_JSON, "invalid JSON: nested too deeply")
    if not isinstance(document, dict):
        return {}, Problem(NOT_AN_OBJECT, f"expected a JSON object, got {preview(document)}")
    return document, None


class _Unreadable(ValueError):
    """A JSON value that cannot mean its column's type (``kind``: a Problem kind)."""

    def __init__(self, message: str, kind: str = BAD_VALUE) -> None:
        super().__init__(message)
        self.kind = kind


def _converter(dtype: pa.DataType, name: str) -> Callable[[Any], Any]:
    """A function turning a ``json.loads`` value into a Python value for ``dtype``.

    It raises ``_Unreadable`` when the JSON type does not match (the rules of ``read_json``).
    """
    if isinstance(dtype, pa.StructType):
        items = [(f.name, _converter(f.type, name)) for f in dtype]
        return _checked((dict,), dtype, lambda v: {n: to(v.get(n)) for n, to in items})
    if isinstance(dtype, pa.MapType):
        if not pa.types.is_string(dtype.key_type):
            raise SchemaError(
                f"Column '{name}': {type_text(dtype)} cannot hold a JSON object, whose keys are "
                "strings; use MAP<STRING, ...>"
            )
        to_item = _converter(dtype.item_type, name)
        return _checked((dict,), dtype, lambda v: [(k, to_item(x)) for k, x in v.items()])
    if isinstance(dtype, pa.ListType | pa.LargeListType):
        to_value = _converter(dtype.value_type, name)
        return _checked((list,), dtype, lambda v: [to_value(x) for x in v])
    if dtype == _FLOAT32:
        return _checked((int, float, Decimal), dtype, _float32)
    if pa.types.is_floating(dtype):
        return _checked((int, float, Decimal), dtype, float)
    if pa.types.is_decimal(dtype):
        return _checked((int, Decimal, str), dtype, Decimal)
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return _checked((str,), dtype, str.encode)
    if pa.types.is_date(dtype):
        return _checked((str,), dtype, date.fromisoformat)
    if pa.types.is_timestamp(dtype):
        return _checked((str,), dtype, partial(_timestamp, utc=dtype.tz is not None))
    kinds: tuple[type, ...] = (object,)
    if pa.types.is_boolean(dtype):
        kinds = (bool,)
    elif pa.types.is_integer(dtype):
        kinds = (int,)
    elif pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        kinds = (str,)
    return _checked(kinds, dtype, lambda v: v)


def _checked(
    kinds: tuple[type, ...], dtype: pa.DataType, convert: Callable[[Any], Any]
) -> Callable[[Any], Any]:
    def run(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)):
            try:
                return convert(value)
            except _Unreadable:
                raise
            except (ValueError, ArithmeticError):
                pass
        raise _Unreadable(f"cannot read {preview(value)} as {type_text(dtype)}")

    return run


def _float32(value: int | float | Decimal) -> float:
    """``value`` as FLOAT; out of its range is unreadable (not infinity)."""
    number = float(value)
    try:
        struct.pack("<f", number)
    except OverflowError:
        message = f"{preview(number)} is out of range for FLOAT"
        raise _Unreadable(message, OUT_OF_RANGE) from None
    return number


def _timestamp(text: str, utc: bool) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is not None:
        if not utc:
            # Spark's rule: TIMESTAMP_NTZ text must not carry an offset (it is not shifted)
            raise _Unreadable(f"{preview(text)} has a UTC offset; TIMESTAMP_NTZ cannot hold it")
        moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=UTC if utc else None)


def _read_type(dtype: pa.DataType) -> pa.DataType:
    """The type to ask ``read_json`` for: it reads DATE only from numbers (read text), shifts
    TIMESTAMP_NTZ text with an offset (read text; the cast refuses offsets) and makes FLOAT
    values out of range infinite (read DOUBLE; the cast is checked)."""
    if pa.types.is_date(dtype) or (pa.types.is_timestamp(dtype) and dtype.tz is None):
        return pa.string()
    if dtype == _FLOAT32:
        return pa.float64()
    if isinstance(dtype, pa.ListType):
        return pa.list_(dtype.value_field.with_type(_read_type(dtype.value_type)))
    if isinstance(dtype, pa.StructType):
        return pa.struct([f.with_type(_read_type(f.type)) for f in dtype])
    return dtype


def _arrow_reads(column: pa.Field) -> bool:
    """Whether ``read_json`` supports the column's type (it does not support MAP, for one)."""
    options = pajson.ParseOptions(
        explicit_schema=pa.schema([column.with_type(_read_type(column.type))])
    )
    try:
        pajson.read_json(pa.BufferReader(b"{}"), parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _take(lines: pa.Array, rows: Sequence[int]) -> pa.Array:
    if isinstance(rows, range):
        return lines.slice(rows.start, len(rows))
    return lines.take(pa.array(rows, pa.int64()))


def mask(length: int, rows: Iterable[int]) -> pa.Array:
    """A boolean array of ``length``, true at ``rows``."""
    flags = bytearray(length)
    for row in rows:
        flags[row] = 1
    values = pa.Array.from_buffers(pa.uint8(), length, [None, pa.py_buffer(flags)])
    return pc.not_equal(values, _ZERO)


def patch(column: pa.Array, rows: list[int], values: pa.Array) -> pa.Array:
    """``column`` with ``values`` at positions ``rows``."""
    indices = list(range(len(column)))
    for offset, row in enumerate(rows):
        indices[row] = len(column) + offset
    return pa.concat_arrays([column, values]).take(pa.array(indices, pa.int64()))


def corrupt_texts(source: pa.Array, rows: Iterable[int]) -> pa.Array:
    """The raw text of ``source`` at ``rows`` (invalid UTF-8 replaced), null elsewhere."""
    texts: list[str | None] = [None] * len(source)
    for row in rows:
        texts[row] = raw_text(source, row)
    return pa.array(texts, pa.string())


def raw_text(source: pa.Array, row: int) -> str:
    raw = source[row].as_py()
    return raw.decode(errors="replace") if isinstance(raw, bytes) else raw


def preview(value: Any) -> str:
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    text = json.dumps(value, default=float, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
