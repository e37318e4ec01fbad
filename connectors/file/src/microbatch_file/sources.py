"""Streaming file sources: ``json``, ``csv``, ``text``, ``parquet`` and ``orc``.

Each batch takes new files of a folder (or glob), oldest first, within ``maxFilesPerTrigger``
or ``maxBytesPerTrigger``; a replay reads exactly the same files and no file is ever read
twice. The connector objects here only hold their options: :meth:`FileSource.schema` looks at
the folder (once per ``load()``), the run's :class:`~._stream_reader.FileStreamReader` lists,
tracks and cleans up, and a picklable :class:`~._split_reader.FileSplitReader` reads each
:class:`~._split_reader.FileSplit`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import pyarrow as pa

import microbatch as mb
from microbatch.errors import SchemaError
from microbatch.spark_json import SparkJsonOptions

from ._csv_columns import supported
from ._csv_reader import CsvSettings
from ._datetimes import datetime_options
from ._formats import (
    TEXT_SCHEMA,
    CsvFormat,
    FileFormat,
    JsonFormat,
    OrcFormat,
    ParquetFormat,
    TextFormat,
)
from ._json_spark import JsonSettings, json_reading
from ._listing import FileEntry
from ._location import SourceLocation
from ._options import (
    CSV_OPTIONS,
    JSON_OPTIONS,
    ORC_OPTIONS,
    PARQUET_OPTIONS,
    TEXT_OPTIONS,
    FileSourceOptionSpec,
)
from ._partitions import discover_keys, infer_partition_type
from ._spark_csv import SparkCsvOptions, separator
from ._split_reader import FileSplit, corrupt_column
from ._stream_reader import FileStreamReader, discover

__all__ = [
    "SOURCES",
    "CsvFileSource",
    "FileSource",
    "FileSplit",
    "JsonFileSource",
    "OrcFileSource",
    "ParquetFileSource",
    "TextFileSource",
]


class FileSource(mb.Source):
    """What every file format shares: the options, the schema and the run's reader.

    Making one does no I/O. Subclasses set ``format_name``, ``options`` and
    :meth:`make_format`.
    """

    options: ClassVar[FileSourceOptionSpec]
    capabilities = mb.SourceCapabilities(
        replayable=True, available_now=True, user_schema="required"
    )

    _keys: tuple[str, ...] | None = None
    """The partition columns, once :meth:`schema` discovered them."""
    _resolved: bool = False
    """Whether :meth:`schema` ran (``_keys`` holds its discovery)."""

    @functools.cached_property
    def _where(self) -> SourceLocation:
        """The source path on its filesystem, unchecked (naming the filesystem does no I/O)."""
        return SourceLocation.resolve(self.opts.path)

    # -- per format -----------------------------------------------------------------------
    def make_format(self) -> FileFormat:
        """The format reader configured from this source's options (one per run)."""
        raise NotImplementedError

    def describe(self) -> str:
        return f"FileStreamSource[{self._where.show()}]"

    # -- schema ---------------------------------------------------------------------------
    def _location(self) -> SourceLocation:
        """The source path on its filesystem; Spark's ``PATH_NOT_FOUND`` when it is missing."""
        location = self._where
        location.check_exists()
        if not location.is_glob and location.fs.isfile(location.path):
            location = location.single_file()
        return location

    def schema(self) -> pa.Schema:
        """The schema given with ``.schema(...)``, or inferred from the files present now,
        with the partition columns of ``key=value`` folders at the end."""
        location = self._location()
        discovery = discover(self.opts, location)
        discovery.refresh()
        entries = list(discovery.files.values())
        keys = () if self.opts.recursive_file_lookup else discover_keys(entries, location.show())
        schema = self._resolve_schema(location, entries, keys or ())
        self._keys, self._resolved = keys, True
        return schema

    def _inference(self) -> bool:
        if not self.streaming and type(self).capabilities.user_schema == "optional":
            return True  # batch reads of self-describing formats
        if self.opts.is_set("schemaInference"):
            return bool(self.opts.schema_inference)
        session = self.session
        return bool(session is not None and session.conf.get("schemaInference"))

    def _resolve_schema(
        self, location: SourceLocation, entries: list[FileEntry], keys: tuple[str, ...]
    ) -> pa.Schema:
        entries = sorted(entries, key=lambda entry: entry.path)
        given = self.user_schema
        file_format = self.make_format()
        label = file_format.label
        if isinstance(file_format, TextFormat):
            data = TEXT_SCHEMA
        elif given is not None:
            data = given
        elif not self._inference():
            raise SchemaError(
                f"Schema must be specified when creating a streaming source from {label} files: "
                'call .schema("col TYPE, ...") before .load(), or enable inference with '
                '.option("schemaInference", True) or session.conf.set("schemaInference", True) '
                "(the schema is then inferred from the files present when the query starts)"
            )
        else:
            inferred = file_format.infer(location.fs, entries, location.show)
            if inferred is None:
                raise SchemaError(
                    f"[UNABLE_TO_INFER_SCHEMA] Unable to infer schema for {label.upper()}. It "
                    f"must be specified manually ({location.show()} holds no readable "
                    f"{label} file yet)."
                )
            data = inferred
        data = pa.schema([column.with_nullable(True) for column in data])
        partition_fields = []
        for key in keys:
            index = data.get_field_index(key)
            if given is not None and index >= 0:
                partition_fields.append(data.field(index))
            else:
                values = [value for entry in entries for k, value in entry.partition if k == key]
                partition_fields.append(pa.field(key, infer_partition_type(values)))
        data_fields = [column for column in data if column.name not in keys]
        schema = pa.schema([*data_fields, *partition_fields])
        wanted = self.opts.get("columnNameOfCorruptRecord") if file_format.has_modes else None
        corrupt, _ = corrupt_column(schema, keys, wanted)
        if corrupt is not None and not pa.types.is_string(schema.field(corrupt).type):
            raise SchemaError(
                f"The field for corrupt records must be string type and nullable: column "
                f"'{corrupt}' is {schema.field(corrupt).type}. Make it STRING, or name another "
                "column with option columnNameOfCorruptRecord."
            )
        return schema

    # -- the run --------------------------------------------------------------------------
    def stream_reader(self, context: mb.ReadContext) -> FileStreamReader:
        """Lists the folder (and, on a local one, starts watching it on the first trigger)."""
        if not self._resolved:
            self.schema()  # the partition columns, as load() would have found them
        return FileStreamReader(
            opts=self.opts,
            location=self._location(),
            file_format=self.make_format(),
            keys=self._keys,
            context=context,
            owner=self.describe(),
        )


