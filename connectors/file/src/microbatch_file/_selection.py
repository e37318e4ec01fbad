"""The files listed but not yet taken, kept in reading order between triggers.

Updates are incremental (a new file is inserted in place), and taking the next files looks
only at the front of the order, so a backlog of 100,000 files read one per batch costs each
trigger the files it takes, not a new sort.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ._listing import FileEntry

__all__ = ["Backlog", "Taken"]

SortKey = tuple[float, str]


@dataclass
class Taken:
    """The outcome of :meth:`Backlog.take`."""

    files: list[FileEntry] = field(default_factory=list)
    too_old: list[FileEntry] = field(default_factory=list)
    held: list[FileEntry] = field(default_factory=list)
    """Files not ready yet (``minFileAge``), left in the backlog."""


class Backlog:
    """Files not taken yet, ordered by modification time (oldest first, or newest first with
    ``latest_first``), then by path."""

    def __init__(self, *, latest_first: bool) -> None:
        self.latest_first = latest_first
        self._entries: dict[str, FileEntry] = {}
        self._order: list[tuple[SortKey, str]] = []

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> Iterable[FileEntry]:
        return self._entries.values()

    def _key(self, entry: FileEntry) -> SortKey:
        mtime = entry.mtime or 0.0
        return (-mtime if self.latest_first else mtime, entry.path)

    def update(self, changed: Iterable[FileEntry], removed: Iterable[str] = ()) -> None:
        """Add or replace ``changed`` entries and drop the ``removed`` paths."""
        for path in removed:
            self._entries.pop(path, None)
        fresh = []
        for entry in changed:
            if self._entries.get(entry.path) != entry:
                self._entries[entry.path] = entry
                fresh.append((self._key(entry), entry.path))
        many = len(fresh) > max(64, len(self._order) // 8)
        if many or len(self._order) + len(fresh) > 2 * len(self._entries) + 64:
            self._order = sorted((self._key(e), path) for path, e in self._entries.items())
        else:
            for item in fresh:
                bisect.insort(self._order, item)

    def discard(self, path: str) -> None:
        self._entries.pop(path, None)

    def take(
        self,
        *,
        max_files: int | None,
        max_bytes: int | None,
        skip: Callable[[FileEntry], bool],
        too_old: Callable[[FileEntry], bool],
        ready: Callable[[FileEntry], bool],
        allowed: Callable[[FileEntry], bool],
    ) -> Taken:
        """The next files in order, within the limits (at least one file fits any byte limit).

        ``skip`` entries (already taken) and ``too_old`` ones leave the backlog; entries not
        ``allowed`` (outside an available-now target) or not ``ready`` stay for later. The
        files returned stay in the backlog until :meth:`remove` is called with them.
        """
        taken = Taken()
        total_bytes = 0
        consumed = 0
        for position, (key, path) in enumerate(self._order):
            entry = self._entries.get(path)
            if entry is None or self._key(entry) != key:
                if consumed == position:
                    consumed += 1
                continue
            already = skip(entry)
            if already or too_old(entry):
                if not already:
                    taken.too_old.append(entry)
                del self._entries[path]
                if consumed == position:
                    consumed += 1
                continue
            if not allowed(entry):
                continue
            if not ready(entry):
                taken.held.append(entry)
                continue
            if max_files is not None and len(taken.files) >= max_files:
                break
            if max_bytes is not None and taken.files and total_bytes + entry.size > max_bytes:
                break
            taken.files.append(entry)
            total_bytes += entry.size
        if consumed:
            del self._order[:consumed]
        return taken

    def remove(self, entries: Iterable[FileEntry]) -> None:
        """Take ``entries`` out of the backlog (they were recorded in a batch)."""
        for entry in entries:
            if self._entries.get(entry.path) == entry:
                del self._entries[entry.path]
