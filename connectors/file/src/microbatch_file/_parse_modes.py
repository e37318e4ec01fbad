"""Parsing blocks of CSV text with Spark's parse modes, and what the JSON and CSV readers share.

A block is whole lines of one file. It is first read in one pyarrow call; only when that
fails are its lines looked at one group at a time to find the malformed ones, which then
become corrupt records (``PERMISSIVE``), disappear (``DROPMALFORMED``, counted in a
:class:`DropCounter` and logged with the file and line of the first) or fail the read with
the file and line number (``FAILFAST``). JSON blocks are decoded by the core's
:class:`microbatch.json_decoder.JsonDecoder` (see ``JsonFormat``).
"""

from __future__ import annotations

import csv
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.csv as pacsv

from microbatch.errors import SourceError
from microbatch.types import checked_cast

__all__ = [
    "CORRUPT",
    "CsvSettings",
    "DropCounter",
    "MalformedRecordError",
    "failfast_error",
    "parse_csv",
]

log = logging.getLogger("microbatch.file")

CORRUPT = "__microbatch_corrupt_record__"
"""The column holding the raw text of malformed lines (renamed by the source)."""

_PARTS = 16
_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, ValueError)


class MalformedRecordError(SourceError):
    """A malformed line under ``mode=FAILFAST``; names the file and the line."""


