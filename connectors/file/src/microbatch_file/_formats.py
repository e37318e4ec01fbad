"""Reading and inferring the schema of one file per format (json, csv, text, parquet, orc).

Text formats read exactly the bytes that were listed (a file that grows after it was taken
still reads the same rows on a replay) in blocks of whole lines, so a large file never sits in
memory whole. Parquet and ORC read their own footers and stream row groups / stripes.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache, reduce
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from microbatch.errors import MalformedJsonError, SourceError
from microbatch.json_decoder import JsonDecoder, lines_safe_for_arrow

from ._listing import FileEntry
from ._parse_modes import (
    CORRUPT,
    CsvSettings,
    DropCounter,
    MalformedRecordError,
    failfast_error,
    parse_csv,
)

__all__ = [
    "CsvFormat",
    "FileChangedError",
    "FileFormat",
    "JsonFormat",
    "OrcFormat",
    "ParquetFormat",
    "TextFormat",
]

BLOCK_SIZE = 16 << 20

_MAX_NESTING = 1000
"""Lines with more opening brackets than this are inferred with the stdlib: pyarrow's schema
inference crashes the process (stack overflow) on values nested tens of thousands of levels
deep."""


class FileChangedError(SourceError):
    """A file is shorter than when it was taken (it was rewritten in place)."""


def read_blocks(
    fs: Any, entry: FileEntry, where: str, block_size: int | None = None
) -> Iterator[tuple[bytes, int]]:
    """The first ``entry.size`` bytes of the file in blocks of whole lines (of about
    :data:`BLOCK_SIZE` bytes), each with the number of its first line."""
    block_size = block_size or BLOCK_SIZE
    remaining, carry, line = entry.size, b"", 1
    with fs.open(entry.path, "rb") as handle:
        while remaining > 0:
            chunk = handle.read(min(block_size, remaining))
            if not chunk:
                raise FileChangedError(
                    f"File {where} has {entry.size - remaining} bytes, but {entry.size} were "
                    "listed when it was taken: it was rewritten in place. Files must not change "
                    "once they are in the source folder (write them elsewhere, or under a name "
                    "ending in .tmp, then rename them into place)."
                )
            remaining -= len(chunk)
            data = carry + chunk
            carry = b""
            if remaining > 0:
                cut = data.rfind(b"\n")
                if cut < 0:
                    carry = data
                    continue
                data, carry = data[: cut + 1], data[cut + 1 :]
            yield data, line
            line += data.count(b"\n")


def _read_all(fs: Any, entry: FileEntry, where: str) -> bytes:
    return b"".join(data for data, _ in read_blocks(fs, entry, where, block_size=entry.size or 1))


class FileFormat(ABC):
    """One file format: schema inference and reading files as tables of a schema."""

    label: ClassVar[str] = ""
    has_modes: ClassVar[bool] = False

    @abstractmethod
    def infer(self, fs: Any, entries: list[FileEntry], show: Any) -> pa.Schema | None:
        """The data schema of ``entries`` (None when there is nothing to infer from)."""

    @abstractmethod
    def read(
        self, fs: Any, entry: FileEntry, where: str, schema: pa.Schema, corrupt: bool
    ) -> Iterator[pa.Table]:
        """Tables of ``schema`` (plus the corrupt-record column when ``corrupt``)."""

    def dropped_rows(self) -> int:
        """Malformed lines dropped so far under ``mode=DROPMALFORMED`` (any thread)."""
        drops = getattr(self, "drops", None)
        return drops.count if isinstance(drops, DropCounter) else 0


# -- JSON ------------------------------------------------------------------------------------
def _arrow_can_infer(data: bytes) -> bool:
    """Whether pyarrow's schema inference may read ``data`` without crashing the process: no
    line starts with ``null`` and none nests deeper than :data:`_MAX_NESTING` levels."""
    if not lines_safe_for_arrow(data):
        return False
    if data.count(b"[") + data.count(b"{") <= _MAX_NESTING:
        return True
    text = pa.array([data], pa.large_binary()).cast(pa.large_string())
    lines = pc.split_pattern(text, pattern="\n").flatten()
    opened = pc.add(pc.count_substring(lines, "["), pc.count_substring(lines, "{"))
    return bool(pc.max(opened).as_py() <= _MAX_NESTING)


_MAX_DEPTH = 100
"""Inferred types nested deeper than this are left out of the schema (their documents are
read as the rest of the data has them): the schema's own handling (merging, checkpoint
pinning, casts) recurses per level and would exceed Python's recursion limit."""


