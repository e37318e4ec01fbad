"""Streaming file sources: ``json``, ``csv``, ``text``, ``parquet`` and ``orc``.

Each batch takes new files of a folder (or glob), oldest first, within ``maxFilesPerTrigger``
or ``maxBytesPerTrigger``. The files of batch ``K`` are recorded in the checkpoint before the
batch runs (offset ``{"logOffset": K}``), so a replay reads exactly the same files and no file
is ever read twice. On a local folder a watcher wakes the query as soon as a file lands.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from microbatch.connector import (
    Offset,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    Source,
    SourceContext,
)
from microbatch.errors import ConfigurationError, CorruptCheckpointError, SchemaError, SourceError

from ._changes import ChangeReport
from ._cleanup import Cleaner
from ._discovery import MANIFEST_FOLDER, Discovery
from ._formats import (
    TEXT_SCHEMA,
    CsvFormat,
    FileFormat,
    JsonFormat,
    OrcFormat,
    ParquetFormat,
    TextFormat,
)
from ._listing import FileEntry, Layout, Listing
from ._location import SourceLocation
from ._options import (
    CSV_OPTIONS,
    JSON_OPTIONS,
    ORC_OPTIONS,
    PARQUET_OPTIONS,
    TEXT_OPTIONS,
    FileSourceOptionSpec,
)
from ._parse_modes import CORRUPT, CsvSettings
from ._partitions import check_layout, discover_keys, infer_partition_type, partition_scalar
from ._pickup import Pickup
from ._selection import Backlog, Taken
from ._tracking import FileLog

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

log = logging.getLogger("microbatch.file")

_OPEN_COST = 4 << 20
_MAX_SPLIT_BYTES = 128 << 20


@dataclass(frozen=True)
class FileSplit:
    """Files of one batch read one after the other by one ``read`` call."""

    batch: int
    files: tuple[FileEntry, ...]


class FileSource(Source):
    """What every file format shares: discovery, tracking, limits, clean-up and partitions.

    Subclasses set ``format_name``, ``options`` and :meth:`make_format`.
    """

    options: ClassVar[FileSourceOptionSpec]
    supports_available_now = True
    user_schema = "required"

    def __init__(self, context: SourceContext) -> None:
        super().__init__(context)
        opts = self.opts
        location = SourceLocation.resolve(opts.path)
        location.check_exists()
        if not location.is_glob and location.fs.isfile(location.path):
            location = location.single_file()
        self.location = location
        self.format = self.make_format()
        self.layout = Layout(
            location,
            in_progress_suffixes=tuple(opts.in_progress_suffixes),
            recursive=bool(opts.recursive_file_lookup),
            name_filter=opts.path_glob_filter,
        )
        self.listing = Listing(self.layout)
        manifest = self._open_manifest()
        if manifest is not None and opts.clean_source != "OFF":
            raise ConfigurationError(
                f"Clean up source files is not supported when reading from the output directory "
                f"of the file sink ({location.show()} holds {MANIFEST_FOLDER}): set cleanSource "
                "to off"
            )
        self.discovery = Discovery(
            self.listing, manifest=manifest, watch=context.streaming, wake=context.wake
        )
        self.discovery.refresh()
        self._partition_keys: tuple[str, ...] | None = (
            ()
            if self.layout.recursive
            else discover_keys(self.discovery.files.values(), location.show())
        )
        self._resolve_schema()
        self.log = FileLog(context.state, name_only=bool(opts.file_name_only))
        self.backlog = Backlog(latest_first=bool(opts.latest_first))
        self._backlog_filled = False
        archive = None
        if opts.clean_source == "ARCHIVE":
            archive = SourceLocation.resolve(str(opts.source_archive_dir))
        self.cleaner = Cleaner(location, opts.clean_source, archive)
        self.pickup = Pickup(
            location,
            self.discovery,
            settle=opts.settle_time.total_seconds(),
            min_age=opts.min_file_age.total_seconds(),
            streaming=context.streaming,
        )
        self.changes = ChangeReport(location, self.log, opts.clean_source, self.describe())
        self._pinned: set[str] | None = None
        self._cache_budget = 0
        self._timer: threading.Timer | None = None
        self._timer_due = float("inf")
        self._next_check = float("inf")
        self._lock = threading.Lock()
        self.skipped_for_age = 0
        self.held_back = 0

    # -- per format -----------------------------------------------------------------------
    def make_format(self) -> FileFormat:
        raise NotImplementedError

    # -- schema ---------------------------------------------------------------------------
    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def _inference(self) -> bool:
        if not self.context.streaming and self.user_schema == "optional":
            return True  # batch reads of self-describing formats
        if self.opts.is_set("schemaInference"):
            return bool(self.opts.schema_inference)
        session = self.context.session
        return bool(session is not None and session.conf.get("schemaInference"))

    def _resolve_schema(self) -> None:
        entries = sorted(self.discovery.files.values(), key=lambda entry: entry.path)
        keys = self._partition_keys or ()
        given = self.context.schema
        label = self.format.label
        if isinstance(self.format, TextFormat):
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
            inferred = self.format.infer(self.location.fs, entries, self.location.show)
            if inferred is None:
                raise SchemaError(
                    f"[UNABLE_TO_INFER_SCHEMA] Unable to infer schema for {label.upper()}. It "
                    f"must be specified manually ({self.location.show()} holds no readable "
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
        self._schema = pa.schema([*data_fields, *partition_fields])
        corrupt_name = self.opts.get("columnNameOfCorruptRecord") if self.format.has_modes else None
        self._corrupt_name: str | None = None
        if corrupt_name is not None and corrupt_name in [f.name for f in data_fields]:
            column = next(f for f in data_fields if f.name == corrupt_name)
            if not pa.types.is_string(column.type):
                raise SchemaError(
                    f"The field for corrupt records must be string type and nullable: column "
                    f"'{corrupt_name}' is {column.type}. Make it STRING, or name another column "
                    "with option columnNameOfCorruptRecord."
                )
            self._corrupt_name = corrupt_name
        self._parse_schema = pa.schema([f for f in data_fields if f.name != self._corrupt_name])

    # -- offsets --------------------------------------------------------------------------
    def initial_offset(self) -> Offset:
        return {"logOffset": -1}

    def default_read_limit(self) -> ReadLimit:
        if self.opts.max_files_per_trigger is not None:
            return ReadMaxFiles(self.opts.max_files_per_trigger)
        if self.opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def _position(self, offset: Offset) -> int:
        try:
            return int(offset["logOffset"])
        except (KeyError, TypeError, ValueError):
            raise CorruptCheckpointError(
                f"{self.describe()} got offset {offset!r}; file source offsets look like "
                '{"logOffset": 3}. The checkpoint belongs to another source.'
            ) from None

    def _start(self) -> None:
        """Load the log and fill the backlog with the files listed so far (first call only)."""
        self.discovery.activate()
        self.log.load()
        if not self._backlog_filled:
            self._backlog_filled = True
            self._offer(self.discovery.files.values(), ())
            self.pickup.settle_first(
                self.backlog.entries, lambda: self._offer(*self.discovery.refresh())
            )

    def _offer(self, changed: Iterable[FileEntry], removed: Iterable[str]) -> None:
        """Put listed files that were never taken into the backlog; report files taken
        before that changed since (:class:`ChangeReport`)."""
        fresh = []
        for entry in changed:
            if self.log.seen(entry):
                self.changes.check(entry)
            else:
                fresh.append(entry)
        removed = list(removed)
        self.changes.forget(removed)
        self.backlog.update(fresh, removed)

    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        self._start()
        position = self._position(start)
        if self.log.latest_batch > position:
            return {"logOffset": position + 1}  # taken before, not yet run: the same files
        if position > self.log.latest_batch:
            raise CorruptCheckpointError(
                f"{self.describe()}: the query is at batch {position}, but the source's log in "
                f"the checkpoint ends at batch {self.log.latest_batch}. Restore the checkpoint, "
                "or start the query with a new one."
            )
        listed = self._refresh(limit)
        self._next_check = float("inf")
        max_files = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        taken = self.backlog.take(
            max_files=max_files,
            max_bytes=max_bytes,
            skip=self.log.seen,
            too_old=self._too_old(limit),
            ready=self._ready,
            allowed=self._allowed,
        )
        self._report(taken)
        files = self._verify(taken.files)
        self._update_cache_budget(listed, max_files, len(files))
        if not files:
            return start
        batch = position + 1
        self.log.add_batch(batch, files)
        self.backlog.remove(files)
        for entry in files:
            self.pickup.forget(entry.path)
        return {"logOffset": batch}

    def prepare_available_now(self) -> None:
        self._start()
        self._offer(*self.discovery.refresh(force=True))
        self._pinned = {entry.path for entry in self.backlog.entries() if not self.log.seen(entry)}

    def _refresh(self, limit: ReadLimit) -> bool:
        """Update the backlog from the filesystem; False when the cached listing was used."""
        if not self.discovery.watching and self._use_cache(limit):
            return False
        changed, removed = self.discovery.refresh()
        if changed or removed:
            self._offer(changed, removed)
        return True

    def _update_cache_budget(self, listed: bool, max_files: int | None, taken: int) -> None:
        if self.discovery.watching:
            return
        if max_files is None or taken < max_files:
            self._cache_budget = 0  # the listing could not fill a batch: list next time
        elif listed:
            self._cache_budget = min(int(self.opts.max_cached_files), len(self.backlog) - taken)
        else:
            self._cache_budget -= taken

    def _use_cache(self, limit: ReadLimit) -> bool:
        """Spark's listing cache for filesystems without notifications: keep taking from the
        last listing while it still holds enough files."""
        if not isinstance(limit, ReadMaxFiles) or self.opts.latest_first:
            return False
        if self.opts.max_cached_files <= 0:
            return False
        floor = max(1.0, float(self.opts.discard_cached_input_ratio) * limit.max_files)
        return self._cache_budget >= floor

    def _allowed(self, entry: FileEntry) -> bool:
        return self._pinned is None or entry.path in self._pinned

    def _too_old(self, limit: ReadLimit) -> Callable[[FileEntry], bool]:
        limited = isinstance(limit, ReadMaxFiles | ReadMaxBytes)
        latest = self.log.latest_mtime
        if (self.opts.latest_first and limited) or latest is None:
            return lambda entry: False
        cutoff = latest - self.opts.max_file_age.total_seconds()
        return lambda entry: entry.mtime is not None and entry.mtime < cutoff

    def _ready(self, entry: FileEntry) -> bool:
        """Not being written in place (:class:`Pickup`); a file held back sets
        :attr:`_next_check`, when it may be ready."""
        due = self.pickup.due(entry)
        if due is None:
            return True
        self._next_check = min(self._next_check, due)
        return False

    def _report(self, taken: Taken) -> None:
        self.held_back = len(taken.held)
        if taken.held and self._next_check < float("inf"):
            self._wake_at(self._next_check)
        if not taken.too_old:
            return
        self.skipped_for_age += len(taken.too_old)
        names = ", ".join(self.location.show(entry.path) for entry in taken.too_old[:5])
        more = f" and {len(taken.too_old) - 5} more" if len(taken.too_old) > 5 else ""
        log.warning(
            "%s: not reading %d file(s) older than maxFileAge (%s) before the newest file "
            "taken: %s%s. Raise maxFileAge to read such late files.",
            self.describe(),
            len(taken.too_old),
            self.opts.max_file_age,
            names,
            more,
        )

    def _verify(self, files: list[FileEntry]) -> list[FileEntry]:
        """The files that may really be taken: layout checked, unchanged under minFileAge, one
        per identity."""
        keep: list[FileEntry] = []
        keys: set[str] = set()
        # local files are looked at once more (one stat): a file whose writer closed it
        # just now may have been listed before its last write
        recheck = self.pickup.min_age > 0 or (self.context.streaming and self.location.local)
        for entry in files:
            if recheck:
                current = self.listing.entry_for(entry.path)
                if current is None:
                    self.backlog.discard(entry.path)
                    continue
                if current != entry:
                    self.backlog.update([current])
                    self._wake_at(time.monotonic())
                    continue
            key = self.log.key(entry)
            if key in keys:
                continue  # same name twice with fileNameOnly: the first one counts
            self._check_partition(entry)
            keys.add(key)
            keep.append(entry)
        return keep

    def _check_partition(self, entry: FileEntry) -> None:
        if self.layout.recursive:
            return
        where = self.location.show()
        if self._partition_keys is None:
            names = [key for key, _ in entry.partition]
            missing = [name for name in names if name not in self._schema.names]
            if missing:
                raise SourceError(
                    f"File source {where}: file {entry.path} lies in partition folders "
                    f"{', '.join(missing)}=..., which the source's schema does not have (the "
                    "folder was empty when the query started). Add the columns to the schema, "
                    "or restart the query so that they are discovered."
                )
            self._partition_keys = tuple(names)
        check_layout(entry, self._partition_keys, where)
        for key, raw in entry.partition:
            try:
                partition_scalar(raw, self._schema.field(key).type)
            except ValueError as error:
                raise SourceError(
                    f"File source {where}: file {entry.path} has partition value {key}={raw}, "
                    f"which cannot be a value of column '{key}': {error}. Rename the folder, or "
                    "give the column a type that holds it in the schema."
                ) from None

    def _wake_at(self, when: float) -> None:
        """Wake the query at ``when`` (``time.monotonic()``), when a held file may be ready."""
        due = when + 0.005
        with self._lock:
            if self._timer is not None and self._timer_due <= due:
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(max(0.0, due - time.monotonic()), self._timer_fired)
            self._timer.daemon = True
            self._timer_due = due
            self._timer.start()

    def _timer_fired(self) -> None:
        with self._lock:
            self._timer, self._timer_due = None, float("inf")
        self.context.wake()

    # -- planning and reading -------------------------------------------------------------
    def plan(self, start: Offset, end: Offset) -> list[Any]:
        self.log.load()
        first, last = self._position(start), self._position(end)
        splits: list[Any] = []
        for batch in range(first + 1, last + 1):
            splits.extend(self._pack(batch, self.log.files_of(batch)))
        return splits

    def _pack(self, batch: int, files: list[FileEntry]) -> list[FileSplit]:
        """Files in order, grouped so that each split holds about an equal share of the bytes
        (Spark's rule: at most 128 MiB, at least 4 MiB, counting 4 MiB per file opened)."""
        if not files:
            return []
        session = self.context.session
        threads = session.conf.get("maxReadThreads") if session is not None else None
        parallelism = max(1, int(threads or os.cpu_count() or 1))
        total = sum(entry.size + _OPEN_COST for entry in files)
        target = min(_MAX_SPLIT_BYTES, max(_OPEN_COST, total // parallelism))
        splits: list[FileSplit] = []
        group: list[FileEntry] = []
        size = 0
        for entry in files:
            cost = entry.size + _OPEN_COST
            if group and size + cost > target:
                splits.append(FileSplit(batch, tuple(group)))
                group, size = [], 0
            group.append(entry)
            size += cost
        splits.append(FileSplit(batch, tuple(group)))
        return splits

    def read(self, split: Any) -> Iterator[pa.RecordBatch]:
        for entry in split.files:
            where = self.location.show(entry.path)
            try:
                for table in self.format.read(
                    self.location.fs,
                    entry,
                    where,
                    self._parse_schema,
                    self._corrupt_name is not None,
                ):
                    yield from self._finish(table, entry).to_batches()
            except FileNotFoundError:
                if not self.opts.ignore_missing_files:
                    raise SourceError(
                        f"File {where} of batch {split.batch} was removed before it was read. "
                        "Restore it, or set option ignoreMissingFiles=true to skip such files "
                        "(their rows are then not read)."
                    ) from None
                log.warning(
                    "%s: skipping file %s of batch %d, removed before it was read "
                    "(ignoreMissingFiles)",
                    self.describe(),
                    where,
                    split.batch,
                )

    def _finish(self, table: pa.Table, entry: FileEntry) -> pa.Table:
        rows = table.num_rows
        columns = []
        values = dict(entry.partition)
        for column in self._schema:
            if column.name in values:
                scalar = partition_scalar(values[column.name], column.type)
                columns.append(pa.repeat(scalar, rows))
            elif column.name == self._corrupt_name:
                if CORRUPT in table.column_names:
                    columns.append(table.column(CORRUPT))
                else:
                    columns.append(pa.nulls(rows, pa.string()))
            else:
                columns.append(table.column(column.name))
        return pa.Table.from_arrays(columns, schema=self._schema)

    # -- clean-up and end -----------------------------------------------------------------
    def commit(self, end: Offset) -> None:
        if self.opts.clean_source == "OFF":
            return
        self.log.load()
        last = self._position(end)
        if last <= self.log.cleaned_through:
            return
        for batch in range(self.log.cleaned_through + 1, last + 1):
            self.cleaner.clean(self.log.files_of(batch))
        self.discovery.own_change()
        self.log.mark_cleaned(last)

    def stop(self) -> None:
        self.discovery.stop()
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def describe(self) -> str:
        return f"FileStreamSource[{self.location.show()}]"

    def metrics(self) -> dict[str, str]:
        """Counts for progress reports (Spark's per-source ``metrics`` map)."""
        return {
            "numFilesSkippedForAge": str(self.skipped_for_age),
            "numFilesHeldBack": str(self.held_back),
            "numFilesChangedAfterRead": str(self.changes.changed),
            "numFilesSkippedForReusedName": str(self.changes.reused),
            "numFilesOutstanding": str(len(self.backlog)),
            "numRowsDroppedByParseMode": str(self.format.dropped_rows()),
        }

    # -- the sink's manifest ----------------------------------------------------------------
    def _open_manifest(self) -> Any:
        location = self.location
        if location.is_glob or location.pattern:
            return None
        marker = f"{location.root.rstrip('/')}/{MANIFEST_FOLDER}"
        if not location.fs.exists(marker):
            return None
        from .manifest import Manifest

        manifest = Manifest(location.fs, location.root)
        return manifest if manifest.exists() else None


class JsonFileSource(FileSource):
    """Newline-delimited JSON files (``multiLine``: one document per file)."""

    format_name = "json"
    description = "New JSON-lines files of a folder, each read once"
    options = JSON_OPTIONS

    def make_format(self) -> FileFormat:
        return JsonFormat(mode=self.opts.mode, multi_line=bool(self.opts.multi_line))


class CsvFileSource(FileSource):
    """CSV files, columns matched by position."""

    format_name = "csv"
    description = "New CSV files of a folder, each read once"
    options = CSV_OPTIONS

    def make_format(self) -> FileFormat:
        opts = self.opts
        sep = opts.delimiter if opts.is_set("delimiter") else opts.sep
        settings = CsvSettings(
            sep=sep,
            quote=opts.quote or None,
            escape=opts.escape or None,
            null_value=opts.null_value,
            comment=opts.comment or None,
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
    user_schema = "forbidden"

    def make_format(self) -> FileFormat:
        return TextFormat(whole_text=bool(self.opts.wholetext))


class ParquetFileSource(FileSource):
    """Parquet files; the schema comes from the files when none is given and inference is on
    (always for batch reads)."""

    format_name = "parquet"
    description = "New Parquet files of a folder, each read once"
    options = PARQUET_OPTIONS
    user_schema = "optional"

    def make_format(self) -> FileFormat:
        return ParquetFormat(merge_schema=bool(self.opts.merge_schema))


class OrcFileSource(FileSource):
    """ORC files; the schema comes from the files as for Parquet."""

    format_name = "orc"
    description = "New ORC files of a folder, each read once"
    options = ORC_OPTIONS
    user_schema = "optional"

    def make_format(self) -> FileFormat:
        return OrcFormat(merge_schema=bool(self.opts.merge_schema))


SOURCES: list[type[Source]] = [
    JsonFileSource,
    CsvFileSource,
    TextFileSource,
    ParquetFileSource,
    OrcFileSource,
]
