"""Reading and inferring the schema of one file per format (json, csv, text, parquet, orc).

Text formats read exactly the bytes that were listed (a file that grows after it was taken
still reads the same rows on a replay) in blocks of whole lines, so a large file never sits in
memory whole. Parquet and ORC read their own footers and stream row groups / stripes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from microbatch.errors import SourceError

from ._csv_infer import infer_csv_schema
from ._csv_reader import CsvFileReader, CsvSettings
from ._json_infer import infer_json_schema
from ._json_spark import JsonSettings, json_reading
from ._listing import FileEntry
from ._parse_modes import DropCounter
from ._records import detect_json_encoding, is_utf8, to_utf8, whole_records

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


class FileChangedError(SourceError):
    """A file is shorter than when it was taken (it was rewritten in place)."""


def read_chunks(
    fs: Any,
    entry: FileEntry,
    where: str,
    block_size: int | None = None,
    encoding: str | None = None,
) -> Iterator[bytes]:
    """The first ``entry.size`` bytes of the file in blocks of whole lines (of about
    :data:`BLOCK_SIZE` bytes); a file in another ``encoding`` than UTF-8 is read whole and
    given as UTF-8."""
    if not is_utf8(encoding):
        assert encoding is not None
        whole = b"".join(read_chunks(fs, entry, where, block_size=entry.size or 1))
        yield from _line_blocks(to_utf8(whole, encoding), block_size or BLOCK_SIZE)
        return
    block_size = block_size or BLOCK_SIZE
    remaining, pending = entry.size, list[bytes]()  # read, not given yet: no line end in it
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
            cut = chunk.rfind(b"\n") if remaining > 0 else len(chunk) - 1
            if cut < 0:
                pending.append(chunk)  # joined once a line ends: no copy per block
                continue
            data = b"".join([*pending, chunk[: cut + 1]]) if pending else chunk[: cut + 1]
            pending = [chunk[cut + 1 :]] if cut + 1 < len(chunk) else []
            yield data


def _line_blocks(data: bytes, block_size: int) -> Iterator[bytes]:
    """``data`` in blocks of whole lines of about ``block_size`` bytes."""
    start = 0
    while start < len(data):
        cut = data.find(b"\n", start + block_size - 1)
        end = len(data) if cut < 0 else cut + 1
        yield data[start:end]
        start = end


def read_blocks(
    fs: Any, entry: FileEntry, where: str, encoding: str | None = None
) -> Iterator[tuple[bytes, int]]:
    """:func:`read_chunks`, each block with the number of its first line."""
    line = 1
    for data in read_chunks(fs, entry, where, encoding=encoding):
        yield data, line
        line += data.count(b"\n")


def _read_all(fs: Any, entry: FileEntry, where: str, encoding: str | None = None) -> bytes:
    return b"".join(read_chunks(fs, entry, where, entry.size or 1, encoding))


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
@dataclass(frozen=True)
class JsonFormat(FileFormat):
    """JSON Lines (one record per line, or per ``lineSep``), or one document per file
    (multiLine), read and inferred as Spark 4 does (see :mod:`._json_spark`)."""

    label: ClassVar[str] = "JSON"
    has_modes: ClassVar[bool] = True
    mode: str = "PERMISSIVE"
    multi_line: bool = False
    settings: JsonSettings = field(default_factory=JsonSettings)
    drops: DropCounter = field(default_factory=DropCounter, compare=False, repr=False)

    def infer(self, fs: Any, entries: list[FileEntry], show: Any) -> pa.Schema | None:
        files = ((self._bytes(fs, entry, show(entry.path)), show(entry.path)) for entry in entries)
        return infer_json_schema(files, self.settings, self.mode, self.multi_line)

    def _bytes(self, fs: Any, entry: FileEntry, where: str) -> bytes:
        """A whole file as UTF-8 (a multiLine file without ``encoding`` as Jackson detects)."""
        encoding = self.settings.encoding
        if encoding is None and self.multi_line:
            data = _read_all(fs, entry, where)
            found = detect_json_encoding(data)
            return data if found == "utf-8" else to_utf8(data, found)
        return _read_all(fs, entry, where, encoding)

    def read(
        self, fs: Any, entry: FileEntry, where: str, schema: pa.Schema, corrupt: bool
    ) -> Iterator[pa.Table]:
        reading = json_reading(schema, corrupt, self.mode, self.settings)
        if self.multi_line:
            yield reading.document(self._bytes(fs, entry, where), where, self.drops)
            return
        first = 1
        chunks = read_chunks(fs, entry, where, encoding=self.settings.encoding)
        for data in whole_records(chunks, self.settings.separator):
            table, records = reading.block(data, where, first, self.drops)
            first += records
            yield table


# -- CSV -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CsvFormat(FileFormat):
    """Delimited text, columns by position, read as Spark 4 reads it (see :mod:`._csv_reader`);
    with ``header`` the first record of each file names the columns and is not data."""

    label: ClassVar[str] = "CSV"
    has_modes: ClassVar[bool] = True
    mode: str = "PERMISSIVE"
    header: bool = False
    settings: CsvSettings = field(default_factory=CsvSettings)
    infer_types: bool = False
    drops: DropCounter = field(default_factory=DropCounter, compare=False, repr=False)

    def infer(self, fs: Any, entries: list[FileEntry], show: Any) -> pa.Schema | None:
        encoding = self.settings.encoding
        files = (read_blocks(fs, entry, show(entry.path), encoding) for entry in entries)
        return infer_csv_schema(
            files, self.settings, header=self.header, infer_types=self.infer_types
        )

    def read(
        self, fs: Any, entry: FileEntry, where: str, schema: pa.Schema, corrupt: bool
    ) -> Iterator[pa.Table]:
        reader = CsvFileReader(
            self.settings,
            schema,
            corrupt=corrupt,
            mode=self.mode,
            header=self.header,
            where=where,
            drops=self.drops,
        )
        yield from reader.read(read_blocks(fs, entry, where, self.settings.encoding))


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
        for data in read_chunks(fs, entry, where):
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
