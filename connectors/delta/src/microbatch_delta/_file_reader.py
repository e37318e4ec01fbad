"""Reading the data files of a Delta table, one split per file.

A :class:`DeltaFileSplit` names one parquet file of the table (its path relative to the table
root, its size, its partition values already parsed from the log's text). The picklable
:class:`DeltaFileReader` opens the file through the table's filesystem inside :meth:`read`,
streams it in record batches, and makes each batch the table's schema: columns are cast to the
table's types, columns the file lacks (written before a column was added) are nulls, and the
partition columns (never stored in the files) are filled from the split's values.

With the change data feed, the reader also reads :class:`~._change_feed.ChangeRange` splits,
and a file split marked with a version yields its rows as ``insert`` changes of that version
(the snapshot a change-feed stream starts with).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import pyarrow as pa

from microbatch import RetriableError, SourceError, Split, SplitReader

from ._table import DeltaTarget, storage_error_text

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = ["DEFAULT_BATCH_ROWS", "DeltaFileReader", "DeltaFileSplit", "conform_array"]

DEFAULT_BATCH_ROWS = 131_072
"""Rows per record batch read from a data file."""


@dataclass(frozen=True)
class DeltaFileSplit(Split):
    """One data file of a Delta table: what the split reader opens."""

    path: str
    """Relative to the table root, ``/``-separated and decoded (or an absolute URI)."""
    size: int
    partition_values: tuple[tuple[str, Any], ...]
    """The file's partition values, parsed to Python values of the columns' types."""
    version: int
    """The version whose offset covers the file (the snapshot's version for snapshot files)."""
    index: int
    """The file's index in that version (the offset's ``index``)."""
    change_version: int | None = None
    """Set for a change-feed stream's snapshot: its rows are ``insert`` changes of it."""
    change_timestamp_ms: int = 0


class DeltaFileReader(SplitReader):
    """Reads :class:`DeltaFileSplit` files (and change-feed ranges) in the table's schema.

    ``schema`` is the table's Arrow schema (partition columns included, in the table's order);
    ``output_schema`` the source's schema when it differs (the change data feed's).
    """

    def __init__(
        self,
        target: DeltaTarget,
        schema: pa.Schema,
        partition_columns: Sequence[str],
        *,
        output_schema: pa.Schema | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> None:
        self.target = target
        self.schema = schema
        self.partition_columns = tuple(partition_columns)
        self.output_schema = output_schema
        self.batch_rows = batch_rows

    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        if isinstance(split, DeltaFileSplit):
            if split.change_version is not None:
                from ._change_feed import as_inserts

                assert self.output_schema is not None
                yield from as_inserts(
                    self.read_file(split),
                    split.change_version,
                    split.change_timestamp_ms,
                    self.output_schema,
                )
            else:
                yield from self.read_file(split)
            return
        from ._change_feed import ChangeRange, read_changes

        if isinstance(split, ChangeRange):
            assert self.output_schema is not None
            yield from read_changes(split, self.output_schema)
            return
        raise TypeError(f"DeltaFileReader cannot read {split!r}")

    # -- one file -------------------------------------------------------------------------
    def _open(self, path: str) -> tuple[pafs.FileSystem, str]:
        """The filesystem and path to open a data file with."""
        import pyarrow.fs as pafs

        parsed = urlparse(path)
        if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:
            if parsed.scheme == "file":
                return pafs.LocalFileSystem(), parsed.path
            if self.target.is_local:
                return pafs.LocalFileSystem(), os.path.join(self.target.uri, path)
            return self.target.filesystem(), path
        root = self.target.uri.rstrip("/") + "/"
        if path.startswith(root):
            return self.target.filesystem(), path[len(root) :]
        raise SourceError(
            f"The Delta table at {self.target.uri} names the data file {path}, outside the "
            "table's folder; the Delta source reads only files under the table's root"
        )

    def read_file(self, split: DeltaFileSplit) -> Iterator[pa.RecordBatch]:
        """The rows of one data file, as record batches of the table's schema."""
        import pyarrow.parquet as pq

        fs, path = self._open(split.path)
        try:
            handle = fs.open_input_file(path)
        except FileNotFoundError:
            raise SourceError(
                f"The data file {split.path} of version {split.version} of the Delta table at "
                f"{self.target.uri} cannot be found. A file referenced in the transaction log "
                "cannot be found. This occurs when data has been manually deleted from the "
                "file system rather than using the table `DELETE` statement, or removed by "
                "VACUUM while the query lagged behind."
            ) from None
        except OSError as error:  # an object store away: running the batch again may cure it
            raise RetriableError(
                f"Opening the data file {split.path} of the Delta table at {self.target.uri} "
                f"failed: {storage_error_text(error)}"
            ) from error
        with handle:
            parquet = pq.ParquetFile(handle, coerce_int96_timestamp_unit="us")
            file_schema = parquet.schema_arrow
            partitions = dict(split.partition_values)
            present = [
                f.name
                for f in self.schema
                if f.name not in self.partition_columns and file_schema.get_field_index(f.name) >= 0
            ]
            for batch in parquet.iter_batches(batch_size=self.batch_rows, columns=present):
                if batch.num_rows:
                    yield self._conform(batch, partitions, split)

    def _conform(
        self, batch: pa.RecordBatch, partitions: dict[str, Any], split: DeltaFileSplit
    ) -> pa.RecordBatch:
        rows = batch.num_rows
        arrays: list[pa.Array] = []
        for field in self.schema:
            if field.name in self.partition_columns:
                value = partitions.get(field.name)
                if value is None:
                    arrays.append(pa.nulls(rows, field.type))
                else:
                    arrays.append(pa.repeat(pa.scalar(value, field.type), rows))
                continue
            index = batch.schema.get_field_index(field.name)
            if index < 0:
                arrays.append(pa.nulls(rows, field.type))
                continue
            column = batch.column(index)
            if column.type != field.type:
                try:
                    column = conform_array(column, field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                    raise SourceError(
                        f"Column '{field.name}' of the data file {split.path} (version "
                        f"{split.version}) of the Delta table at {self.target.uri} has type "
                        f"{column.type}, which does not convert to the table's type "
                        f"{field.type}: {error}"
                    ) from None
            arrays.append(column)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def conform_array(array: pa.Array, type: pa.DataType) -> pa.Array:
    """``array`` as ``type``: structs field by field (fields the data lacks are nulls, so a
    file written before a nested field was added reads), lists and maps item by item, other
    types cast (Delta's type widening: ``int`` to ``long``...)."""
    if array.type.equals(type):
        return array
    if pa.types.is_struct(type) and pa.types.is_struct(array.type):
        children = []
        for child in type:
            index = array.type.get_field_index(child.name)
            if index < 0:
                children.append(pa.nulls(len(array), child.type))
            else:
                children.append(conform_array(array.field(index), child.type))
        return pa.StructArray.from_arrays(
            children, fields=list(type), mask=array.is_null() if array.null_count else None
        )
    for is_kind, kind in (
        (pa.types.is_list, pa.ListArray),
        (pa.types.is_large_list, pa.LargeListArray),
        (pa.types.is_map, pa.MapArray),
    ):
        if is_kind(type) and is_kind(array.type):
            return _conform_nested(array, type, kind)
    return array.cast(type)


def _conform_nested(array: Any, type: Any, kind: Any) -> pa.Array:
    """A list or map array as ``type``, its items conformed. The offsets are made to start at
    0 first (Arrow cannot rebuild a sliced list that has nulls, as batches read can be)."""
    import pyarrow.compute as pc

    start = array.offsets[0]
    offsets = pc.subtract(array.offsets, start)
    values = array.values.slice(start.as_py(), (array.offsets[-1].as_py() - start.as_py()))
    mask = array.is_null() if array.null_count else None
    if kind is pa.MapArray:
        keys = conform_array(values.field(0), type.key_type)
        items = conform_array(values.field(1), type.item_type)
        return pa.MapArray.from_arrays(offsets, keys, items, type=type, mask=mask)
    return kind.from_arrays(offsets, conform_array(values, type.value_type), type=type, mask=mask)
