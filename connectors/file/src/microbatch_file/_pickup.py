"""When a listed file may be taken: never while it is being written in place.

A file moved or renamed into the folder is taken at once. On a local folder watched with
inotify, a file written in place is taken once its writer closed it. A file no event
explains (present when the query started, found by a listing, on a filesystem without
notifications) is taken once no process holds it open for writing (on a local folder watched
with inotify, as far as ``/proc`` shows) and its size and modification time have not changed
for ``settleTime``, except on stores that only ever show whole files (object stores, memory) and
in the output of the file sink (its manifest names only files of committed batches).
``minFileAge`` holds every file until it has not changed for that long.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from ._discovery import Discovery
from ._listing import FileEntry
from ._location import SourceLocation
from ._watch import WRITE_TIMEOUT, WriteState

__all__ = ["START_WAIT", "WHOLE_PROTOCOLS", "Pickup", "publishes_whole"]

WHOLE_PROTOCOLS = frozenset({"memory", "s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl"})
"""Filesystems on which a file appears only once it is complete (an object is visible once
its upload finished): no settling there."""

START_WAIT = 3.0
"""Longest wait, when the query starts, for files that were still changing to settle."""

_MAX_OBSERVED = 100_000


def publishes_whole(location: SourceLocation) -> bool:
    """Whether files on ``location``'s filesystem only ever appear whole."""
    protocol = location.fs.protocol
    names = (protocol,) if isinstance(protocol, str) else tuple(protocol)
    return any(name in WHOLE_PROTOCOLS for name in names)


class Pickup:
    """Decides, file by file, whether a listed file may be taken now.

    ``settle`` (seconds) applies to files whose arrival no event explained, ``min_age`` to
    every file (a ``min_age`` of at least ``settle`` replaces the settling); both 0 turn them
    off. Batch reads (``streaming=False``) take every file.
    """

    def __init__(
        self,
        location: SourceLocation,
        discovery: Discovery,
        *,
        settle: float,
        min_age: float,
        streaming: bool,
    ) -> None:
        self.discovery = discovery
        self.min_age = min_age
        # the sink's manifest names only files of committed batches: whole
        self._manifest = discovery.manifest is not None
        whole = not streaming or publishes_whole(location) or self._manifest
        self.settle = 0.0 if whole or min_age >= settle else settle  # minFileAge covers it
        self._observed: dict[str, tuple[int, float | None, float]] = {}
        self._held: dict[str, float] = {}

    def due(self, entry: FileEntry) -> float | None:
        """None when ``entry`` may be taken now, else the ``time.monotonic()`` at which to
        look again (a file being written is also looked at again when its writer closes it:
        the watcher wakes the query)."""
        now = time.monotonic()
        state = None if self._manifest else self.discovery.write_state(entry.path)
        if state is not None and state[0] is WriteState.WRITING:
            return state[1]
        due = now
        if self.settle > 0 and state is None:
            due = max(due, self._stable_at(entry, self.settle, now))
        if self.min_age > 0:
            due = max(due, self._stable_at(entry, self.min_age, now))
        if due > now:
            return due
        if state is None and (self.settle > 0 or self.min_age > 0) and not self._manifest:
            return self._held_until(entry.path, now)  # /proc only for a file otherwise due
        return None

    def forget(self, path: str) -> None:
        """``path`` was taken (or is gone): drop what was observed of it."""
        self._observed.pop(path, None)
        self._held.pop(path, None)

    def _held_until(self, path: str, now: float) -> float | None:
        """For a file no event explained (present when the watch began): while a process
        still holds it open for writing, the ``time.monotonic()`` at which to look in
        ``/proc`` again (its writer's close wakes the query before); else None."""
        until = self._held.get(path)
        if until is not None and until > now:
            return until
        if not self.discovery.held_for_writing(path):
            self._held.pop(path, None)
            return None
        if len(self._held) >= _MAX_OBSERVED:
            self._held.clear()
        until = self._held[path] = now + WRITE_TIMEOUT
        return until

    def settle_first(
        self, entries: Callable[[], Iterable[FileEntry]], refresh: Callable[[], None]
    ) -> None:
        """Block (at most :data:`START_WAIT` seconds) until the files no event explained
        have settled, calling ``refresh`` between looks, so that the first batch of a query
        started right after files were written takes them. Files seen being written in place
        are not waited for: their writer's close wakes the query."""
        if self.settle <= 0 or self.min_age > 0:
            return  # with minFileAge, held files are never waited for
        deadline = time.monotonic() + min(self.settle, START_WAIT)
        refresh()
        while True:
            now = time.monotonic()
            latest = now
            for entry in entries():
                if self.discovery.write_state(entry.path) is None:
                    latest = max(latest, self._stable_at(entry, self.settle, now))
            if latest <= now or now >= deadline:
                return
            time.sleep(max(0.0, min(0.05, latest - now, deadline - now)))
            refresh()

    def _stable_at(self, entry: FileEntry, age: float, now: float) -> float:
        """When (``time.monotonic()``) ``entry`` will have been unchanged for ``age`` seconds:
        by its modification time, or by how long it was seen with the same size and time
        (when it has no time, or one in the future)."""
        stamp = (entry.size, entry.mtime)
        seen = self._observed.get(entry.path)
        if seen is None or seen[:2] != stamp:
            if len(self._observed) >= _MAX_OBSERVED:
                self._observed.clear()
            seen = self._observed[entry.path] = (entry.size, entry.mtime, now)
        observed = seen[2] + age
        if entry.mtime is None:
            return observed
        return min(observed, now + entry.mtime + age - time.time())
