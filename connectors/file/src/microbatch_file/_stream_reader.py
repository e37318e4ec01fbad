"""The query-side half of a file source: listing, the files of each batch, limits, clean-up.

The files of batch ``K`` are recorded in the source's log in the checkpoint before the batch
runs (offset ``{"logOffset": K}``); on a local folder a watcher wakes the query as soon as a
file lands.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import microbatch as mb
from microbatch.errors import ConfigurationError, CorruptCheckpointError, SourceError
from microbatch.options import Options

from ._changes import ChangeReport
from ._cleanup import Cleaner
from ._discovery import Discovery
from ._formats import FileFormat
from ._listing import FileEntry, Layout, Listing
from ._location import SourceLocation
from ._partitions import check_layout, partition_scalar
from ._pickup import Pickup
from ._retriable import transient_as_retriable
from ._selection import Backlog, Taken
from ._split_reader import FileSplit, FileSplitReader, corrupt_column
from ._tracking import FileLog
from .manifest import METADATA_DIR, Manifest

__all__ = ["FileStreamReader", "discover"]

log = logging.getLogger("microbatch.file")

_OPEN_COST = 4 << 20
_MAX_SPLIT_BYTES = 128 << 20


def discover(
    opts: Options, location: SourceLocation, context: mb.ReadContext | None = None
) -> Discovery:
    """The files of the source (listed at the first ``refresh``), from the file sink's manifest
    when ``location`` is a sink's output folder. With a run's ``context``, a streaming run
    watches the folder, and cleaning up a sink's files is refused (a ``ConfigurationError``
    when the query starts, as Spark)."""
    layout = Layout(
        location,
        in_progress_suffixes=tuple(opts.in_progress_suffixes),
        recursive=bool(opts.recursive_file_lookup),
        name_filter=opts.path_glob_filter,
    )
    manifest = None
    if not (location.is_glob or location.pattern):
        manifest = Manifest(location.fs, location.root)  # no I/O until asked
        manifest = manifest if manifest.exists() else None
    if context is None:
        return Discovery(Listing(layout), manifest=manifest)
    if manifest is not None and opts.clean_source != "OFF":
        raise ConfigurationError(
            f"Clean up source files is not supported when reading from the output directory "
            f"of the file sink ({location.show()} holds {METADATA_DIR}): set cleanSource "
            "to off"
        )
    return Discovery(Listing(layout), manifest=manifest, watch=context.streaming, wake=context.wake)


class FileStreamReader(mb.StreamReader):
    """Offsets, planning and clean-up of one run of a file source.

    ``keys`` are the partition columns found when the schema was resolved (None when the
    folder was empty then: the first file taken decides them).
    """

    def __init__(
        self,
        *,
        opts: Options,
        location: SourceLocation,
        file_format: FileFormat,
        keys: tuple[str, ...] | None,
        context: mb.ReadContext,
        owner: str,
    ) -> None:
        self.opts = opts
        self.context = context
        self.location = location
        self.format = file_format
        self.owner = owner
        self.schema = context.schema
        """The schema of every batch (the one the source resolved at load)."""
        self.discovery = discover(opts, location, context)
        self.listing = self.discovery.listing
        self.layout = self.listing.layout
        with self._transient("Listing"):
            self.discovery.refresh()
        self._partition_keys = () if self.layout.recursive else keys
        corrupt = opts.get("columnNameOfCorruptRecord") if file_format.has_modes else None
        corrupt_name, parse_schema = corrupt_column(
            self.schema, self._partition_keys or (), corrupt
        )
        self._split_reader = FileSplitReader(
            location=location,
            format=file_format,
            schema=self.schema,
            parse_schema=parse_schema,
            corrupt_name=corrupt_name,
            ignore_missing_files=bool(opts.ignore_missing_files),
            owner=owner,
        )
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
        self.changes = ChangeReport(location, self.log, opts.clean_source, owner)
        self._pinned: set[str] | None = None
        self._cache_budget = 0
        self._timer: threading.Timer | None = None
        self._timer_due = float("inf")
        self._next_check = float("inf")
        self._lock = threading.Lock()
        self.skipped_for_age = 0
        self.held_back = 0

    def _transient(self, what: str) -> AbstractContextManager[None]:
        """A block in which a transient filesystem error is raised as a ``RetriableError``
        saying that ``what`` (``Listing``...) of the source path failed."""
        return transient_as_retriable(f"{what} {self.location.show()}")

    # -- offsets --------------------------------------------------------------------------
    def initial_offset(self) -> mb.Offset:
        return {"logOffset": -1}

    def default_read_limit(self) -> mb.ReadLimit:
        if self.opts.max_files_per_trigger is not None:
            return mb.ReadMaxFiles(self.opts.max_files_per_trigger)
        if self.opts.max_bytes_per_trigger is not None:
            return mb.ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return mb.ReadAllAvailable()

    def _position(self, offset: mb.Offset) -> int:
        try:
            return int(offset["logOffset"])
        except (KeyError, TypeError, ValueError):
            raise CorruptCheckpointError(
                f"{self.owner} got offset {offset!r}; file source offsets look like "
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

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        with self._transient("Listing"):
            return self._latest_offset(start, limit)

    def _latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        self._start()
        position = self._position(start)
        if self.log.latest_batch > position:
            return {"logOffset": position + 1}  # taken before, not yet run: the same files
        if position > self.log.latest_batch:
            raise CorruptCheckpointError(
                f"{self.owner}: the query is at batch {position}, but the source's log in "
                f"the checkpoint ends at batch {self.log.latest_batch}. Restore the checkpoint, "
                "or start the query with a new one."
            )
        listed = self._refresh(limit)
        self._next_check = float("inf")
        max_files = limit.max_files if isinstance(limit, mb.ReadMaxFiles) else None
        max_bytes = limit.max_bytes if isinstance(limit, mb.ReadMaxBytes) else None
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
        with self._transient("Listing"):
            self._start()
            self._offer(*self.discovery.refresh(force=True))
        self._pinned = {entry.path for entry in self.backlog.entries() if not self.log.seen(entry)}

    def _refresh(self, limit: mb.ReadLimit) -> bool:
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

    def _use_cache(self, limit: mb.ReadLimit) -> bool:
        """Spark's listing cache for filesystems without notifications: keep taking from the
        last listing while it still holds enough files."""
        if not isinstance(limit, mb.ReadMaxFiles) or self.opts.latest_first:
            return False
        if self.opts.max_cached_files <= 0:
            return False
        floor = max(1.0, float(self.opts.discard_cached_input_ratio) * limit.max_files)
        return self._cache_budget >= floor

    def _allowed(self, entry: FileEntry) -> bool:
        return self._pinned is None or entry.path in self._pinned

    def _too_old(self, limit: mb.ReadLimit) -> Callable[[FileEntry], bool]:
        limited = isinstance(limit, mb.ReadMaxFiles | mb.ReadMaxBytes)
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
            self.owner,
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
            missing = [name for name in names if name not in self.schema.names]
            if missing:
                raise SourceError(
                    f"File source {where}: file {entry.path} lies in partition folders "
                    f"{', '.join(missing)}=..., which the source's schema does not have (the "
                    "folder was empty when the stream was loaded). Add the columns to the "
                    "schema, or load the stream again and restart the query so that they are "
                    "discovered."
                )
            self._partition_keys = tuple(names)
        check_layout(entry, self._partition_keys, where)
        for key, raw in entry.partition:
            try:
                partition_scalar(raw, self.schema.field(key).type)
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

    # -- planning -------------------------------------------------------------------------
    def partitions(self, start: mb.Offset, end: mb.Offset) -> Sequence[FileSplit]:
        with self._transient("Planning the files of"):
            self.log.load()
            first, last = self._position(start), self._position(end)
            splits: list[FileSplit] = []
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

    def split_reader(self) -> FileSplitReader:
        return self._split_reader

    # -- clean-up and end -----------------------------------------------------------------
    def commit(self, end: mb.Offset) -> None:
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

    def metrics(self) -> dict[str, Any]:
        """Counts for progress reports (Spark's per-source ``metrics`` map)."""
        return {
            "numFilesSkippedForAge": str(self.skipped_for_age),
            "numFilesHeldBack": str(self.held_back),
            "numFilesChangedAfterRead": str(self.changes.changed),
            "numFilesSkippedForReusedName": str(self.changes.reused),
            "numFilesOutstanding": str(len(self.backlog)),
            "numRowsDroppedByParseMode": str(self.format.dropped_rows()),
        }