class JsonFileSource(FileSource):
    """Newline-delimited JSON files (``multiLine``: one document per file)."""

    format_name = "json"
    description = "New JSON-lines files of a folder, each read once"
    options = JSON_OPTIONS

    def schema(self) -> pa.Schema:
        """As for every file format; a data column of a type Spark's JSON reader lacks is
        refused here, at ``load()``, as Spark refuses it."""
        schema = super().schema()
        file_format = self.make_format()
        assert isinstance(file_format, JsonFormat)
        keys = tuple(self._keys or ())
        _, data = corrupt_column(schema, keys, self.opts.column_name_of_corrupt_record)
        try:
            json_reading(data, False, file_format.mode, file_format.settings)
        except SchemaError as error:
            raise SchemaError(
                f"[UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE] The JSON datasource doesn't support "
                f"it: {error}. Give the column a type Spark's JSON reader has (STRING, BINARY, "
                "a number, BOOLEAN, DECIMAL, DATE, TIMESTAMP, ARRAY, STRUCT or MAP)."
            ) from None
        return schema

    def make_format(self) -> FileFormat:
        opts = self.opts
        syntax = SparkJsonOptions(
            allow_comments=bool(opts.allow_comments),
            allow_unquoted_field_names=bool(opts.allow_unquoted_field_names),
            allow_single_quotes=bool(opts.allow_single_quotes),
            allow_numeric_leading_zeros=bool(opts.allow_numeric_leading_zeros),
            allow_backslash_escaping_any_character=bool(
                opts.allow_backslash_escaping_any_character
            ),
            allow_unquoted_control_chars=bool(opts.allow_unquoted_control_chars),
            allow_non_numeric_numbers=bool(opts.allow_non_numeric_numbers),
            primitives_as_string=bool(opts.primitives_as_string),
            prefers_decimal=bool(opts.prefers_decimal),
        )
        settings = JsonSettings(
            options=syntax,
            datetimes=datetime_options(opts),
            line_sep=opts.line_sep,
            drop_field_if_all_null=bool(opts.drop_field_if_all_null),
            corrupt_name=opts.column_name_of_corrupt_record,
            encoding=opts.encoding if opts.is_set("encoding") else None,
        )
        return JsonFormat(mode=opts.mode, multi_line=bool(opts.multi_line), settings=settings)


