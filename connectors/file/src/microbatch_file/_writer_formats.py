"""The three output formats: how rows become bytes in one open file.

A :class:`FileFormat` is made once per sink from its options; ``open`` starts one file on an
output stream and returns an :class:`OpenFile`, which is fed record batches and closed.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass

import pyarrow as pa

from ._writer_json import JsonEncoder, timestamp_text

__all__ = [
    "TEXT_COMPRESSIONS",
    "CsvFormat",
    "FileFormat",
    "JsonFormat",
    "OpenFile",
    "ParquetFormat",
    "text_extension",
]

TEXT_COMPRESSIONS = ("none", "gzip", "bzip2", "zstd", "lz4")
"""The ``compression`` choices of the json and csv sinks."""

_STREAM_CODECS = {"gzip": ("gzip", ".gz"), "bzip2": ("bz2", ".bz2"), "zstd": ("zstd", ".zst")}
_STREAM_CODECS["lz4"] = ("lz4", ".lz4")
_PARQUET_EXTENSIONS = {
    "none": "",
    "snappy": ".snappy",
    "gzip": ".gz",
    "zstd": ".zstd",
    "lz4": ".lz4",
    "brotli": ".brotli",
}


def text_extension(compression: str) -> str:
    """The file-name suffix a text compression adds (``.gz`` for gzip, ``""`` for none)."""
    return _STREAM_CODECS[compression][1] if compression in _STREAM_CODECS else ""


class OpenFile(ABC):
    """One file being written. Not thread-safe; owned by one ``Sink.write`` call."""

    def __init__(self, stream: pa.NativeFile) -> None:
        self.stream = stream
        self.rows = 0

    @abstractmethod
    def write(self, table: pa.Table) -> None:
        """Append rows (the caller counts them in :attr:`rows`); parquet writes them as row
        groups of at most the format's ``row_group_rows``."""

    def position(self) -> int:
        """Bytes written to the file so far."""
        return int(self.stream.tell())

    @abstractmethod
    def close(self) -> None:
        """Finish the file and close its stream."""

    def discard(self) -> None:
        """Close the stream after a failure, ignoring errors (the caller deletes the file)."""
        with contextlib.suppress(Exception):  # best effort on an already failing path
            self.stream.close()


class FileFormat(ABC):
    """How one format writes files, configured from the sink's options."""

    @property
    @abstractmethod
    def extension(self) -> str:
        """The end of every file name (``.snappy.parquet``, ``.json.gz``)."""

    @abstractmethod
    def open(self, stream: pa.NativeFile, schema: pa.Schema) -> OpenFile:
        """Start a file of rows of ``schema`` on ``stream`` (which the file then owns)."""


# ----------------------------------------------------------------------------------- parquet


@dataclass(frozen=True)
class ParquetFormat(FileFormat):
    compression: str = "snappy"
    row_group_rows: int = 1024 * 1024

    @property
    def extension(self) -> str:
        return f"{_PARQUET_EXTENSIONS.get(self.compression, '.' + self.compression)}.parquet"

    def open(self, stream: pa.NativeFile, schema: pa.Schema) -> OpenFile:
        return _ParquetFile(stream, schema, self)


class _ParquetFile(OpenFile):
    def __init__(self, stream: pa.NativeFile, schema: pa.Schema, fmt: ParquetFormat) -> None:
        import pyarrow.parquet as pq

        super().__init__(stream)
        self.row_group_rows = fmt.row_group_rows
        codec = "NONE" if fmt.compression == "none" else fmt.compression
        self.writer = pq.ParquetWriter(stream, schema, compression=codec)

    def write(self, table: pa.Table) -> None:
        self.writer.write_table(table, row_group_size=self.row_group_rows)

    def close(self) -> None:
        self.writer.close()
        self.stream.close()

    def discard(self) -> None:
        with contextlib.suppress(Exception):  # best effort on an already failing path
            self.writer.close()
        super().discard()


class _TextFile(OpenFile):
    """A text file compressed as a whole: :attr:`stream` writes through the codec of
    ``compression`` (if any) into ``raw``, whose position is the file's size."""

    def __init__(self, raw: pa.NativeFile, compression: str) -> None:
        codec = _STREAM_CODECS.get(compression)
        super().__init__(raw if codec is None else pa.CompressedOutputStream(raw, codec[0]))
        self.raw = raw

    def position(self) -> int:
        return int(self.raw.tell())

    def close(self) -> None:
        self.stream.close()


# ----------------------------------------------------------------------------------- csv


@dataclass(frozen=True)
class CsvFormat(FileFormat):
    header: bool = False
    sep: str = ","
    line_sep: str = "\n"
    null_value: str = ""
    quote_all: bool = False
    compression: str = "none"

    @property
    def extension(self) -> str:
        return ".csv" + text_extension(self.compression)

    def open(self, stream: pa.NativeFile, schema: pa.Schema) -> OpenFile:
        return _CsvFile(stream, schema, self)


class _CsvFile(_TextFile):
    """CSV through pyarrow's writer; timestamps are written as ISO 8601 text as in JSON."""

    def __init__(self, raw: pa.NativeFile, schema: pa.Schema, fmt: CsvFormat) -> None:
        import pyarrow.csv as csv

        super().__init__(raw, fmt.compression)
        self.timestamps = [i for i, f in enumerate(schema) if pa.types.is_timestamp(f.type)]
        for index in self.timestamps:
            schema = schema.set(index, schema.field(index).with_type(pa.string()))
        self.schema = schema
        options = csv.WriteOptions(
            include_header=fmt.header,
            delimiter=fmt.sep,
            eol=fmt.line_sep,
            null_string=fmt.null_value,
            quoting_style="all_valid" if fmt.quote_all else "needed",
        )
        self.writer = csv.CSVWriter(self.stream, schema, write_options=options)

    def write(self, table: pa.Table) -> None:
        if self.timestamps:
            columns = list(table.columns)
            for index in self.timestamps:
                columns[index] = timestamp_text(columns[index])
            table = pa.Table.from_arrays(columns, schema=self.schema)
        self.writer.write_table(table)

    def close(self) -> None:
        self.writer.close()
        super().close()


# ----------------------------------------------------------------------------------- json


@dataclass(frozen=True)
class JsonFormat(FileFormat):
    """Newline-delimited JSON, one object per row, UTF-8.

    Timestamps and dates are ISO 8601 strings, binary is base64, maps are objects, NaN and
    infinities are the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.
    """

    ignore_null_fields: bool = True
    line_sep: str = "\n"
    compression: str = "none"

    @property
    def extension(self) -> str:
        return ".json" + text_extension(self.compression)

    def open(self, stream: pa.NativeFile, schema: pa.Schema) -> OpenFile:
        return _JsonFile(stream, schema, self)


class _JsonFile(_TextFile):
    def __init__(self, raw: pa.NativeFile, schema: pa.Schema, fmt: JsonFormat) -> None:
        super().__init__(raw, fmt.compression)
        self.encoder = JsonEncoder(
            schema, ignore_null_fields=fmt.ignore_null_fields, line_sep=fmt.line_sep
        )

    def write(self, table: pa.Table) -> None:
        for batch in table.to_batches():
            self.stream.write(self.encoder.encode(batch))
