"""The exactly-once file sinks: ``parquet``, ``json`` (newline-delimited) and ``csv``.

Each batch is written in two phases. The run's picklable part writer
(:class:`~._sink_writer.FilePartWriter`) streams each part into part files named with the
batch id and part index (``part-00007-00001-<uuid>.c000.snappy.parquet``), under Hive-style
``key=value/`` folders when the query is partitioned. The stream writer
(:class:`~._sink_writer.FileStreamWriter`) then commits the batch by recording its files in
the manifest log under ``<path>/_microbatch_metadata/``: a file becomes part of the output
only when that entry exists. A replayed batch whose entry exists writes nothing; files left by
a crashed attempt are never listed and are deleted by the next attempt. On start the stream
writer deletes temporary files of manifest writes a crash cut short, and checks that the
manifest is whole and agrees with the checkpoint's commit log (a ``CorruptCheckpointError``
otherwise).

Readers must go through the manifest (``session.read.format("parquet").load(path)`` does).
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from typing import Any, ClassVar

import fsspec
import pyarrow as pa
from fsspec.implementations.local import LocalFileSystem

import microbatch as mb
from microbatch import Option, OptionSpec, OutputMode
from microbatch.errors import ConfigurationError, OptionError, UnsupportedOperationError

from ._options import flag
from ._sink_writer import FileCommitMessage, FilePartWriter, FileStreamWriter
from ._writer_files import WriterLimits
from ._writer_formats import TEXT_COMPRESSIONS, CsvFormat, FileFormat, JsonFormat, ParquetFormat
from .sink_partitions import check_partition_columns

__all__ = [
    "SINKS",
    "CsvFileSink",
    "FileCommitMessage",
    "FilePartWriter",
    "FileSink",
    "FileStreamWriter",
    "JsonFileSink",
    "ParquetFileSink",
]

_MB = 1024 * 1024

_COMMON = OptionSpec(
    Option(
        name="path",
        required=True,
        doc="The output folder: a local path or an fsspec URL (memory://out, s3://bucket/t).",
    ),
    Option(
        name="maxRecordsPerFile",
        type="int",
        default=0,
        minimum=0,
        doc="Start a new file after this many rows (0: no limit).",
    ),
    Option(
        name="targetFileSize",
        type="int",
        default=128 * _MB,
        minimum=0,
        doc="Start a new file once a file holds this many bytes (0: no limit). Files end on a "
        "row group (parquet) or input batch boundary, so they may be a little larger.",
    ),
    Option(
        name="maxOpenFiles",
        type="int",
        default=64,
        minimum=1,
        doc="Most files one split keeps open when its rows go to many partition folders; the "
        "least recently used one is finished when another is needed.",
    ),
)


class FileSink(mb.Sink):
    """Base of the file sinks: subclasses set ``format_name``, ``options`` and
    :meth:`make_format`. Append mode only; partitioning supported; a checkpoint required.

    Making one does no I/O (it checks the options and names the filesystem).
    """

    capabilities = mb.SinkCapabilities(
        output_modes=frozenset({OutputMode.APPEND}),
        guarantee=mb.Guarantee.EXACTLY_ONCE,
        needs_checkpoint=True,
        partition_by=True,
    )
    options: ClassVar[OptionSpec] = _COMMON

    def __init__(self, options: mb.Options, *, session: Any = None) -> None:
        super().__init__(options, session=session)
        url = str(self.opts.path)
        try:
            fs, root = fsspec.core.url_to_fs(url)
        except (ValueError, ImportError) as error:
            raise ConfigurationError(
                f"{self.format_name} sink: cannot use path {url!r}: {error}"
            ) from None
        self.fs: fsspec.AbstractFileSystem = fs
        self.root: str = root.rstrip("/") or "/"
        self.url = url
        self.file_format = self.make_format()
        self.limits = self.make_limits()

    # -- per format -----------------------------------------------------------------------
    @abstractmethod
    def make_format(self) -> FileFormat:
        """The format writer configured from this sink's options."""

    def make_limits(self) -> WriterLimits:
        """Buffering and rotation limits; text formats write every 4 MB of rows per folder."""
        target = int(self.opts.target_file_size)
        flush_bytes = 4 * _MB
        return WriterLimits(
            max_records_per_file=self.opts.max_records_per_file,
            target_file_size=target,
            max_open_files=self.opts.max_open_files,
            flush_bytes=min(flush_bytes, target) if target else flush_bytes,
        )

    def check_schema(self, schema: pa.Schema) -> None:
        """Raise :class:`ConfigurationError` when the format cannot store ``schema``."""

    # -- contract -------------------------------------------------------------------------
    def describe(self) -> str:
        local = isinstance(self.fs, LocalFileSystem)
        shown = f"file:{self.root}" if local else self.fs.unstrip_protocol(self.root)
        return f"FileSink[{shown}]"

    def stream_writer(self, context: mb.WriteContext) -> FileStreamWriter:
        """Checks the output mode, the folder and the schema, then opens the manifest."""
        if context.output_mode != OutputMode.APPEND:
            raise UnsupportedOperationError(
                f"Invalid streaming output mode: {context.output_mode.value}. The "
                f"{self.format_name} file sink supports only append"
            )
        if self.fs.isfile(self.root):
            raise ConfigurationError(
                f"{self.describe()}: the path {self.url!r} is a file; the file sink writes into "
                "a folder. Give a folder path (it is created if missing)."
            )
        partition_by = tuple(context.partition_by)
        check_partition_columns(context.schema, partition_by, where=self.describe())
        self.check_schema(pa.schema([f for f in context.schema if f.name not in partition_by]))
        return FileStreamWriter(
            fs=self.fs,
            root=self.root,
            file_format=self.file_format,
            limits=self.limits,
            partition_by=partition_by,
            fsync=bool(context.state is not None and context.state.fsync),
            owner=self.describe(),
            context=context,
        )