class DropCounter:
    """The malformed lines (records) dropped under ``mode=DROPMALFORMED``.

    Splits are read on several threads at once: :meth:`add` may be called from any of them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def __reduce__(self) -> tuple[type[DropCounter], tuple[()]]:
        """A pickled counter starts again at 0 in the process that unpickles it (a lock cannot
        be pickled; that process counts and logs its own drops)."""
        return DropCounter, ()

    @property
    def count(self) -> int:
        """Lines dropped so far."""
        with self._lock:
            return self._count

    def add(self, count: int, where: str, line: int, kind: str, unit: str = "line") -> None:
        """Count ``count`` dropped lines of ``where``, the first at ``line``, and log it."""
        if count <= 0:
            return
        with self._lock:
            self._count += count
        log.warning(
            "Dropped %d malformed %s %s(s) of %s (parse mode DROPMALFORMED); the first is at %s %d",
            count,
            kind,
            unit,
            where,
            unit,
            line,
        )


def failfast_error(
    kind: str, where: str, line: int, reason: str, unit: str = "line"
) -> MalformedRecordError:
    """The ``FAILFAST`` error for the malformed ``kind`` record at ``line`` of ``where``."""
    return MalformedRecordError(
        f"[MALFORMED_RECORD_IN_PARSING] Malformed {kind} record in {where} at {unit} {line} "
        f"(parse mode FAILFAST): {reason}. Fix or remove the line, or set option mode to "
        "PERMISSIVE (bad values become null) or DROPMALFORMED (bad lines are dropped)."
    )


@dataclass(frozen=True)
class _Lines:
    """The non-blank lines of a block and their line numbers in the file."""

    texts: list[bytes]
    numbers: list[int]

    @classmethod
    def of(cls, data: bytes, first_line: int, comment: bytes | None = None) -> _Lines:
        texts, numbers = [], []
        for offset, line in enumerate(data.split(b"\n")):
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line.strip() or (comment and line.startswith(comment)):
                continue
            texts.append(line)
            numbers.append(first_line + offset)
        return cls(texts, numbers)


_FLOAT32 = pa.float32()


# -- CSV -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CsvSettings:
    """CSV dialect options (Spark's names in the docs of the source options)."""

    sep: str = ","
    quote: str | None = '"'
    escape: str | None = "\\"
    null_value: str = ""
    comment: str | None = None

    def parse_options(self) -> pacsv.ParseOptions:
        return pacsv.ParseOptions(
            delimiter=self.sep,
            quote_char=self.quote or False,
            escape_char=self.escape or False,
            double_quote=True,
            newlines_in_values=False,
            ignore_empty_lines=True,
        )

    def tokens(self, line: str) -> list[str]:
        reader = csv.reader(
            [line],
            delimiter=self.sep,
            quotechar=self.quote or None,
            escapechar=self.escape or None,
            doublequote=True,
            quoting=csv.QUOTE_MINIMAL if self.quote else csv.QUOTE_NONE,
        )
        return next(reader, [])


def _csv_read(data: bytes, schema: pa.Schema, settings: CsvSettings) -> pa.Table:
    names = [f"c{index}" for index in range(len(schema))]
    table = pacsv.read_csv(
        pa.BufferReader(data),
        read_options=pacsv.ReadOptions(
            column_names=names,
            use_threads=len(data) > (4 << 20),
            block_size=1 << 20 if len(data) > (4 << 20) else max(1 << 20, len(data) + 1),
        ),
        parse_options=settings.parse_options(),
        convert_options=pacsv.ConvertOptions(
            column_types={
                name: pa.float64() if dtype == _FLOAT32 else dtype
                for name, dtype in zip(names, schema.types, strict=True)
            },
            null_values=[settings.null_value],
            strings_can_be_null=True,
            quoted_strings_can_be_null=True,
        ),
    )
    read = pa.Table.from_arrays(
        table.columns,
        schema=pa.schema([f.with_type(table.schema.field(i).type) for i, f in enumerate(schema)]),
    )
    result = checked_cast(read, schema) if read.schema != schema else read
    if _swallowed_lines(result):
        raise pa.ArrowInvalid("a quoted field is not closed on its line")
    return result


def _swallowed_lines(table: pa.Table) -> bool:
    """Whether a value holds a line break: a quote left open reads on into the next lines (to
    the end of the block, or to the next quote), so the line is malformed. Values never span
    lines here; the string columns' bytes are searched at memchr speed."""
    for column in table.columns:
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            continue
        for chunk in column.chunks:
            values = chunk.buffers()[2]
            if values is not None and values.size:
                raw = values.to_pybytes()
                if b"\n" in raw or b"\r" in raw:
                    return True
    return False


def parse_csv(
    data: bytes,
    *,
    schema: pa.Schema,
    settings: CsvSettings,
    mode: str,
    corrupt: bool,
    where: str,
    first_line: int,
    drops: DropCounter | None = None,
) -> pa.Table:
    """The rows of a block of CSV lines (header already removed) as ``schema``, by position;
    lines dropped under ``DROPMALFORMED`` are counted in ``drops``."""
    if not data.strip() or not len(schema):
        return _empty(schema, corrupt)
    comment = settings.comment.encode() if settings.comment else None
    lines = _Lines.of(data, first_line, comment) if comment else None
    body = data if lines is None else b"\n".join(lines.texts) + b"\n"
    try:
        return _with_corrupt(_csv_read(body, schema, settings), corrupt)
    except _ERRORS:
        pass
    if lines is None:
        lines = _Lines.of(data, first_line)
    pieces: list[pa.Table] = []
    bad_rows: list[dict[str, object]] = []
    dropped, first_dropped = 0, 0
    for start, table in _csv_groups(lines.texts, schema, settings, 0, len(lines.texts)):
        if table is not None:
            if bad_rows:
                pieces.append(_rows_table(bad_rows, schema))
                bad_rows = []
            pieces.append(_with_corrupt(table, True))
            continue
        line = lines.texts[start]
        if mode == "FAILFAST":
            raise failfast_error(
                "CSV", where, lines.numbers[start], _csv_reason(line, schema, settings)
            )
        if mode == "PERMISSIVE":
            bad_rows.append(_permissive_row(line, schema, settings))
        else:
            dropped, first_dropped = dropped + 1, first_dropped or lines.numbers[start]
    if drops is not None:
        drops.add(dropped, where, first_dropped, "CSV")
    if bad_rows:
        pieces.append(_rows_table(bad_rows, schema))
    if not pieces:
        return _empty(schema, corrupt)
    result = pa.concat_tables(pieces)
    return result if corrupt else result.drop_columns([CORRUPT])


def _csv_groups(
    lines: list[bytes], schema: pa.Schema, settings: CsvSettings, start: int, end: int
) -> Iterator[tuple[int, pa.Table | None]]:
    """Consecutive ranges of ``lines`` by first line: readable ones with their table, and
    malformed single lines with None."""
    if end - start <= 1:
        if end > start:
            try:
                yield start, _csv_read(lines[start] + b"\n", schema, settings)
            except _ERRORS:
                yield start, None
        return
    size = -(-(end - start) // _PARTS)
    for first in range(start, end, size):
        last = min(end, first + size)
        try:
            table = _csv_read(b"\n".join(lines[first:last]) + b"\n", schema, settings)
        except _ERRORS:
            yield from _csv_groups(lines, schema, settings, first, last)
            continue
        if table.num_rows != last - first:
            yield from _csv_groups(lines, schema, settings, first, last)
            continue
        yield first, table


def _csv_reason(line: bytes, schema: pa.Schema, settings: CsvSettings) -> str:
    try:
        _csv_read(line + b"\n", schema, settings)
    except UnicodeDecodeError as error:
        return f"invalid UTF-8 at byte {error.start}"
    except _ERRORS as error:
        return str(error).strip()
    return "the line does not fit the schema"


def _permissive_row(line: bytes, schema: pa.Schema, settings: CsvSettings) -> dict[str, object]:
    text = line.decode("utf-8", errors="surrogateescape")
    tokens = settings.tokens(text)
    row: dict[str, object] = {}
    for index, column in enumerate(schema):
        token = tokens[index] if index < len(tokens) else None
        row[column.name] = _convert(token, column.type, settings.null_value)
    row[CORRUPT] = line.decode("utf-8", errors="replace")
    return row


def _convert(token: str | None, dtype: pa.DataType, null_value: str) -> object:
    if token is None or token == null_value:
        return None
    try:
        token.encode("utf-8")
    except UnicodeEncodeError:
        return None  # invalid UTF-8 in this field
    try:
        if dtype == _FLOAT32:  # out of range is malformed, not infinity
            wide = pa.table({"v": pa.array([token], pa.string()).cast(pa.float64())})
            return checked_cast(wide, pa.schema([("v", dtype)]))["v"][0].as_py()
        return pa.scalar(token, pa.string()).cast(dtype).as_py()
    except _ERRORS:
        return None


def _rows_table(rows: list[dict[str, object]], schema: pa.Schema) -> pa.Table:
    full = pa.schema([*schema, pa.field(CORRUPT, pa.string())])
    return pa.Table.from_pylist(rows, schema=full)


# -- shared ----------------------------------------------------------------------------------
def _with_corrupt(table: pa.Table, corrupt: bool) -> pa.Table:
    if not corrupt:
        return table
    return table.append_column(pa.field(CORRUPT, pa.string()), pa.nulls(len(table), pa.string()))


def _empty(schema: pa.Schema, corrupt: bool) -> pa.Table:
    return _with_corrupt(schema.empty_table(), corrupt)
