"""The files of a source now, kept up to date cheaply.

On a local folder a watcher reports changed paths and only those are looked at again (plus a
full listing every :data:`RELIST_INTERVAL` seconds in case a notification was lost); other
filesystems are listed in full when asked. On the output folder of the file sink, the
sink's manifest replaces listing: it is read again when a notification names it or when its
folder's time moved (one ``stat``: a commit just made is seen before its notification).

Notifications arrive on another thread, normally within a millisecond. So that a file added
to the folder just before a call is seen by that call, a call that finds the folder changed
(its modification time moved, or is too recent to tell) compares the folder's names with
those already known, and waits (:data:`SYNC_WAIT` at most) for the notifications of the new
ones: notifications come in order, so every change made before them is then known too. In
folders of more than :data:`CATCH_UP_NAMES` entries that comparison
costs too much to make at every call: there, a call that received no notification waits a
moment for a first one, and later ones wake the query.

A file that just appeared while being written in place (``open``, ``write``, ``close``) is
usually closed a moment later: a call waits :data:`RECENT` at most for that close.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable

from ._listing import FileEntry, Listing
from ._watch import FolderWatcher, WriteState
from .manifest import METADATA_DIR, Manifest

__all__ = ["Changes", "Discovery"]

log = logging.getLogger("microbatch.file")

RELIST_INTERVAL = 10.0
SYNC_WAIT = 0.5
RECENT = 0.05
"""Folder times are coarse (a few milliseconds): a folder changed this recently may have
changed again unseen."""
CATCH_UP_NAMES = 10_000

Changes = tuple[list[FileEntry], list[str]]
"""Entries that appeared or changed, and paths that disappeared."""


class Discovery:
    """The source's files by path (:attr:`files`); :meth:`refresh` returns what changed."""

    def __init__(
        self,
        listing: Listing,
        *,
        manifest: Manifest | None = None,
        watch: bool = False,
        wake: Callable[[], None] | None = None,
    ) -> None:
        self.listing = listing
        self.location = listing.location
        self.manifest = manifest
        self.files: dict[str, FileEntry] = {}
        self.listed = False
        self.full_listings = 0
        self._watch = watch and self.location.local
        self._active = False
        self._wake = wake or (lambda: None)
        self._watcher: FolderWatcher | None = None
        self._last_full = 0.0
        self._root_stamp = -1
        self._root_names: set[str] = set()
        self._appeared: list[str] = []
        self._manifest_stamp = -1

    @property
    def watching(self) -> bool:
        return self._watcher is not None and self._watcher.running

    def write_state(self, path: str) -> tuple[WriteState, float] | None:
        """How the file at ``path`` got its content (see :class:`FolderWatcher`); None when
        no event told."""
        watcher = self._watcher
        return watcher.write_state(path) if watcher is not None else None

    def held_for_writing(self, path: str) -> bool:
        """Whether a process still holds the file at ``path`` open for writing (see
        :meth:`FolderWatcher.held_for_writing`); False when writes are not tracked."""
        watcher = self._watcher
        return watcher is not None and watcher.running and watcher.held_for_writing(path)

    def activate(self) -> None:
        """Start watching (local folders) from the next :meth:`refresh` on."""
        self._active = True

    def own_change(self) -> None:
        """The source itself changed the folder (clean-up): no notification to wait for."""
        if self._watcher is not None:
            self._root_changed()

    def refresh(self, *, force: bool = False) -> Changes:
        """Bring :attr:`files` up to date and return the changes since the last call."""
        if self._watch and self._active and self._watcher is None:
            self._start_watcher()
        watcher = self._watcher
        if watcher is None or not self.listed or force:
            return self._full()
        paths, relist = watcher.drain()
        if relist or time.monotonic() - self._last_full > RELIST_INTERVAL:
            return self._full()
        if self.manifest is not None:
            marker = f"/{METADATA_DIR}/"
            moved = self._manifest_moved()  # also when its notification is not in yet
            if moved or any(marker in path for path in paths):
                return self._full()
            return [], []
        self._appeared = []
        changed, removed = self._update(paths)
        moved, recent = self._root_changed(), self._root_recent()
        if not (moved or recent) or (paths and len(self._root_names) > CATCH_UP_NAMES):
            more: Changes = ([], [])
        elif len(self._root_names) <= CATCH_UP_NAMES:
            more = self._catch_up(watcher)
        elif watcher.wait(SYNC_WAIT if moved else RECENT):
            more = self._update(watcher.drain()[0])
        else:
            more = ([], [])
        closes = self._await_closes(watcher) if self._watcher is watcher else ([], [])
        return changed + more[0] + closes[0], removed + more[1] + closes[1]

    def stop(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()

    # -- internals ------------------------------------------------------------------------
    def _start_watcher(self) -> None:
        root = self.location.root
        if not os.path.isdir(root):
            return
        single_file = not self.location.is_glob and len(self.location.pattern) == 1
        watcher = FolderWatcher(root, recursive=not single_file, on_change=self._wake)
        if watcher.start():
            self._watcher = watcher
            self.listed = False  # list after the watch began, so nothing falls in between
        else:
            self._watch = False

    def _catch_up(self, watcher: FolderWatcher) -> Changes:
        """Wait for the notifications of names that appeared in the folder but were not
        reported yet (see the module docstring)."""
        root = self.location.root.rstrip("/")
        try:
            current = set(os.listdir(root))
        except OSError:
            return [], []
        unknown = current - self._root_names
        changed: list[FileEntry] = []
        removed: list[str] = []
        deadline = time.monotonic() + SYNC_WAIT
        while unknown:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.debug("no notification for %s after %.1f s: listing", unknown, SYNC_WAIT)
                more = self._full()
                return changed + more[0], removed + more[1]
            watcher.wait(remaining)
            paths, relist = watcher.drain()
            if relist:
                more = self._full()
                return changed + more[0], removed + more[1]
            more = self._update(paths)
            changed += more[0]
            removed += more[1]
            unknown -= self._root_names
        return changed, removed

    def _await_closes(self, watcher: FolderWatcher) -> Changes:
        """A file that just appeared and is being written in place is usually closed a moment
        later (``open``, ``write``, ``close``): wait :data:`RECENT` at most for those closes,
        so that a call right after a file was written in place takes it. Only files seen
        for the first time wait, so a slow writer costs this once."""
        pending = self._appeared
        changed: list[FileEntry] = []
        removed: list[str] = []
        deadline = time.monotonic() + RECENT
        while True:
            pending = [path for path in pending if _writing(watcher, path)]
            remaining = deadline - time.monotonic()
            if not pending or remaining <= 0 or not watcher.wait(remaining):
                return changed, removed
            paths, relist = watcher.drain()
            more = self._full() if relist else self._update(paths)
            changed += more[0]
            removed += more[1]

    def _note_root_names(self, paths: Iterable[str]) -> None:
        prefix = self.location.root.rstrip("/") + "/"
        for path in paths:
            if path.startswith(prefix) and "/" not in path[len(prefix) :]:
                self._root_names.add(path[len(prefix) :])

    def _root_changed(self) -> bool:
        """Whether the listed folder itself changed (a file added, renamed or removed in it)
        since the last look; one ``stat`` call."""
        try:
            stamp = os.stat(self.location.root).st_mtime_ns
        except OSError:
            stamp = -1
        changed, self._root_stamp = stamp != self._root_stamp, stamp
        return changed

    def _manifest_moved(self) -> bool:
        """Whether the sink's manifest folder changed since the last look (or too recently
        to tell); one ``stat`` call."""
        try:
            stamp = os.stat(f"{self.location.root.rstrip('/')}/{METADATA_DIR}").st_mtime_ns
        except OSError:
            stamp = -1
        changed, self._manifest_stamp = stamp != self._manifest_stamp, stamp
        return changed or time.time_ns() - stamp < RECENT * 1e9

    def _root_recent(self) -> bool:
        return time.time_ns() - self._root_stamp < RECENT * 1e9

    def _full(self) -> Changes:
        if self._watcher is not None:
            self._root_changed()
            try:
                self._root_names = set(os.listdir(self.location.root))
            except OSError:
                self._root_names = set()
        self._last_full = time.monotonic()
        self.full_listings += 1
        manifest = self.manifest
        fresh = self.listing.list_all() if manifest is None else self._manifest_files(manifest)
        old = self.files
        changed = [entry for path, entry in fresh.items() if old.get(path) != entry]
        removed = [path for path in old if path not in fresh]
        self.files = fresh
        self.listed = True
        return changed, removed

    def _update(self, paths: set[str]) -> Changes:
        self._note_root_names(paths)
        changed: list[FileEntry] = []
        removed: list[str] = []
        for path in paths:
            entry = self.listing.entry_for(path)
            if entry is None:
                if self.files.pop(path, None) is not None:
                    removed.append(path)
            elif (known := self.files.get(path)) != entry:
                if known is None:
                    self._appeared.append(path)
                self.files[path] = entry
                changed.append(entry)
        return changed, removed

    def _manifest_files(self, manifest: Manifest) -> dict[str, FileEntry]:
        layout = self.listing.layout
        strip = self.location.fs._strip_protocol
        fresh: dict[str, FileEntry] = {}
        for listed in manifest.files():
            path = str(strip(listed))
            known = self.files.get(path)
            if known is not None:
                fresh[path] = known
                continue
            entry = self.listing.entry_for(path)
            if entry is None:
                parts = self.location.relative(path)
                partition = layout.classify(parts) if parts is not None else None
                # listed by the manifest but gone: reading it reports it (ignoreMissingFiles)
                entry = FileEntry(path, 0, None, partition or ())
            fresh[path] = entry
        return fresh


def _writing(watcher: FolderWatcher, path: str) -> bool:
    state = watcher.write_state(path)
    return state is not None and state[0] is WriteState.WRITING
