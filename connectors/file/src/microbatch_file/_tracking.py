"""The files each batch takes, kept in the source's checkpoint folder.

Batch ``K`` is written as the entry ``K`` of a :class:`~microbatch.batch_log.BatchLog`
(``{"v": 1, "batch": K, "files": [[path, size, mtime ms, partition?], ...]}``) before the
engine logs its offsets, so a replay of ``K`` plans exactly the same files. The log is
compacted into ``<K>.compact`` (Spark's layout) every 10 batches, and less often once it is
long (every ``sqrt(K)`` batches: a compaction rewrites every entry), so the folder holds a few
files, at most a few hundred plain ones, however many batches ran. A log of older releases,
compacted into ``<first>-<last>.compact`` files, is moved to that layout when it is loaded.

Each file is kept with its size and modification time (milliseconds) as its batch took it:
the bytes that batch reads, and what a later listing is compared with to tell a file that
changed after it was read (:mod:`._changes`).
"""

from __future__ import annotations

import re
from typing import Any

from microbatch.batch_log import BatchLog
from microbatch.errors import CorruptCheckpointError
from microbatch.state import StateStore

from ._listing import FileEntry
from .manifest import files_problem

__all__ = ["FileLog"]

COMPACT_INTERVAL = 10
_LEGACY_COMPACT = re.compile(r"^(\d+)-(\d+)\.compact$")
_CLEANUP = "cleanup"
_VERSION = 1
_ADVICE = "Restore the checkpoint, or start the query with a new checkpoint."


def _encode(entry: FileEntry) -> list[Any]:
    mtime = None if entry.mtime is None else round(entry.mtime * 1000)
    row: list[Any] = [entry.path, entry.size, mtime]
    if entry.partition:
        row.append([list(pair) for pair in entry.partition])
    return row


def _decode(row: list[Any]) -> FileEntry:
    partition = tuple((str(k), str(v)) for k, v in row[3]) if len(row) > 3 else ()
    mtime = None if row[2] is None else row[2] / 1000
    return FileEntry(str(row[0]), int(row[1]), mtime, partition)


class FileLog:
    """Which files every batch took, and which file identities were ever taken.

    ``key`` maps an entry to its identity (its path, or its name with ``fileNameOnly``).
    Without a store (batch reads) the log lives in memory only.
    """

    def __init__(self, store: StateStore | None, *, name_only: bool = False) -> None:
        self.store = store
        self.name_only = name_only
        self.latest_batch = -1
        self.latest_mtime: float | None = None
        self.cleaned_through = -1
        self._batches: dict[int, list[FileEntry]] = {}
        self._seen: dict[str, tuple[int, FileEntry]] = {}
        self._log = (
            None
            if store is None
            else BatchLog(
                store,
                compact_interval=COMPACT_INTERVAL,
                growing=True,
                id_field="batch",
                validate=files_problem,
                label="The file source's log",
                advice=_ADVICE,
            )
        )
        self._loaded = False

    # -- reading --------------------------------------------------------------------------
    def key(self, entry: FileEntry) -> str:
        return entry.name if self.name_only else entry.path

    def seen(self, entry: FileEntry) -> bool:
        return self.key(entry) in self._seen

    def taken_as(self, entry: FileEntry) -> tuple[int, FileEntry] | None:
        """The last batch that took a file of ``entry``'s identity, with the file's size and
        time as they were then (the bytes that batch read); None when never taken."""
        return self._seen.get(self.key(entry))

    def files_of(self, batch: int) -> list[FileEntry]:
        """The files batch ``batch`` took; a clear error when the log does not have it."""
        self.load()
        files = self._batches.get(batch)
        if files is None:
            where = self.store.url if self.store is not None else "memory"
            raise CorruptCheckpointError(
                f"The file source's log in {where} has no entry for batch {batch} (it holds "
                f"batches up to {self.latest_batch}); the checkpoint is incomplete. {_ADVICE}"
            )
        return files

    @property
    def file_count(self) -> int:
        return len(self._seen)

    def load(self) -> None:
        """Read the log from the store (once), moving a log of the older layout to the
        current one first."""
        if self._loaded:
            return
        self._loaded = True
        if self.store is None or self._log is None:
            return
        self._upgrade(self.store, self._log)
        for value in self._log.entries():
            self._remember(value["batch"], [_decode(row) for row in value["files"]])
        cleanup = self.store.read(_CLEANUP)
        if isinstance(cleanup, dict):
            self.cleaned_through = int(cleanup.get("through", -1))

    @staticmethod
    def _upgrade(store: StateStore, log: BatchLog) -> None:
        """Replace the ``<first>-<last>.compact`` files of older releases by one
        ``<last>.compact`` holding the same entries (written before they are deleted, so a
        process killed half-way finishes the move when it loads the log again)."""
        spans = sorted(
            ((int(m[1]), int(m[2])) for n in store.names() if (m := _LEGACY_COMPACT.match(n))),
            key=lambda span: (span[0], -span[1]),
        )
        if not spans:
            return
        kept: list[tuple[int, int]] = []
        for first, last in spans:
            if not (kept and last <= kept[-1][1]):  # else merged into a larger one
                kept.append((first, last))
        newest = kept[-1][1]
        if not store.exists(f"{newest}.compact"):
            entries: list[dict[str, Any]] = []
            for first, last in kept:
                name = f"{first}-{last}.compact"
                value = store.read(name)
                if not isinstance(value, dict) or not isinstance(value.get("batches"), list):
                    raise log.corrupt(name, "it is not a compact file")
                for batch, rows in value["batches"]:
                    if batch != len(entries):
                        raise log.missing(len(entries), f"{name} holds batch {batch} after it")
                    entries.append({"v": _VERSION, "batch": batch, "files": rows})
            if len(entries) != newest + 1:
                raise log.missing(len(entries), f"the compact files end at batch {newest}")
            log.compact(newest, entries)
        for first, last in spans:
            store.delete(f"{first}-{last}.compact")

    def _remember(self, batch: int, files: list[FileEntry]) -> None:
        self._batches[batch] = files
        self.latest_batch = max(self.latest_batch, batch)
        for entry in files:
            self._seen[self.key(entry)] = (batch, entry)
            if entry.mtime is not None and (
                self.latest_mtime is None or entry.mtime > self.latest_mtime
            ):
                self.latest_mtime = entry.mtime

    # -- writing --------------------------------------------------------------------------
    def add_batch(self, batch: int, files: list[FileEntry]) -> None:
        """Record (durably, before returning) that batch ``batch`` takes ``files``."""
        self.load()
        if batch != self.latest_batch + 1:
            raise ValueError(f"batch {batch} does not follow batch {self.latest_batch}")
        if self._log is not None:
            rows = [_encode(entry) for entry in files]
            self._log.write(batch, {"v": _VERSION, "batch": batch, "files": rows}, overwrite=True)
        self._remember(batch, files)

    def mark_cleaned(self, batch: int) -> None:
        """Record that the files of every batch up to ``batch`` were archived or deleted."""
        self.cleaned_through = batch
        if self.store is not None:
            self.store.write(_CLEANUP, {"through": batch})
