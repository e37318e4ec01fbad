"""Writing one split of a batch into files: partition directories, naming, rotation, memory.

A :class:`PartWriter` consumes a ``RecordBatchReader`` batch by batch (never the whole split at
once). Rows are buffered per partition folder within a memory budget, so that small input
batches make large row groups and many partition folders do not make many tiny files; at most
``max_open_files`` files are open at once; a file is finished at ``max_records_per_file`` rows
or ``target_file_size`` bytes. On failure it deletes every file it created.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import fsspec
import pyarrow as pa
from fsspec.implementations.local import LocalFileSystem

from ._writer_formats import FileFormat, OpenFile
from .manifest import METADATA_DIR
from .sink_partitions import split_by_partition

__all__ = ["PART_FILE", "OutputFolder", "PartWriter", "WriterLimits"]

PART_FILE = re.compile(r"^part-(?P<batch>\d+)-(?P<part>\d+)-[0-9a-f-]+\.c\d+\.")
"""Names of the data files the sink writes: ``part-<batch>-<part>-<uuid>.c<n>.<ext>``."""


class OutputFolder:
    """The sink's output folder on its filesystem: open, delete and find data files."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, *, fsync: bool = False) -> None:
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self.local = isinstance(fs, LocalFileSystem)
        self.fsync = fsync and self.local
        self._made: set[str] = set()

    def full_path(self, relative: str) -> str:
        return f"{self.root.rstrip('/')}/{relative}"

    def create(self, relative: str) -> pa.NativeFile:
        """A new output stream for the file ``relative`` (its folder is created as needed)."""
        path = self.full_path(relative)
        folder = path.rsplit("/", 1)[0]
        if folder not in self._made:
            if self.local:
                os.makedirs(folder, exist_ok=True)
            else:
                self.fs.makedirs(folder, exist_ok=True)
            self._made.add(folder)
        if self.local:
            return pa.OSFile(path, "wb")
        return pa.PythonFile(self.fs.open(path, "wb"), mode="w")

    def sync(self, relative: str) -> None:
        """With ``fsync`` on a local disk: flush a finished file and its folder to the disk."""
        if not self.fsync:
            return
        path = self.full_path(relative)
        for target in (path, os.path.dirname(path)):
            descriptor = os.open(target, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)

    def size(self, relative: str) -> int:
        path = self.full_path(relative)
        return os.path.getsize(path) if self.local else int(self.fs.size(path))

    def delete(self, relative: str) -> None:
        """Remove the file ``relative`` if it exists."""
        path = self.full_path(relative)
        with contextlib.suppress(FileNotFoundError):
            if self.local:
                os.remove(path)
            else:
                self.fs.rm_file(path)

    def data_files(self, batch_id: int) -> list[str]:
        """Relative paths of the data files named with ``batch_id``, committed or not, in
        partition folders of any depth and name (only the manifest folder is left out)."""
        try:
            found = self.fs.find(self.root)
        except FileNotFoundError:
            return []
        prefix = len(self.root.rstrip("/")) + 1
        result: list[str] = []
        for path in found:
            relative = str(path)[prefix:]
            name = relative.rsplit("/", 1)[-1]
            match = PART_FILE.match(name)
            if (
                match
                and int(match.group("batch")) == batch_id
                and not relative.startswith(f"{METADATA_DIR}/")
            ):
                result.append(relative)
        return result


@dataclass(frozen=True)
class WriterLimits:
    """When to write buffered rows, when to start a new file (0 means no limit).

    Rows are buffered per partition folder. A folder's rows are written once it holds
    ``flush_rows`` rows (whole multiples of it are written, the rest waits) or ``flush_bytes``
    bytes; when all folders together hold more than ``buffer_bytes``, the largest is written.
    """

    max_records_per_file: int = 0
    target_file_size: int = 0
    max_open_files: int = 64
    flush_rows: int = 0
    flush_bytes: int = 4 * 1024 * 1024
    buffer_bytes: int = 64 * 1024 * 1024


@dataclass
class _Pending:
    partition: dict[str, str | None]
    batches: list[pa.RecordBatch] = field(default_factory=list)
    rows: int = 0
    size: int = 0


@dataclass
class _Current:
    relative: str
    partition: dict[str, str | None]
    file: OpenFile


