"""Reading the splits of a file source: :class:`FileSplit` and :class:`FileSplitReader`.

Both pickle: a split names its files (path, the size and time they had when their batch took
them, their partition values), and the reader holds only what parsing needs (the filesystem,
the file format and its settings, the schemas). A split read in another process opens its own
files there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

import microbatch as mb
from microbatch.errors import SourceError

from ._formats import FileFormat
from ._listing import FileEntry
from ._location import SourceLocation
from ._parse_modes import CORRUPT
from ._partitions import partition_scalar
from ._retriable import transient_as_retriable

__all__ = ["FileSplit", "FileSplitReader", "corrupt_column"]

log = logging.getLogger("microbatch.file")


@dataclass(frozen=True)
class FileSplit(mb.Split):
    """Files of batch ``batch``, read one after the other by one ``read`` call."""

    batch: int
    files: tuple[FileEntry, ...]


def corrupt_column(
    schema: pa.Schema, keys: tuple[str, ...], name: str | None
) -> tuple[str | None, pa.Schema]:
    """The column receiving malformed records (``name`` when the schema has it among its data
    columns, else None), and the schema the files are parsed with (the data columns without
    it and without the partition columns)."""
    data_fields = [column for column in schema if column.name not in keys]
    corrupt = name if name is not None and name in [f.name for f in data_fields] else None
    return corrupt, pa.schema([f for f in data_fields if f.name != corrupt])


@dataclass(frozen=True)
class FileSplitReader(mb.SplitReader):
    """Reads :class:`FileSplit` values of one source.

    ``schema`` is the source's schema; ``parse_schema`` the columns read from the files;
    ``corrupt_name`` the column receiving malformed records (None when there is none);
    ``owner`` names the source in logs.
    """

    location: SourceLocation
    format: FileFormat
    schema: pa.Schema
    parse_schema: pa.Schema
    corrupt_name: str | None
    ignore_missing_files: bool
    owner: str

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        if not isinstance(split, FileSplit):
            raise SourceError(f"{self.owner}: cannot read {split!r}, which is not a FileSplit")
        for entry in split.files:
            where = self.location.show(entry.path)
            try:
                with transient_as_retriable(f"Reading file {where} of batch {split.batch}"):
                    for table in self.format.read(
                        self.location.fs,
                        entry,
                        where,
                        self.parse_schema,
                        self.corrupt_name is not None,
                    ):
                        yield from self._finish(table, entry).to_batches()
            except FileNotFoundError:
                if not self.ignore_missing_files:
                    raise SourceError(
                        f"File {where} of batch {split.batch} was removed before it was read. "
                        "Restore it, or set option ignoreMissingFiles=true to skip such files "
                        "(their rows are then not read)."
                    ) from None
                log.warning(
                    "%s: skipping file %s of batch %d, removed before it was read "
                    "(ignoreMissingFiles)",
                    self.owner,
                    where,
                    split.batch,
                )

    def _finish(self, table: pa.Table, entry: FileEntry) -> pa.Table:
        rows = table.num_rows
        columns = []
        values = dict(entry.partition)
        for column in self.schema:
            if column.name in values:
                scalar = partition_scalar(values[column.name], column.type)
                columns.append(pa.repeat(scalar, rows))
            elif column.name == self.corrupt_name:
                if CORRUPT in table.column_names:
                    columns.append(table.column(CORRUPT))
                else:
                    columns.append(pa.nulls(rows, pa.string()))
            else:
                columns.append(table.column(column.name))
        return pa.Table.from_arrays(columns, schema=self.schema)
