"""Reading one CSV file as Spark 4 reads it, block by block.

A block is whole lines of the file (with ``multiLine``, records may span lines: the text goes
through :func:`~._spark_csv.stream_records` piece by piece instead). When the options allow it
(:func:`~._spark_csv.arrow_fast_path_ok`), a block is read by ``pyarrow.csv`` as text columns,
after checks that pyarrow reads its lines as Spark does: no line ends in a lone ``\\r``, and
where the block has quote characters its quoted fields are well-formed (a regular expression
over the whole block). A block that fails them is looked at line by line: the lines pyarrow
cannot read as Spark does (wrong number of fields, odd quoting, invalid UTF-8, ...) go to
Spark's tokenizer, the rest to pyarrow in one call. Other options send every line to the
tokenizer.

The text columns are then converted with Spark's rules, vectorised
(:class:`~._csv_columns.ColumnConverter`); the few values that leaves open are converted one
by one (:func:`~._spark_csv_values.convert`). Malformed records become corrupt records
(``PERMISSIVE``), are dropped and counted (``DROPMALFORMED``) or fail the read naming the file
and line (``FAILFAST``). Errors Spark raises for the whole read (``maxColumns``,
``maxCharsPerColumn``, ``unescapedQuoteHandling=RAISE_ERROR``, a header that does not match
with ``enforceSchema=false``) fail it whatever the mode.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from microbatch.errors import SchemaError, SourceError

from ._csv_columns import ColumnConverter, datetime_type, supported
from ._datetimes import DatetimeOptions
from ._parse_modes import CORRUPT, DropCounter, failfast_error
from ._records import record_blocks, row_mask
from ._spark_csv import (
    CsvSyntaxError,
    Record,
    SparkCsvOptions,
    Tokenizer,
    arrow_fast_path_ok,
    arrow_parse_options,
    header_problem,
    stream_records,
)
from ._spark_csv_values import convert

__all__ = ["CsvFileReader", "CsvSettings", "PieceReader"]

log = logging.getLogger("microbatch.file")

_BOM = "\ufeff".encode()
_BLANK = r"^[\x00-\x20]+$"  # lines Spark skips: Java's trim leaves nothing
_SPACES = r"^[\x00-\x20]*$"
_BATCH = 65536  # records per table with multiLine
_EXACT_COUNT = 200  # at most this many columns: the line pattern counts the fields itself
_PART = 2 << 20  # bytes of a block one thread checks


@dataclass(frozen=True)
class CsvSettings:
    """How a CSV source reads (its options besides the parse mode, the header flag and schema
    inference); picklable."""

    options: SparkCsvOptions = field(default_factory=SparkCsvOptions)
    datetimes: DatetimeOptions = field(default_factory=DatetimeOptions)
    enforce_schema: bool = True
    encoding: str = "UTF-8"
    """The files' charset."""


def _byte(char: str) -> str:
    return f"\\x{ord(char):02x}"


def _field_pattern(o: SparkCsvOptions) -> str:
    """A field as :func:`~._spark_csv.arrow_fast_path_ok` wants it (ASCII characters)."""
    d = _byte(o.sep)
    if not o.quote:
        return rf"(?:[^\x00{d}\r\n][^{d}\r\n]*)?"
    q = _byte(o.quote)  # U+0000 in a quoted value is univocity's too (it may drop it)
    if o.escape == o.quote:
        quoted = rf"{q}(?:[^{q}\x00\r\n]|{q}{q})*{q}"
    else:
        quoted = rf"{q}[^{q}{_byte(o.escape)}\x00\r\n]*{q}"
    return rf"(?:{quoted}|(?:[^{q}{d}\r\n][^{d}\r\n]*)?)"


