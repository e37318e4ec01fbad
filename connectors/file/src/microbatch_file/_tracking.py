"""The files each batch takes, kept in the source's checkpoint folder.

Batch ``K`` is written as the file ``K`` before the engine logs its offsets, so a replay of
``K`` plans exactly the same files. Every 10 batches the plain files are merged into one
``<first>-<last>.compact`` file, and ten compact files of the same span into one ten times
larger, so the folder holds a few dozen files however many batches ran, and each entry is
rewritten only a handful of times.

Each file is kept with its size and modification time (milliseconds) as its batch took it:
the bytes that batch reads, and what a later listing is compared with to tell a file that
changed after it was read (:mod:`._changes`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from microbatch.errors import CorruptCheckpointError
from microbatch.state import StateStore

from ._listing import FileEntry

__all__ = ["FileLog"]

COMPACT_INTERVAL = 10
_PLAIN = re.compile(r"^(\d+)$")
_COMPACT = re.compile(r"^(\d+)-(\d+)\.compact$")
_CLEANUP = "cleanup"
_VERSION = 1


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
        self._compacts: list[tuple[int, int]] = []
        self._plain: list[int] = []
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
                f"batches up to {self.latest_batch}); the checkpoint is incomplete. Restore it, "
                "or start the query with a new checkpoint."
            )
        return files

    @property
    def file_count(self) -> int:
        return len(self._seen)

    def load(self) -> None:
        """Read the log from the store (once); removes files left by an interrupted merge."""
        if self._loaded:
            return
        self._loaded = True
        if self.store is None:
            return
        compacts: list[tuple[int, int]] = []
        plain: list[int] = []
        for name in self.store.names():
            if (match := _COMPACT.match(name)) is not None:
                compacts.append((int(match[1]), int(match[2])))
            elif (match := _PLAIN.match(name)) is not None:
                plain.append(int(match[1]))
        compacts.sort(key=lambda span: (span[0], -span[1]))
        kept: list[tuple[int, int]] = []
        for first, last in compacts:
            if kept and last <= kept[-1][1]:
                self.store.delete(f"{first}-{last}.compact")  # merged into a larger one
                continue
            kept.append((first, last))
        covered = kept[-1][1] if kept else -1
        for first, last in kept:
            self._read_compact(first, last)
        for batch in sorted(plain):
            if batch <= covered:
                self.store.delete(str(batch))  # already in a compact file
                continue
            self._read_plain(batch)
            self._plain.append(batch)
        self._compacts = kept
        expected = list(range(self.latest_batch + 1))
        if sorted(self._batches) != expected:
            missing = sorted(set(expected) - set(self._batches))
            raise CorruptCheckpointError(
                f"The file source's log in {self.store.url} misses batches {missing[:10]}; "
                "restore the checkpoint, or start the query with a new checkpoint."
            )
        cleanup = self.store.read(_CLEANUP)
        if isinstance(cleanup, dict):
            self.cleaned_through = int(cleanup.get("through", -1))

    def _read_plain(self, batch: int) -> None:
        assert self.store is not None
        value = self.store.read(str(batch))
        if not isinstance(value, dict) or value.get("batch") != batch:
            raise CorruptCheckpointError(
                f"File {self.store.url}/{batch} of the file source's log is not a batch entry"
            )
        self._remember(batch, [_decode(row) for row in value["files"]])

    def _read_compact(self, first: int, last: int) -> None:
        assert self.store is not None
        value = self.store.read(f"{first}-{last}.compact")
        if not isinstance(value, dict) or not isinstance(value.get("batches"), list):
            raise CorruptCheckpointError(
                f"File {self.store.url}/{first}-{last}.compact of the file source's log is not "
                "a compact entry"
            )
        for batch, rows in value["batches"]:
            self._remember(int(batch), [_decode(row) for row in rows])

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
        if self.store is not None:
            rows = [_encode(entry) for entry in files]
            self.store.write(str(batch), {"v": _VERSION, "batch": batch, "files": rows})
        self._remember(batch, files)
        self._plain.append(batch)
        if self.store is not None and len(self._plain) >= COMPACT_INTERVAL:
            self._compact()

    def mark_cleaned(self, batch: int) -> None:
        """Record that the files of every batch up to ``batch`` were archived or deleted."""
        self.cleaned_through = batch
        if self.store is not None:
            self.store.write(_CLEANUP, {"through": batch})

    def _compact(self) -> None:
        assert self.store is not None
        first, last = self._plain[0], self._plain[-1]
        self._write_compact(first, last)
        for batch in self._plain:
            self.store.delete(str(batch))
        self._plain = []
        self._compacts.append((first, last))
        while len(self._compacts) >= COMPACT_INTERVAL:
            tail = self._compacts[-COMPACT_INTERVAL:]
            spans = {last - first for first, last in tail}
            if len(spans) != 1:
                break
            first, last = tail[0][0], tail[-1][1]
            self._write_compact(first, last)
            for old_first, old_last in tail:
                self.store.delete(f"{old_first}-{old_last}.compact")
            self._compacts[-COMPACT_INTERVAL:] = [(first, last)]

    def _write_compact(self, first: int, last: int) -> None:
        assert self.store is not None
        batches = [
            [batch, [_encode(entry) for entry in self._batches[batch]]]
            for batch in range(first, last + 1)
        ]
        self.store.write(
            f"{first}-{last}.compact",
            {"v": _VERSION, "first": first, "last": last, "batches": batches},
        )

    def batches_between(self, start: int, end: int) -> Iterable[list[FileEntry]]:
        """The file lists of batches ``start + 1`` to ``end``."""
        for batch in range(start + 1, end + 1):
            yield self.files_of(batch)