# ----------------------------------------------------------------------------------- formats


class ParquetFileSink(FileSink):
    """Writes Parquet files (snappy-compressed by default), one or more per split."""

    format_name = "parquet"
    description = "Writes Parquet files into a folder, exactly once (manifest-tracked)."
    options = _COMMON.extend(
        Option(
            name="compression",
            default="snappy",
            choices=("none", "uncompressed", "snappy", "gzip", "zstd", "lz4", "brotli"),
            doc="Compression codec of the column data.",
        ),
        Option(
            name="rowGroupSize",
            type="int",
            default=1024 * 1024,
            minimum=1,
            doc="Most rows in one row group.",
        ),
        Option(
            name="rowGroupBytes",
            type="int",
            default=64 * _MB,
            minimum=1,
            doc="A row group is written once this many bytes of rows are buffered; also the "
            "most one split buffers in memory across all its open files.",
        ),
    )

    def make_format(self) -> FileFormat:
        codec = str(self.opts.compression)
        return ParquetFormat(
            compression="none" if codec == "uncompressed" else codec,
            row_group_rows=self.opts.row_group_size,
        )

    def make_limits(self) -> WriterLimits:
        """A folder's rows are written as a row group once ``rowGroupSize`` rows or
        ``rowGroupBytes`` (at most ``targetFileSize``) bytes are buffered."""
        limits = super().make_limits()
        group_bytes = int(self.opts.row_group_bytes)
        if limits.target_file_size:  # a small target also means small row groups
            group_bytes = min(group_bytes, limits.target_file_size)
        return dataclasses.replace(
            limits,
            flush_rows=self.opts.row_group_size,
            flush_bytes=group_bytes,
            buffer_bytes=int(self.opts.row_group_bytes),
        )


_TEXT_COMPRESSION = Option(
    name="compression",
    default="none",
    choices=TEXT_COMPRESSIONS,
    doc="Compression of whole files (adds .gz, .bz2, .zst or .lz4 to their names).",
)
_LINE_SEP = Option(name="lineSep", default="\n", doc="The text written after each row.")


class JsonFileSink(FileSink):
    """Writes newline-delimited JSON files (one object per row, UTF-8)."""

    format_name = "json"
    description = "Writes newline-delimited JSON files into a folder, exactly once."
    options = _COMMON.extend(
        _TEXT_COMPRESSION,
        Option(
            name="ignoreNullFields",
            type="bool",
            default=True,
            doc="Leave out fields whose value is null (instead of writing null).",
        ),
        _LINE_SEP,
    )

    def make_format(self) -> FileFormat:
        return JsonFormat(
            ignore_null_fields=self.opts.ignore_null_fields,
            line_sep=self.opts.line_sep,
            compression=self.opts.compression,
        )


class CsvFileSink(FileSink):
    """Writes CSV files. Columns must be flat (no lists, structs, maps or binary)."""

    format_name = "csv"
    description = "Writes CSV files into a folder, exactly once."
    options = _COMMON.extend(
        flag("header", "Write the column names as the first line of every file."),
        Option(name="sep", default=",", doc="The field separator (one character)."),
        _LINE_SEP,
        Option(name="nullValue", default="", doc="The text written for a null value."),
        flag("quoteAll", "Quote every non-null value (by default only values that need it)."),
        _TEXT_COMPRESSION,
    )

    def make_format(self) -> FileFormat:
        sep = str(self.opts.sep)
        if len(sep) != 1:
            raise OptionError(f"{self.describe()}: option sep must be one character, got {sep!r}")
        if '"' in str(self.opts.null_value):
            raise OptionError(f"{self.describe()}: option nullValue cannot contain '\"'")
        return CsvFormat(
            header=self.opts.header,
            sep=sep,
            line_sep=self.opts.line_sep,
            null_value=self.opts.null_value,
            quote_all=self.opts.quote_all,
            compression=self.opts.compression,
        )

    def check_schema(self, schema: pa.Schema) -> None:
        for field in schema:
            data_type = field.type
            if pa.types.is_dictionary(data_type):
                data_type = data_type.value_type
            if (
                pa.types.is_nested(data_type)
                or pa.types.is_binary(data_type)
                or (pa.types.is_large_binary(data_type) or pa.types.is_fixed_size_binary(data_type))
            ):
                raise ConfigurationError(
                    f"{self.describe()}: CSV data source does not support {data_type} data type "
                    f"(column {field.name!r}); write json or parquet, or convert the column "
                    "to a string first"
                )


SINKS: list[type[mb.Sink]] = [ParquetFileSink, JsonFileSink, CsvFileSink]
"""The sink classes the plugin registers."""