@dataclass
class _Parsed:
    """The records of a block as text columns: first the rows pyarrow read, then the records
    of Spark's tokenizer (padded or cut to the schema's columns, with the reason)."""

    columns: list[pa.Array | pa.ChunkedArray]
    rows: int
    keys: pa.Array | None
    """Each row's place in the block (None: the rows are in order)."""
    reasons: dict[int, str]
    where: Callable[[int], tuple[int, str]]
    """A row's line number and raw text."""
    arrow_only: bool = False
    """All rows are pyarrow's (no text is ``""`` when ``nullValue`` is empty)."""


@dataclass
class _ArrowRows:
    """Rows pyarrow read (None: none), their places in the block, and where they are."""

    columns: list[pa.ChunkedArray] | None
    places: pa.Array
    where: Callable[[int], tuple[int, str]]


class CsvFileReader:
    """Reads the files of one CSV source as ``schema`` (plus :data:`CORRUPT` when
    ``corrupt``); ``where`` names the file in errors and logs."""

    def __init__(
        self,
        settings: CsvSettings,
        schema: pa.Schema,
        *,
        corrupt: bool,
        mode: str,
        header: bool,
        where: str,
        drops: DropCounter,
    ) -> None:
        unsupported = [f"{f.name} {f.type}" for f in schema if not supported(f.type)]
        if unsupported:
            raise SchemaError(
                f"CSV data source does not support {', '.join(unsupported)} data type(s): "
                "give those columns STRING, BINARY, a number, BOOLEAN, DECIMAL, DATE or TIMESTAMP "
                "type"
            )
        self.settings, self.options = settings, settings.options
        self.schema, self.corrupt, self.mode, self.header = schema, corrupt, mode, header
        self.where, self.drops = where, drops
        self.n = len(schema)
        self.converter = ColumnConverter(settings.options, settings.datetimes)
        o = self.options
        self.fast = arrow_fast_path_ok(o) and 0 < self.n <= o.max_columns
        self.quoted_null = o.null_value == "" == o.empty_value
        if self.fast:
            f, d = _field_pattern(o), _byte(o.sep)
            self.block_pattern = rf"\A(?:(?:{f}(?:{d}{f})*)?\r?\n)*(?:{f}(?:{d}{f})*\r?)?\z"
            count = f"{{{self.n - 1}}}" if self.n <= _EXACT_COUNT else "*"
            self.line_pattern = rf"^{f}(?:{d}{f}){count}\r?$"
            self.parse_options = arrow_parse_options(o)
            self.names = [f"c{i}" for i in range(self.n)]

    # -- files -------------------------------------------------------------------------------
    def read(self, blocks: Iterable[tuple[bytes, int]]) -> Iterator[pa.Table]:
        """The tables of a file given as blocks of whole lines with their first line number."""
        try:
            if self.options.multi_line:
                yield from self._stream(blocks)
            elif self.options.line_sep is not None:
                # a record ends only at lineSep, which a block of whole lines may cut
                yield from self._blocks(record_blocks(blocks, self.options.line_sep.encode()))
            else:
                yield from self._blocks(blocks)
        except CsvSyntaxError as error:
            raise SourceError(
                f"[MALFORMED_CSV_RECORD] Cannot read CSV file {self.where} at line "
                f"{error.line}: {error.reason}. Spark fails the whole read here, whatever the "
                "parse mode: fix the file or change the option named."
            ) from None

    def _blocks(self, blocks: Iterable[tuple[bytes, int]]) -> Iterator[pa.Table]:
        tokenizer = Tokenizer(self.options)
        header = self.header
        for data, first_line in blocks:
            if header:
                found = self._header(data, first_line, tokenizer)
                if found is None:
                    continue
                header = False
                data, first_line, extra = found
                if extra:
                    yield self._finish(self._records(extra))
            parsed = self._arrow(data, first_line, tokenizer) if self.fast else None
            if parsed is None:
                text = data.decode("utf-8", errors="replace")
                parsed = self._records(tokenizer.records(text, first_line))
            yield self._finish(parsed)

    def _stream(self, blocks: Iterable[tuple[bytes, int]]) -> Iterator[pa.Table]:
        pieces = (data.decode("utf-8", errors="replace") for data, _ in blocks)
        batch: list[Record] = []
        header = self.header
        for record in stream_records(PieceReader(pieces), self.options):
            if header:
                self._check_header(record[0])
                header = False
                continue
            batch.append(record)
            if len(batch) >= _BATCH:
                yield self._finish(self._records(batch))
                batch = []
        if batch:
            yield self._finish(self._records(batch))

    def _header(
        self, data: bytes, first_line: int, tokenizer: Tokenizer
    ) -> tuple[bytes, int, list[Record]] | None:
        """The block after its header record (the first line not blank nor a comment, as
        Spark takes it), its first line, and the records after the header on that line (a
        line may hold several when it ends lines with a lone ``\\r``); None when the block has
        no header."""
        start, number = 0, first_line
        while start < len(data):
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end + 1
            text = data[start:end].decode("utf-8", errors="replace")
            found = list(tokenizer.records(text, number))
            if found:
                self._check_header(found[0][0])
                return data[end:], number + 1, found[1:]
            start, number = end, number + 1
        return None

    def _check_header(self, tokens: list[str | None]) -> None:
        problem = header_problem(tokens, self.schema, self.options)
        if problem is None:
            return
        if not self.settings.enforce_schema:
            raise SourceError(
                f"{problem}. CSV file: {self.where}. With enforceSchema=false the header must "
                "name the schema's columns in order (case-insensitive): fix the header or the "
                "schema, or set enforceSchema=true to read the columns by position."
            )
        log.warning(
            "%s. CSV file: %s (enforceSchema=true: the columns are read by position)",
            problem,
            self.where,
        )

    # -- pyarrow -----------------------------------------------------------------------------
    def _read_arrow(self, data: bytes | pa.Buffer) -> pa.Table:
        size = len(data)
        big = size > (4 << 20)
        return pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(
                column_names=self.names,
                use_threads=big,
                block_size=1 << 20 if big else max(1 << 20, size + 1),
            ),
            parse_options=self.parse_options,
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(self.names, pa.string()),
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=self.quoted_null,
            ),
        )

    def _arrow(self, data: bytes, first_line: int, tokenizer: Tokenizer) -> _Parsed | None:
        """The block read by pyarrow, with the lines it cannot read as Spark does given to the
        tokenizer; None when the block is for the tokenizer alone."""
        if not data:
            return self._records([])
        if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
            return None  # lines ended by a lone \r: pyarrow and our line numbers disagree
        o = self.options
        lead = data.lstrip(b"\r\n")
        odd_start = not _bom_agrees(lead, first_line + (len(lead) < len(data)), tokenizer)
        comment = o.comment.encode() if o.comment else b""
        comments = bool(comment) and (data.startswith(comment) or b"\n" + comment in data)
        quoted = (o.quote.encode() in data) if o.quote else (b"\0" in data)
        if not (odd_start or comments) and (not quoted or self._block_ok(data)):
            try:
                table = self._read_arrow(data)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                table = None
            if table is not None and not self._blank_rows(table):
                if table.num_rows:
                    tokenizer.start()
                columns = [self._arrow_column(c) for c in table.columns]
                where = _BlockLines(data, first_line).of_row
                return _Parsed(columns, table.num_rows, None, {}, where, arrow_only=True)
        return self._line_by_line(data, first_line, tokenizer)

    def _block_ok(self, data: bytes) -> bool:
        """Whether every line of the block is well-formed for pyarrow (their numbers of fields
        are pyarrow's to check; a byte order mark it drops is left out)."""
        start, parts = (3 if data.startswith(_BOM) else 0), []
        view = memoryview(data)
        while start < len(data):  # parts of whole lines, checked on several threads
            end = data.find(b"\n", start + _PART)
            end = len(data) if end < 0 else end + 1
            parts.append(_binary(view[start:end]))
            start = end

        def check(part: pa.Array) -> bool:
            return bool(pc.match_substring_regex(part, self.block_pattern)[0].as_py())

        if len(parts) <= 1:
            return all(map(check, parts))
        with ThreadPoolExecutor(min(len(parts), os.cpu_count() or 1)) as pool:
            return all(pool.map(check, parts))

    def _blank_rows(self, table: pa.Table) -> bool:
        """Whether a row may come from a blank line, which Spark skips (pyarrow only skips
        empty ones): possible with one column, or a separator up to U+0020."""
        if self.n > 1 and self.options.sep > " ":
            return False
        mask = None
        for column in table.columns:
            blank = pc.or_kleene(pc.is_null(column), pc.match_substring_regex(column, _SPACES))
            mask = blank if mask is None else pc.and_(mask, blank)
            if not pc.any(pc.fill_null(mask, False)).as_py():
                return False
        return True

    def _arrow_column(self, column: pa.ChunkedArray) -> pa.ChunkedArray:
        """A text column as pyarrow read it, with Spark's empty values: a quoted empty field is
        ``emptyValue`` (pyarrow: ``""``, or null when both it and ``nullValue`` are empty)."""
        texts = column
        empty = self.options.empty_value
        if not self.quoted_null and empty:
            texts = pc.if_else(pc.fill_null(pc.equal(texts, ""), False), empty, texts)
        return texts

    def _line_by_line(self, data: bytes, first_line: int, tokenizer: Tokenizer) -> _Parsed | None:
        lines = pc.split_pattern(_binary(data), b"\n").flatten()
        if data.endswith(b"\n"):
            lines = lines.slice(0, len(lines) - 1)
        checked = lines  # as pyarrow reads them: a byte order mark at the start dropped
        if len(lines) and lines[0].as_py().startswith(_BOM):
            first = pa.array([lines[0].as_py()[3:]], lines.type)
            checked = pa.concat_arrays([first, lines.slice(1)])
        shaped = pc.fill_null(pc.match_substring_regex(checked, self.line_pattern), False)
        skip = pc.or_(pc.equal(lines, b""), pc.equal(lines, b"\r"))
        if self.n > 1 and self.options.sep > " ":  # a blank line has no separator: not shaped
            unshaped = pc.indices_nonzero(pc.invert(shaped))
            blank = unshaped.filter(pc.match_substring_regex(lines.take(unshaped), _BLANK))
            skip = pc.or_(skip, row_mask(len(lines), blank.to_pylist()))
        else:
            skip = pc.or_(skip, pc.match_substring_regex(lines, _BLANK))
        if self.options.comment:
            skip = pc.or_(skip, pc.starts_with(lines, self.options.comment.encode()))
        good = pc.and_not(shaped, skip)
        if self.n > _EXACT_COUNT:
            good = pc.and_(good, self._counted(checked))
        try:
            lines.filter(good).cast(pa.large_string())
        except pa.ArrowInvalid:  # invalid UTF-8: the tokenizer reads it as Spark does
            valid = [_utf8(line) for line in lines.to_pylist()]
            good = pc.and_(good, pa.array(valid))
        rows = pc.indices_nonzero(good)
        while len(rows):  # the first line pyarrow reads
            first = rows[0].as_py()
            if _bom_agrees(lines[first].as_py(), first_line + first, tokenizer):
                break
            good, rows = _unset(good, first), rows.slice(1)
        kept = lines.filter(good)
        body = pc.binary_join(
            pa.LargeListArray.from_arrays(pa.array([0, len(kept)], pa.int64()), kept),
            pa.scalar(b"\n", pa.large_binary()),
        )[0].as_buffer()
        try:
            table = self._read_arrow(body) if len(kept) else None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table is not None and table.num_rows != len(kept):
            return None
        columns = [self._arrow_column(c) for c in table.columns] if table is not None else None
        others: list[tuple[int, Record]] = []
        first_read = rows[0].as_py() if len(rows) else len(lines)
        for index in pc.indices_nonzero(pc.invert(pc.or_(good, skip))).to_pylist():
            if index > first_read:
                tokenizer.start()
            text = lines[index].as_py().decode("utf-8", errors="replace")
            others.extend((index, record) for record in tokenizer.records(text, first_line + index))
        if len(rows):
            tokenizer.start()

        def where(row: int) -> tuple[int, str]:
            index = rows[row].as_py()
            return _line_text(lines[index].as_py(), first_line + index)

        arrow = _ArrowRows(columns, rows, where)
        return self._records([record for _, record in others], arrow, [i for i, _ in others])

    def _counted(self, lines: pa.Array) -> pa.Array:
        """Whether each line has the schema's number of fields (quoted fields taken out)."""
        o = self.options
        q = _byte(o.quote) if o.quote else None
        bare = lines
        if q is not None:
            bare = pc.replace_substring_regex(lines, rf"{q}[^{q}]*{q}", b"")
        return pc.equal(pc.count_substring(bare, o.sep.encode()), self.n - 1)

    # -- records -----------------------------------------------------------------------------
    def _records(
        self,
        records: Iterable[Record],
        arrow: _ArrowRows | None = None,
        keys: list[int] | None = None,
    ) -> _Parsed:
        """Records of the tokenizer as text columns, after the rows pyarrow read (``arrow``)
        when there are some; ``keys`` place the records among pyarrow's rows."""
        n = self.n
        texts: list[list[str | None]] = [[] for _ in range(n)]
        places: list[tuple[int, str]] = []
        reasons: dict[int, str] = {}
        first = len(arrow.places) if arrow is not None else 0
        for index, (tokens, line, raw) in enumerate(records):
            if len(tokens) != n:
                reasons[first + index] = (
                    f"the record has {len(tokens)} value(s), the schema {n} column(s)"
                )
                tokens = (list(tokens) + [None] * n)[:n]
            for column, token in zip(texts, tokens, strict=True):
                column.append(token)
            places.append((line, raw))
        columns = [pa.array(column, pa.string()) for column in texts]
        rows = first + len(places)
        if arrow is None:
            return _Parsed(columns, rows, None, reasons, places.__getitem__)
        if arrow.columns is not None:
            pairs = zip(arrow.columns, columns, strict=True)
            columns = [pa.chunked_array([*fast.chunks, slow]) for fast, slow in pairs]
        fast_where = arrow.where

        def where(row: int) -> tuple[int, str]:
            return fast_where(row) if row < first else places[row - first]

        if not keys:
            return _Parsed(columns, rows, None, reasons, where)
        order = pa.concat_arrays([arrow.places.cast(pa.int64()), pa.array(keys, pa.int64())])
        return _Parsed(columns, rows, order, reasons, where)

    def _finish(self, parsed: _Parsed) -> pa.Table:
        """The block's table: values converted, malformed records handled by the mode."""
        reasons = parsed.reasons
        values = []
        for texts, column in zip(parsed.columns, self.schema, strict=True):
            plain = parsed.arrow_only and not self.options.null_value
            converted, todo = self.converter.convert(texts, column.type, null_values=not plain)
            if todo is not None:
                converted = self._one_by_one(texts, converted, todo, column, reasons)
            values.append(converted)
        bad = sorted(reasons)
        if bad and parsed.keys is not None:
            places = parsed.keys.to_pylist()
            bad.sort(key=places.__getitem__)
        if bad and self.mode == "FAILFAST":
            line, _ = parsed.where(bad[0])
            raise failfast_error("CSV", self.where, line, reasons[bad[0]])
        if values:
            table = pa.Table.from_arrays(values, schema=self.schema)
        else:  # no data columns: only the corrupt record column, if any
            table = pa.table({"_": pa.nulls(parsed.rows)}).drop_columns(["_"])
        if self.corrupt:
            raw: list[str | None] = [None] * parsed.rows
            if self.mode == "PERMISSIVE":
                for row in bad:
                    raw[row] = parsed.where(row)[1]
            table = table.append_column(pa.field(CORRUPT, pa.string()), pa.array(raw, pa.string()))
        keys = parsed.keys
        if bad and self.mode == "DROPMALFORMED":
            self.drops.add(len(bad), self.where, parsed.where(bad[0])[0], "CSV")
            keep = pa.array([row not in reasons for row in range(parsed.rows)])
            table = table.filter(keep)
            keys = keys.filter(keep) if keys is not None else None
        if keys is not None:
            table = table.take(pc.sort_indices(keys))
        return table

    def _one_by_one(
        self,
        texts: pa.Array | pa.ChunkedArray,
        converted: pa.Array | pa.ChunkedArray,
        todo: pa.Array,
        column: pa.Field,
        reasons: dict[int, str],
    ) -> pa.Array:
        """The values the vectorised conversion left open, converted as Spark does; a value
        Spark cannot read makes its record malformed."""
        one = pa.schema([column])
        rows = pc.indices_nonzero(todo)
        found = []
        for row, text in zip(rows.to_pylist(), texts.take(rows).to_pylist(), strict=True):
            value, reason = convert([text], one, self.options, self._datetime)
            if reason is not None:
                reasons.setdefault(row, reason)
            found.append(value[column.name])
        if isinstance(converted, pa.ChunkedArray):
            converted = converted.combine_chunks()
        return pc.replace_with_mask(converted, todo, pa.array(found, column.type))

    def _datetime(self, dtype: pa.DataType, text: str) -> Any:
        return self.settings.datetimes.parse_one(datetime_type(dtype), text)