def _depth(dtype: pa.DataType) -> int:
    """How many levels ``dtype`` nests (1 for a flat type); iterative, for any depth."""
    deepest, stack = 0, [(dtype, 1)]
    while stack:
        current, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(current, pa.StructType):
            stack.extend((f.type, level + 1) for f in current)
        elif isinstance(current, pa.ListType | pa.LargeListType):
            stack.append((current.value_type, level + 1))
    return deepest


def _json_type(value: Any) -> pa.DataType:
    if value is None:
        return pa.null()
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int64()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, list):
        return pa.list_(reduce(merge_types, map(_json_type, value), pa.null()))
    if isinstance(value, dict):
        return pa.struct([pa.field(str(k), _json_type(v)) for k, v in value.items()])
    return pa.string()


def merge_types(left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """The type that holds values of both (Spark's JSON inference rules: numbers widen to
    DOUBLE, structs merge their fields, anything else that differs becomes STRING)."""
    if left == right:
        return left
    if pa.types.is_null(left):
        return right
    if pa.types.is_null(right):
        return left
    numeric = (pa.types.is_integer, pa.types.is_floating)
    if any(test(left) for test in numeric) and any(test(right) for test in numeric):
        if pa.types.is_integer(left) and pa.types.is_integer(right):
            return pa.int64()
        return pa.float64()
    if isinstance(left, pa.StructType) and isinstance(right, pa.StructType):
        fields = {f.name: f.type for f in left}
        for f in right:
            fields[f.name] = merge_types(fields[f.name], f.type) if f.name in fields else f.type
        return pa.struct([pa.field(name, dtype) for name, dtype in fields.items()])
    if isinstance(left, pa.ListType) and isinstance(right, pa.ListType):
        return pa.list_(merge_types(left.value_type, right.value_type))
    return pa.string()


def _spark_json_type(dtype: pa.DataType) -> pa.DataType:
    """Inferred JSON types as Spark has them: nulls and timestamps as STRING, sorted fields."""
    if pa.types.is_null(dtype) or pa.types.is_timestamp(dtype) or pa.types.is_date(dtype):
        return pa.string()
    if isinstance(dtype, pa.StructType):
        fields = sorted(dtype, key=lambda f: f.name)
        return pa.struct([f.with_type(_spark_json_type(f.type)) for f in fields])
    if isinstance(dtype, pa.ListType):
        return pa.list_(_spark_json_type(dtype.value_type))
    return dtype


def _merged_schema(types: list[pa.DataType]) -> pa.Schema | None:
    merged = reduce(merge_types, types, pa.null())
    if not isinstance(merged, pa.StructType):
        return None
    return pa.schema(list(_spark_json_type(merged)))


@dataclass(frozen=True)
class JsonFormat(FileFormat):
    """Newline-delimited JSON (one object per line), or one document per file (multiLine)."""

    label: ClassVar[str] = "JSON"
    has_modes: ClassVar[bool] = True
    mode: str = "PERMISSIVE"
    multi_line: bool = False
    drops: DropCounter = field(default_factory=DropCounter, compare=False, repr=False)

    def infer(self, fs: Any, entries: list[FileEntry], show: Any) -> pa.Schema | None:
        import pyarrow.json as pajson

        types: list[pa.DataType] = []
        for entry in entries:
            data = _read_all(fs, entry, show(entry.path))
            if not data.strip():
                continue
            if not self.multi_line and _arrow_can_infer(data):
                try:
                    table = pajson.read_json(pa.BufferReader(data))
                    whole = pa.struct(list(table.schema))
                    if _depth(whole) <= _MAX_DEPTH:
                        types.append(whole)
                        continue
                except (pa.ArrowInvalid, UnicodeDecodeError, ValueError):
                    pass
            for document in self._documents(data):
                if isinstance(document, dict):
                    try:
                        dtype = _json_type(document)
                    except RecursionError:
                        continue  # nested too deeply to infer; read as malformed
                    if _depth(dtype) <= _MAX_DEPTH:
                        types.append(dtype)
        return _merged_schema(types)

    def _documents(self, data: bytes) -> Iterator[Any]:
        if self.multi_line:
            try:
                value = json.loads(data)
            except (ValueError, UnicodeDecodeError, RecursionError):
                return
            yield from value if isinstance(value, list) else [value]
            return
        for line in data.split(b"\n"):
            try:
                yield json.loads(line)
            except (ValueError, UnicodeDecodeError, RecursionError):
                continue

    def read(
        self, fs: Any, entry: FileEntry, where: str, schema: pa.Schema, corrupt: bool
    ) -> Iterator[pa.Table]:
        if self.multi_line:
            yield self._read_document(_read_all(fs, entry, where), where, schema, corrupt)
            return
        for data, first_line in read_blocks(fs, entry, where):
            yield self._decode(data, schema, corrupt, where, first_line)

    def _decode(
        self,
        data: bytes,
        schema: pa.Schema,
        corrupt: bool,
        where: str,
        first_line: int = 1,
        unit: str = "line",
    ) -> pa.Table:
        """The rows of a block of JSON lines as ``schema`` (plus :data:`CORRUPT` when
        ``corrupt``); ``unit`` names what the numbers count in errors (``record`` for
        multi-line documents). Dropped lines are counted in :attr:`drops` and logged."""
        decoder = _decoder(schema, self.mode, CORRUPT if corrupt else None)
        try:
            result = decoder.decode_lines(data, first_line=first_line)
        except MalformedJsonError as error:
            line = error.record.line or first_line
            raise failfast_error("JSON", where, line, error.record.message, unit) from error
        if result.dropped and result.malformed:
            first = result.malformed[0].line or first_line
            self.drops.add(len(result.malformed), where, first, "JSON", unit)
        return result.table

    def _read_document(self, data: bytes, where: str, schema: pa.Schema, corrupt: bool) -> pa.Table:
        if not data.strip():
            return self._decode(b"", schema, corrupt, where)
        try:
            value = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            line = getattr(error, "lineno", 1)
            if self.mode == "FAILFAST":
                raise MalformedRecordError(
                    f"[MALFORMED_RECORD_IN_PARSING] Malformed JSON document in {where} at line "
                    f"{line} (parse mode FAILFAST, multiLine): {error}. Fix the file, or set "
                    "option mode to PERMISSIVE or DROPMALFORMED."
                ) from None
            if self.mode == "DROPMALFORMED":
                self.drops.add(1, where, line, "JSON", "record")
                return self._decode(b"", schema, corrupt, where)
            row: dict[str, Any] = {}
            full = schema
            if corrupt:
                row[CORRUPT] = data.decode("utf-8", errors="replace")
                full = schema.append(pa.field(CORRUPT, pa.string()))
            return pa.Table.from_pylist([row], schema=full)
        documents = value if isinstance(value, list) else [value]
        lines = b"\n".join(json.dumps(doc, ensure_ascii=False).encode() for doc in documents)
        return self._decode(lines + b"\n", schema, corrupt, where, unit="record")


@lru_cache(maxsize=64)
def _decoder(schema: pa.Schema, mode: str, corrupt: str | None) -> JsonDecoder:
    """One decoder per schema and mode (building one reads pyarrow's options for each column)."""
    return JsonDecoder(schema, mode=mode, corrupt_column=corrupt)


# -- CSV -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CsvFormat(FileFormat):
    """Delimited text, columns by position; the first line of each file is skipped with
    ``header``."""

    label: ClassVar[str] = "CSV"
    has_modes: ClassVar[bool] = True
    mode: str = "PERMISSIVE"
    header: bool = False
    settings: CsvSettings = field(default_factory=CsvSettings)
    infer_types: bool = False
    drops: DropCounter = field(default_factory=DropCounter, compare=False, repr=False)

    def _body(self, data: bytes, first: bool) -> tuple[bytes, int]:
        """``data`` without the header line (first block of a file), and its first line."""
        if not (first and self.header):
            return data, 0
        cut = data.find(b"\n")
        return (b"", 1) if cut < 0 else (data[cut + 1 :], 1)

    def infer(self, fs: Any, entries: list[FileEntry], show: Any) -> pa.Schema | None:
        import pyarrow.csv as pacsv

        names: list[str] | None = None
        types: list[pa.DataType] = []
        for entry in entries:
            data = _read_all(fs, entry, show(entry.path))
            lines = [
                line.rstrip(b"\r")
                for line in data.split(b"\n")
                if line.strip()
                and not (self.settings.comment and line.startswith(self.settings.comment.encode()))
            ]
            if not lines:
                continue
            if names is None:
                first = self.settings.tokens(lines[0].decode("utf-8", errors="replace"))
                names = [
                    (token.strip() or f"_c{index}") if self.header else f"_c{index}"
                    for index, token in enumerate(first)
                ]
            if not self.infer_types:
                continue
            body = b"\n".join(lines[1:] if self.header else lines) + b"\n"
            try:
                table = pacsv.read_csv(
                    pa.BufferReader(body),
                    read_options=pacsv.ReadOptions(column_names=names),
                    parse_options=self.settings.parse_options(),
                    convert_options=pacsv.ConvertOptions(
                        null_values=[self.settings.null_value], strings_can_be_null=True
                    ),
                )
            except (pa.ArrowInvalid, UnicodeDecodeError, ValueError):
                continue
            types.append(pa.struct(list(table.schema)))
        if names is None:
            return None
        if not self.infer_types or not types:
            return pa.schema([pa.field(name, pa.string()) for name in names])
        merged = reduce(merge_types, types, pa.null())
        return pa.schema(
            [f.with_type(pa.string() if pa.types.is_null(f.type) else f.type) for f in merged]
        )

    def read(
        self, fs: Any, entry: FileEntry, where: str, schema: pa.Schema, corrupt: bool
    ) -> Iterator[pa.Table]:
        for data, first_line in read_blocks(fs, entry, where):
            body, skipped = self._body(data, first_line == 1)
            yield parse_csv(
                body,
                schema=schema,
                settings=self.settings,
                mode=self.mode,
                corrupt=corrupt,
                where=where,
                first_line=first_line + skipped,
                drops=self.drops,
            )


# -- text ------------------------------------------------------------------------------------
TEXT_SCHEMA = pa.schema([pa.field("value", pa.string())])


def _text_lines(data: bytes) -> pa.Array:
    if data.endswith(b"\n"):
        data = data[:-1]
    try:
        text = pa.array([data], pa.large_binary()).cast(pa.large_string())
    except pa.ArrowInvalid:
        text = pa.array([data.decode("utf-8", errors="replace")], pa.large_string())
    lines = pc.split_pattern(text, pattern="\n").flatten()
    return pc.utf8_rtrim(lines, characters="\r").cast(pa.string())


@dataclass(frozen=True)
class TextFormat(FileFormat):
    """One row per line (``value``), or one row per file with ``wholetext``."""

    label: ClassVar[str] = "Text"
    whole_text: bool = False

    def infer(self, fs: Any, entries: list[FileEntry], show: Any) -> pa.Schema | None:
        return TEXT_SCHEMA

    def read(
        self, fs: Any, entry: FileEntry, where: str, schema: pa.Schema, corrupt: bool
    ) -> Iterator[pa.Table]:
        if self.whole_text:
            data = _read_all(fs, entry, where)
            yield pa.table([pa.array([data.decode("utf-8", errors="replace")])], schema=schema)
            return
        for data, _ in read_blocks(fs, entry, where):
            if data:
                yield pa.table([_text_lines(data)], schema=schema)


# -- parquet and ORC -------------------------------------------------------------------------
def conform(batch: pa.RecordBatch, schema: pa.Schema, where: str) -> pa.Table:
    """``batch`` as ``schema``: columns by name, cast where the file's type differs, nulls for
    columns the file lacks."""
    columns = []
    for column in schema:
        index = batch.schema.get_field_index(column.name)
        if index < 0:
            columns.append(pa.nulls(batch.num_rows, column.type))
            continue
        values = batch.column(index)
        if values.type != column.type:
            try:
                values = values.cast(column.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise SourceError(
                    f"File {where}: column '{column.name}' has type {values.type}, which cannot "
                    f"be read as {column.type} of the source schema ({error}). Give the schema "
                    "the file's type, or rewrite the file."
                ) from None
        columns.append(values)
    return pa.Table.from_arrays(columns, schema=schema)


def _without_metadata(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True).remove_metadata() for f in schema])