@dataclass
class PartWriter:
    """Writes one split of batch ``batch_id``; :meth:`write_all` returns the files written."""

    folder: OutputFolder
    file_format: FileFormat
    limits: WriterLimits
    batch_id: int
    part: int
    partition_by: tuple[str, ...]
    prefix: str = field(init=False)
    files: list[dict[str, Any]] = field(default_factory=list)
    _pending: dict[str, _Pending] = field(default_factory=dict)
    _buffered: int = 0
    _open: OrderedDict[str, _Current] = field(default_factory=OrderedDict)
    _created: list[str] = field(default_factory=list)
    _counter: int = 0
    _schema: pa.Schema = field(default_factory=lambda: pa.schema([]))

    def __post_init__(self) -> None:
        self.prefix = f"part-{self.batch_id:05d}-{self.part:05d}-{uuid.uuid4()}"

    def write_all(self, reader: pa.RecordBatchReader) -> list[dict[str, Any]]:
        """Write every row of ``reader``; on any failure delete what was written and re-raise."""
        limits = self.limits
        try:
            self._schema = pa.schema([f for f in reader.schema if f.name not in self.partition_by])
            for batch in reader:
                if batch.num_rows == 0:
                    continue
                row_bytes = batch.nbytes / batch.num_rows
                for directory, values, rows in split_by_partition(batch, self.partition_by):
                    pending = self._pending.get(directory)
                    if pending is None:
                        pending = self._pending[directory] = _Pending(values)
                    size = int(rows.num_rows * row_bytes)
                    pending.batches.append(rows)
                    pending.rows += rows.num_rows
                    pending.size += size
                    self._buffered += size
                    if pending.size >= limits.flush_bytes:
                        self._flush(directory, whole_groups=False)
                    elif limits.flush_rows and pending.rows >= limits.flush_rows:
                        self._flush(directory, whole_groups=True)
                while self._buffered > limits.buffer_bytes and self._pending:
                    largest = max(self._pending, key=lambda key: self._pending[key].size)
                    self._flush(largest, whole_groups=False)
            for directory in list(self._pending):
                self._flush(directory, whole_groups=False)
            while self._open:
                self._close(next(iter(self._open)))
        except BaseException:
            self.discard()
            raise
        return self.files

    def discard(self) -> None:
        """Close open files quietly and delete every file this writer created."""
        for current in self._open.values():
            current.file.discard()
        self._open.clear()
        self._pending.clear()
        for relative in self._created:
            with contextlib.suppress(Exception):
                self.folder.delete(relative)
        self.files = []

    # -- internals ------------------------------------------------------------------------
    def _flush(self, directory: str, *, whole_groups: bool) -> None:
        """Write the rows buffered for ``directory``; with ``whole_groups`` only a multiple of
        ``flush_rows`` of them (the rest stays buffered)."""
        pending = self._pending.pop(directory)
        self._buffered -= pending.size
        table = pa.Table.from_batches(pending.batches, schema=self._schema)
        if whole_groups and self.limits.flush_rows:
            keep = table.num_rows % self.limits.flush_rows
            if keep:
                rest = table.slice(table.num_rows - keep)
                table = table.slice(0, table.num_rows - keep)
                left = _Pending(pending.partition, rest.to_batches(), rest.num_rows)
                left.size = pending.size * keep // max(pending.rows, 1)
                self._pending[directory] = left
                self._buffered += left.size
        self._write(directory, pending.partition, table)

    def _write(self, directory: str, values: dict[str, str | None], rows: pa.Table) -> None:
        limits = self.limits
        while rows.num_rows:
            current = self._open.get(directory)
            if current is None:
                if len(self._open) >= limits.max_open_files:
                    self._close(next(iter(self._open)))
                current = self._start(directory, values)
            else:
                self._open.move_to_end(directory)
            take = rows.num_rows
            if limits.max_records_per_file:
                take = min(take, limits.max_records_per_file - current.file.rows)
            current.file.write(rows.slice(0, take) if take < rows.num_rows else rows)
            current.file.rows += take
            rows = rows.slice(take)
            if (
                limits.max_records_per_file and current.file.rows >= limits.max_records_per_file
            ) or (limits.target_file_size and current.file.position() >= limits.target_file_size):
                self._close(directory)

    def _start(self, directory: str, values: dict[str, str | None]) -> _Current:
        name = f"{self.prefix}.c{self._counter:03d}{self.file_format.extension}"
        self._counter += 1
        relative = f"{directory}/{name}" if directory else name
        self._created.append(relative)
        stream = self.folder.create(relative)
        try:
            opened = self.file_format.open(stream, self._schema)
        except BaseException:
            stream.close()
            raise
        current = _Current(relative, values, opened)
        self._open[directory] = current
        return current

    def _close(self, directory: str) -> None:
        current = self._open.pop(directory)
        current.file.close()
        self.folder.sync(current.relative)
        self.files.append(
            {
                "path": current.relative,
                "size": self.folder.size(current.relative),
                "rows": current.file.rows,
                "partition": current.partition,
            }
        )