class CsvFileSource(FileSource):
    """CSV files, columns matched by position."""

    format_name = "csv"
    description = "New CSV files of a folder, each read once"
    options = CSV_OPTIONS

    def schema(self) -> pa.Schema:
        """As for every file format; a data column of a type Spark's CSV reader lacks is
        refused here, at ``load()``, as Spark refuses it."""
        schema = super().schema()
        keys = set(self._keys or ())
        for column in schema:
            if column.name not in keys and not supported(column.type):
                raise SchemaError(
                    "[UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE] The CSV datasource doesn't support "
                    f"the column `{column.name}` of the type {column.type}: give it STRING, "
                    "BINARY, a number, BOOLEAN, DECIMAL, DATE or TIMESTAMP type."
                )
        return schema

    def make_format(self) -> FileFormat:
        opts = self.opts
        syntax = SparkCsvOptions(
            sep=separator(opts.delimiter if opts.is_set("delimiter") else opts.sep),
            quote=opts.quote,
            escape=opts.escape,
            char_to_escape_quote_escaping=opts.char_to_escape_quote_escaping or None,
            comment=opts.comment or None,
            ignore_leading_white_space=bool(opts.ignore_leading_white_space),
            ignore_trailing_white_space=bool(opts.ignore_trailing_white_space),
            null_value=opts.null_value,
            empty_value=opts.empty_value,
            nan_value=opts.nan_value,
            positive_inf=opts.positive_inf,
            negative_inf=opts.negative_inf,
            multi_line=bool(opts.multi_line),
            line_sep=opts.line_sep,
            unescaped_quote_handling=opts.unescaped_quote_handling,
            max_columns=opts.max_columns,
            max_chars_per_column=opts.max_chars_per_column,
        )
        settings = CsvSettings(
            options=syntax,
            datetimes=datetime_options(opts),
            enforce_schema=bool(opts.enforce_schema),
            encoding=opts.encoding,
        )
        return CsvFormat(
            mode=opts.mode,
            header=bool(opts.header),
            settings=settings,
            infer_types=bool(opts.infer_schema),
        )


class TextFileSource(FileSource):
    """Text files, one row per line in the column ``value``."""

    format_name = "text"
    description = "New text files of a folder, one row per line, each read once"
    options = TEXT_OPTIONS
    capabilities = dataclasses.replace(FileSource.capabilities, user_schema="forbidden")

    def make_format(self) -> FileFormat:
        return TextFormat(whole_text=bool(self.opts.wholetext))


class _ColumnarFileSource(FileSource):
    """A format that stores its schema: it comes from the files when none is given and
    inference is on (always for batch reads). Subclasses set ``columnar``."""

    capabilities = dataclasses.replace(FileSource.capabilities, user_schema="optional")
    columnar: ClassVar[type[ParquetFormat | OrcFormat]]

    def make_format(self) -> FileFormat:
        return self.columnar(merge_schema=bool(self.opts.merge_schema))


class ParquetFileSource(_ColumnarFileSource):
    """Parquet files."""

    format_name = "parquet"
    description = "New Parquet files of a folder, each read once"
    options = PARQUET_OPTIONS
    columnar = ParquetFormat


class OrcFileSource(_ColumnarFileSource):
    """ORC files."""

    format_name = "orc"
    description = "New ORC files of a folder, each read once"
    options = ORC_OPTIONS
    columnar = OrcFormat


SOURCES: list[type[mb.Source]] = [
    JsonFileSource,
    CsvFileSource,
    TextFileSource,
    ParquetFileSource,
    OrcFileSource,
]