_Chunks = Callable[[list[str]], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class _ColumnarFormat(FileFormat):
    """A binary format that stores its schema and is read in chunks of columns (Parquet,
    ORC): subclasses say how to open a file."""

    merge_schema: bool = False

    @abstractmethod
    def _open(self, handle: Any) -> tuple[pa.Schema, _Chunks]:
        """The schema stored in the open file ``handle``, and a function giving the file's
        rows, one chunk at a time, of the named columns only."""

    def infer(self, fs: Any, entries: list[FileEntry], show: Any) -> pa.Schema | None:
        """The schema of the first file by path, or of all files merged with ``mergeSchema``."""
        if not entries:
            return None
        ordered = sorted(entries, key=lambda entry: entry.path)
        chosen = ordered if self.merge_schema else ordered[:1]
        schemas = []
        for entry in chosen:
            try:
                with fs.open(entry.path, "rb") as handle:
                    schemas.append(_without_metadata(self._open(handle)[0]))
            except (pa.ArrowInvalid, OSError) as error:
                raise SourceError(
                    f"Cannot read the schema of {show(entry.path)} as {self.label}: {error}"
                ) from None
        try:
            return pa.unify_schemas(schemas, promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
            raise SourceError(
                f"The {self.label} files have schemas that cannot be merged: {error}"
            ) from None

    def read(
        self, fs: Any, entry: FileEntry, where: str, schema: pa.Schema, corrupt: bool
    ) -> Iterator[pa.Table]:
        with fs.open(entry.path, "rb") as handle:
            try:
                stored, chunks = self._open(handle)
            except (pa.ArrowInvalid, OSError) as error:
                raise SourceError(
                    f"File {where} is not a readable {self.label} file: {error}"
                ) from None
            for chunk in chunks([name for name in schema.names if name in stored.names]):
                yield conform(chunk, schema, where)


@dataclass(frozen=True)
class ParquetFormat(_ColumnarFormat):
    """Parquet files, read one row group at a time."""

    label: ClassVar[str] = "Parquet"

    def _open(self, handle: Any) -> tuple[pa.Schema, _Chunks]:
        import pyarrow.parquet as pq

        file = pq.ParquetFile(handle)
        return file.schema_arrow, lambda columns: file.iter_batches(
            batch_size=65536, columns=columns
        )


@dataclass(frozen=True)
class OrcFormat(_ColumnarFormat):
    """ORC files, read one stripe at a time."""

    label: ClassVar[str] = "ORC"

    def _open(self, handle: Any) -> tuple[pa.Schema, _Chunks]:
        import pyarrow.orc as paorc

        file = paorc.ORCFile(handle)
        return file.schema, lambda columns: (
            file.read_stripe(stripe, columns=columns) for stripe in range(file.nstripes)
        )
