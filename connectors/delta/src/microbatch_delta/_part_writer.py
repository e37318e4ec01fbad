"""Writing the data files of one part of a batch into a Delta table's folder.

A :class:`DeltaPartWriter` streams the rows of one part into parquet files inside the table's
folder (hive partition folders for the partition columns, as Delta's writers lay them out) and
returns their ``add`` actions as :class:`AddFile` records. Nothing it writes is visible to a
reader until those actions are committed to the log: a file the log does not name is not part
of the table (``VACUUM`` removes it; :func:`delete_files` removes it at once).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

import microbatch as mb

from ._delta_schema import HIVE_DEFAULT_PARTITION, delta_arrow_schema, partition_text_array
from ._parquet_files import parquet_options, write_parquet_files
from ._stats import file_stats
from ._table import DeltaTarget, storage_error_text

if TYPE_CHECKING:
    from deltalake.transaction import AddAction

__all__ = [
    "STAGING_FOLDER",
    "AddFile",
    "DeltaFilesMessage",
    "DeltaPartWriter",
    "delete_files",
    "read_files",
]

STAGING_FOLDER = "_microbatch_staging"
"""The folder, under the table root, of files staged for a commit that rewrites rows (merge).
Readers skip folders whose names start with an underscore, and so does ``VACUUM``."""

_ROW_GROUP_ROWS = 1 << 20
_MAX_PARTITIONS = 1 << 20


@dataclass(frozen=True)
class AddFile:
    """One data file written by a part: what its ``add`` action says. Small and picklable."""

    path: str
    """The file's path relative to the table root, '/'-separated and not URL-encoded (delta-rs
    encodes it in the log: a folder ``s=a%20b`` is ``s=a%2520b`` there)."""
    size: int
    """Bytes."""
    partition_values: tuple[tuple[str, str | None], ...]
    """``(column, Delta's text of the value or None for null)`` in ``partition_by`` order."""
    modification_time: int
    """Milliseconds since the epoch."""
    num_records: int
    stats: str
    """Delta's stats JSON (``numRecords``, ``minValues``, ``maxValues``, ``nullCount``)."""

    def to_action(self) -> AddAction:
        """The delta-rs ``AddAction`` of this file (``data_change=True``)."""
        from deltalake.transaction import AddAction

        return AddAction(
            self.path,
            self.size,
            dict(self.partition_values),
            self.modification_time,
            True,
            self.stats,
        )


@dataclass(frozen=True)
class DeltaFilesMessage(mb.CommitMessage):
    """The files one part wrote (empty when the part had no rows)."""

    files: tuple[AddFile, ...]


class DeltaPartWriter(mb.PartWriter):
    """Writes the parts of batches as parquet data files of a Delta table.

    ``schema`` is the table's Arrow schema (Delta-compatible, partition columns included):
    every batch is matched to it by column name and cast to it (a missing nullable column is
    written as nulls; timestamps finer than microseconds are truncated to microseconds).
    ``partition_by`` columns become the folders ``col=value`` and are left out of the files, as
    Delta lays a partitioned table out. With ``staging=True`` the files are written, unpartitioned
    and with every column, under ``_microbatch_staging/<query id>/<batch id>/`` for a commit that
    reads them back (:func:`read_files`); ``partition_by`` is then ignored.
    ``max_records_per_file`` caps the rows of one file (Delta's ``maxRecordsPerFile``);
    ``num_indexed_cols`` keeps statistics for only the first that many leaf columns of the
    files (Delta's ``delta.dataSkippingNumIndexedCols``); the default, -1, keeps them for all,
    since delta-rs's pyarrow dataset reader skips files that lack a column's bounds for any
    filter on it (and so reads no bounds at all from a file where one is missing).

    Pickles (a target, a schema and a few numbers); the filesystem is opened inside
    :meth:`write`, so a copy can write in another process.
    """

    def __init__(
        self,
        target: DeltaTarget,
        schema: pa.Schema,
        partition_by: tuple[str, ...] = (),
        *,
        staging: bool = False,
        max_records_per_file: int | None = None,
        num_indexed_cols: int = -1,
    ) -> None:
        missing = [name for name in partition_by if name not in schema.names]
        if missing and not staging:
            raise mb.SchemaError(
                f"Partition column(s) {', '.join(missing)} are not columns of the data "
                f"(columns: {', '.join(schema.names)})"
            )
        if max_records_per_file is not None and max_records_per_file < 1:
            raise ValueError("max_records_per_file must be 1 or more")
        self.target = target
        # the types Delta holds (a no-op for a table's schema); statistics and readers rely on it
        self.schema = delta_arrow_schema(schema)
        self.partition_by = () if staging else tuple(partition_by)
        self.staging = staging
        self.max_records_per_file = max_records_per_file
        self.num_indexed_cols = num_indexed_cols
        self._schemas()  # refuse clashing names now rather than in write()

    def write(self, data: pa.RecordBatchReader, part: mb.PartContext) -> DeltaFilesMessage:
        """Write one part's rows; returns their files, none when the part had no rows."""
        file_schema, write_schema = self._schemas()
        float_columns = _float_columns(file_schema)
        nan_columns: set[str] = set()
        batches = self._conformed(data, part, write_schema, float_columns, nan_columns)
        first = next(batches, None)
        if first is None:
            return DeltaFilesMessage(())

        def stream() -> Iterator[pa.RecordBatch]:
            yield first
            yield from batches

        filesystem, root = self._filesystem()
        folder = self._folder(part)
        base_dir = _join(root, folder)
        written: list[Any] = []
        prefix = f"part-{part.batch_id:05d}-{part.part_index:05d}-{uuid.uuid4()}"
        template = f"{prefix}-{{i}}.c000.snappy.parquet"
        # Row groups of up to 1Mi rows, gathered before they are written: smaller ones (the
        # default writes each incoming batch) make files ~25% larger and slower to write.
        group_rows = min(self.max_records_per_file or _ROW_GROUP_ROWS, _ROW_GROUP_ROWS)
        partitioning = (
            ds.partitioning(
                pa.schema([(_escape(name), pa.string()) for name in self.partition_by]),
                flavor="hive",
            )
            if self.partition_by
            else None
        )
        try:
            if not self.partition_by:
                write_parquet_files(
                    stream(),
                    write_schema,
                    filesystem,
                    base_dir,
                    template,
                    group_rows,
                    self.max_records_per_file,
                    written.append,
                )
            else:
                ds.write_dataset(
                    pa.RecordBatchReader.from_batches(write_schema, stream()),
                    base_dir,
                    format="parquet",
                    filesystem=filesystem,
                    partitioning=partitioning,
                    basename_template=template,
                    file_options=parquet_options(file_schema),
                    existing_data_behavior="overwrite_or_ignore",
                    max_rows_per_file=self.max_records_per_file or 0,
                    min_rows_per_group=group_rows,
                    max_rows_per_group=group_rows,
                    max_partitions=_MAX_PARTITIONS,
                    preserve_order=self.staging,
                    file_visitor=written.append,
                )
        except BaseException as error:
            self._remove_written(filesystem, root, base_dir, prefix, written)
            if isinstance(error, OSError):  # the store went away: the batch runs again
                raise mb.RetriableError(
                    f"could not write part {part.part_index} of batch {part.batch_id} to the "
                    f"Delta table at {self.target.uri}: {storage_error_text(error)}; the batch "
                    "runs again"
                ) from error
            raise
        now = int(time.time() * 1000)
        files = []
        for visited in written:
            relative = _relative(visited.path, root)
            metadata = visited.metadata
            files.append(
                AddFile(
                    path=relative,
                    size=int(visited.size),
                    partition_values=self._partition_values(relative, folder),
                    modification_time=now,
                    num_records=metadata.num_rows,
                    stats=file_stats(
                        metadata, file_schema, nan_columns, num_indexed_cols=self.num_indexed_cols
                    ),
                )
            )
        files.sort(key=_file_order)
        return DeltaFilesMessage(tuple(files))

    # --- helpers ---------------------------------------------------------------------------

    def _schemas(self) -> tuple[pa.Schema, pa.Schema]:
        """(the schema inside the files, the schema handed to write_dataset)."""
        if not self.partition_by:
            return self.schema, self.schema
        kept = [field for field in self.schema if field.name not in self.partition_by]
        # named as their folders are: hive partitioning does not escape column names
        text = [pa.field(_escape(name), pa.string()) for name in self.partition_by]
        clash = {field.name for field in kept} & {field.name for field in text}
        if clash:
            raise mb.SchemaError(
                f"Partition column(s) {', '.join(sorted(clash))} spelt with %-escapes clash "
                f"with data columns of the same name"
            )
        return pa.schema(kept), pa.schema(kept + text)

    def _conformed(
        self,
        data: pa.RecordBatchReader,
        part: mb.PartContext,
        write_schema: pa.Schema,
        float_columns: Sequence[str],
        nan_columns: set[str],
    ) -> Iterator[pa.RecordBatch]:
        for batch in data:
            if batch.num_rows == 0:
                continue
            table_batch = conform_batch(batch, self.schema, part)
            for name in float_columns:
                if name not in nan_columns and _has_nan(table_batch.column(name)):
                    nan_columns.add(name)
            if self.partition_by:
                data_fields = len(write_schema) - len(self.partition_by)
                arrays = [table_batch.column(name) for name in write_schema.names[:data_fields]]
                for name in self.partition_by:
                    column = table_batch.column(name)
                    arrays.append(partition_text_array(column, column.type))
                table_batch = pa.RecordBatch.from_arrays(arrays, schema=write_schema)
            yield table_batch

    def _remove_written(
        self, filesystem: pafs.FileSystem, root: str, base_dir: str, prefix: str, written: list[Any]
    ) -> None:
        """After a failed write: delete the files it finished and, on a local table, any it
        left half written (found by their unique name prefix)."""
        paths = {visited.path for visited in written}
        if self.target.is_local:
            for folder, _, names in os.walk(base_dir):
                paths.update(
                    os.path.join(folder, name) for name in names if name.startswith(prefix)
                )
        for path in paths:
            with contextlib.suppress(OSError):
                filesystem.delete_file(path)

    def _filesystem(self) -> tuple[pafs.FileSystem, str]:
        if self.target.is_local:
            return pafs.LocalFileSystem(), self.target.uri.rstrip("/") or "/"
        return self.target.filesystem(), "/"

    def _folder(self, part: mb.PartContext) -> str:
        if not self.staging:
            return ""
        query = part.query_id or "query"
        return f"{STAGING_FOLDER}/{query}/{part.batch_id}"

    def _partition_values(self, relative: str, folder: str) -> tuple[tuple[str, str | None], ...]:
        if not self.partition_by:
            return ()
        inner = relative[len(folder) + 1 :] if folder else relative
        segments = inner.split("/")[:-1]
        values: list[tuple[str, str | None]] = []
        for name, segment in zip(self.partition_by, segments, strict=True):
            key = _escape(name) + "="
            if not segment.startswith(key):
                raise mb.SinkError(f"Unexpected partition folder {segment!r} in {relative!r}")
            text = unquote(segment[len(key) :])
            values.append((name, None if text in ("", HIVE_DEFAULT_PARTITION) else text))
        return tuple(values)


def _escape(name: str) -> str:
    """A column name as its partition folders spell it: as it is (Polars reads the names from
    the folders and does not unescape them) but for ``/``, which would make two folders."""
    if "/" not in name and "\\" not in name:
        return name
    return quote(name, safe="")


def conform_batch(
    batch: pa.RecordBatch, schema: pa.Schema, part: mb.PartContext | None = None
) -> pa.RecordBatch:
    """``batch`` as a batch of ``schema``: columns matched by name, cast, missing ones null.

    Raises ``SchemaError`` for a column the table does not have or a missing non-nullable one,
    and ``SinkError`` naming the column for a value that does not fit its type (an overflow,
    a null in a non-nullable column).
    """
    where = f" (batch {part.batch_id}, part {part.part_index})" if part is not None else ""
    extra = [name for name in batch.schema.names if schema.get_field_index(name) < 0]
    if extra:
        raise mb.SchemaError(
            f"Column(s) {', '.join(extra)} are not in the Delta table's schema "
            f"({', '.join(schema.names)}){where}"
        )
    arrays = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            if not field.nullable:
                raise mb.SchemaError(
                    f"Column '{field.name}' is not nullable in the Delta table but the data "
                    f"has no such column{where}"
                )
            arrays.append(pa.nulls(batch.num_rows, field.type))
            continue
        column = batch.column(index)
        if column.type != field.type:
            try:
                column = pc.cast(
                    column, options=pc.CastOptions(field.type, allow_time_truncate=True)
                )
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise mb.SinkError(
                    f"Column '{field.name}' of type {column.type} cannot be written as "
                    f"{field.type}{where}: {exc}"
                ) from None
        if not field.nullable and column.null_count:
            raise mb.SinkError(
                f"Column '{field.name}' is not nullable in the Delta table but {column.null_count} "
                f"row(s) have a null there{where}"
            )
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _float_columns(schema: pa.Schema) -> list[str]:
    return [field.name for field in schema if pa.types.is_floating(field.type)]


def _has_nan(column: pa.Array) -> bool:
    return bool(pc.any(pc.is_nan(column)).as_py())


def _join(root: str, folder: str) -> str:
    if not folder:
        return root
    return f"{root.rstrip('/')}/{folder}"


def _relative(path: str, root: str) -> str:
    path = path.replace(os.sep, "/") if os.sep != "/" else path
    root = root.replace(os.sep, "/").rstrip("/")
    if root and path.startswith(root + "/"):
        return path[len(root) + 1 :]
    return path.lstrip("/")


def _file_order(file: AddFile) -> tuple[str, int]:
    name = file.path.rsplit("/", 1)[-1]
    counter = name.removesuffix(".c000.snappy.parquet").rsplit("-", 1)[-1]
    return (
        file.path.rsplit("/", 1)[0] if "/" in file.path else "",
        int(counter) if counter.isdigit() else 0,
    )


def _open_filesystem(target: DeltaTarget) -> tuple[pafs.FileSystem, str]:
    if target.is_local:
        return pafs.LocalFileSystem(), target.uri.rstrip("/")
    return target.filesystem(), ""


def delete_files(target: DeltaTarget, files: Iterable[AddFile]) -> None:
    """Delete data files that were written but will not be committed (missing ones are fine).

    Staging folders left empty are removed too.
    """
    filesystem, root = _open_filesystem(target)
    folders: set[str] = set()
    for file in files:
        with contextlib.suppress(FileNotFoundError):
            filesystem.delete_file(_join(root, file.path) if root else file.path)
        if file.path.startswith(STAGING_FOLDER + "/"):
            folders.add(file.path.rsplit("/", 1)[0])
    if target.is_local:
        for folder in sorted(folders, key=len, reverse=True):
            _remove_empty(root, folder)


def _remove_empty(root: str, folder: str) -> None:
    parts = folder.split("/")
    while len(parts) > 1:  # never the staging folder itself
        try:
            os.rmdir(os.path.join(root, *parts))
        except OSError:
            return
        parts.pop()


def read_files(
    target: DeltaTarget, files: Sequence[AddFile], schema: pa.Schema
) -> pa.RecordBatchReader:
    """The rows of (staged, unpartitioned) data files as one stream of ``schema``, in order.

    Files are opened one at a time as the stream is read.
    """
    filesystem, root = _open_filesystem(target)

    def batches() -> Iterator[pa.RecordBatch]:
        for file in files:
            path = _join(root, file.path) if root else file.path
            with filesystem.open_input_file(path) as handle:
                parquet = pq.ParquetFile(handle)
                for batch in parquet.iter_batches(batch_size=64 * 1024):
                    yield conform_batch(batch, schema)

    return pa.RecordBatchReader.from_batches(schema, batches())
