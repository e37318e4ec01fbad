"""Parquet data files as Delta writes them: snappy, statistics on every column, dictionaries.

:func:`write_parquet_files` writes an unpartitioned part on the calling thread;
:func:`parquet_options` gives ``pyarrow.dataset.write_dataset`` the same settings for
partitioned parts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

__all__ = ["WrittenFile", "dictionary_columns", "parquet_options", "write_parquet_files"]


@dataclass(frozen=True)
class WrittenFile:
    """A file :func:`write_parquet_files` finished (as ``write_dataset`` shows it)."""

    path: str
    size: int
    metadata: pq.FileMetaData


def write_parquet_files(
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    filesystem: pafs.FileSystem,
    base_dir: str,
    template: str,
    group_rows: int,
    max_rows_per_file: int | None,
    visit: Callable[[WrittenFile], None],
) -> None:
    """Unpartitioned rows into files ``template.format(i=0, 1, ...)`` under ``base_dir``, in
    order, on the calling thread: row groups of ``group_rows`` rows, a new file every
    ``max_rows_per_file`` rows; ``visit`` is called with each file once it is complete.

    ``write_dataset`` would do the same on Arrow's thread pools, which holds about 100 MiB more
    memory (allocator pages kept by those threads) and grows with the backlog.
    """
    filesystem.create_dir(base_dir, recursive=True)
    options: dict[str, Any] = {
        "compression": "snappy",
        "write_statistics": True,
        "use_dictionary": dictionary_columns(schema),
    }
    current: tuple[int, str, Any, pq.ParquetWriter | None] | None = None
    try:
        for number, group in _row_groups(batches, group_rows, max_rows_per_file or 0):
            if current is None or current[0] != number:
                if current is not None:
                    _finish(current, visit)
                    current = None
                path = f"{base_dir.rstrip('/')}/{template.format(i=number)}"
                stream = filesystem.open_output_stream(path)
                current = (number, path, stream, None)  # deleted should the writer fail
                current = (number, path, stream, pq.ParquetWriter(stream, schema, **options))
            writer = current[3]
            assert writer is not None
            writer.write_table(pa.Table.from_batches(group, schema), row_group_size=group_rows)
        if current is not None:
            _finish(current, visit)
            current = None
    except BaseException:
        if current is not None:  # the file being written: closed (an object store would
            _abandon(filesystem, current)  # finish it when collected) and deleted
        raise


def _row_groups(
    batches: Iterable[pa.RecordBatch], group_rows: int, per_file: int
) -> Iterator[tuple[int, list[pa.RecordBatch]]]:
    """``(file number, the slices of one row group)``: groups of ``group_rows`` rows (the last
    of a file or of the input may be smaller), a new file every ``per_file`` rows (0: one file)."""
    file_number, in_file, group, in_group = 0, 0, [], 0
    for batch in batches:
        while batch.num_rows:
            room = group_rows - in_group
            if per_file:
                room = min(room, per_file - in_file - in_group)
            head, batch = batch.slice(0, room), batch.slice(room)
            group.append(head)
            in_group += head.num_rows
            if in_group == group_rows or (per_file and in_file + in_group == per_file):
                yield file_number, group
                in_file, group, in_group = in_file + in_group, [], 0
                if per_file and in_file == per_file:
                    file_number, in_file = file_number + 1, 0
    if group:
        yield file_number, group


def _abandon(filesystem: pafs.FileSystem, current: tuple[int, str, Any, Any]) -> None:
    """Close and delete a file left half written by a failure (errors ignored: the failure
    is what the caller must see)."""
    _, path, stream, writer = current
    for close in (writer.close if writer is not None else None, stream.close):
        if close is not None:
            with contextlib.suppress(Exception):
                close()
    with contextlib.suppress(Exception):
        filesystem.delete_file(path)


def _finish(
    current: tuple[int, str, Any, pq.ParquetWriter | None], visit: Callable[[WrittenFile], None]
) -> None:
    _, path, stream, writer = current
    assert writer is not None
    writer.close()
    size = stream.tell()
    stream.close()
    visit(WrittenFile(path, size, writer.writer.metadata))


def parquet_options(schema: pa.Schema) -> ds.FileWriteOptions:
    """Snappy, statistics for every column, dictionaries for all but timestamp columns.

    Timestamps are mostly distinct: building a dictionary that overflows and falls back to
    plain pages costs a third of the write time of a typical event table and saves nothing.
    Plain parquet 2.6 types and v1 data pages otherwise, which every Delta reader reads.
    """
    return ds.ParquetFileFormat().make_write_options(
        compression="snappy",
        write_statistics=True,
        use_dictionary=dictionary_columns(schema),
    )


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The parquet column paths (``a.b``, ``l.list.element``) of the non-timestamp leaves."""
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    parquet_schema = pq.read_metadata(pa.BufferReader(sink.getvalue())).schema
    arrow_leaves = leaf_types(schema)
    return [
        parquet_schema.column(index).path
        for index in range(len(parquet_schema))
        if index < len(arrow_leaves) and not pa.types.is_timestamp(arrow_leaves[index])
    ]


def leaf_types(schema: pa.Schema) -> list[pa.DataType]:
    leaves: list[pa.DataType] = []

    def walk(type: pa.DataType) -> None:
        if pa.types.is_struct(type):
            for child in type.fields:
                walk(child.type)
        elif pa.types.is_map(type):
            walk(type.key_type)
            walk(type.item_type)
        elif pa.types.is_list(type) or pa.types.is_large_list(type):
            walk(type.value_type)
        else:
            leaves.append(type)

    for field in schema:
        walk(field.type)
    return leaves