def _binary(data: bytes | memoryview) -> pa.Array:
    """``data`` as a binary array of one value, without copying it."""
    offsets = pa.array([0, len(data)], pa.int64()).buffers()[1]
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), 1, [None, offsets, pa.py_buffer(data)]
    )


def _line_text(line: bytes, number: int) -> tuple[int, str]:
    """A line pyarrow read, as its number and the raw text Spark gives (a byte order mark
    pyarrow dropped is not in it)."""
    if number == 1:
        line = line.removeprefix(_BOM)
    return number, line.decode("utf-8", errors="replace").removesuffix("\r")


def _bom_agrees(text: bytes, number: int, tokenizer: Tokenizer) -> bool:
    """Whether pyarrow reads text starting at line ``number`` (or a line break before it) as
    Spark does as to a byte order mark: pyarrow drops one at the start of what it reads,
    univocity only from the first line it parses, which Spark does not skip even when it is
    empty after the mark."""
    if not text.startswith(_BOM):
        return True
    return number == 1 and not tokenizer.started and text[3:4] not in (b"\n", b"\r", b"")


def _unset(mask: pa.Array, index: int) -> pa.Array:
    """``mask`` with ``mask[index]`` false."""
    return pa.concat_arrays([mask.slice(0, index), pa.array([False]), mask.slice(index + 1)])


def _utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class _BlockLines:
    """The lines of a block pyarrow read whole: row ``i`` is its ``i``-th non-empty line."""

    def __init__(self, data: bytes, first_line: int) -> None:
        self.data, self.first_line = data, first_line
        self._rows: pa.Array | None = None
        self._lines: pa.Array | None = None

    def of_row(self, row: int) -> tuple[int, str]:
        if self._rows is None:
            lines = pc.split_pattern(_binary(self.data), b"\n").flatten()
            empty = pc.or_(pc.equal(lines, b""), pc.equal(lines, b"\r"))
            self._lines, self._rows = lines, pc.indices_nonzero(pc.invert(empty))
        assert self._lines is not None
        index = self._rows[row].as_py()
        return _line_text(self._lines[index].as_py(), self.first_line + index)


class PieceReader:
    """``read(size)`` over decoded pieces of a file: at least ``size`` characters unless the
    file ends first (all of it for a negative size)."""

    def __init__(self, pieces: Iterator[str]) -> None:
        self.pieces = pieces

    def __call__(self, size: int) -> str:
        taken: list[str] = []
        length = 0
        for piece in self.pieces:
            taken.append(piece)
            length += len(piece)
            if 0 <= size <= length:
                break
        return "".join(taken)
