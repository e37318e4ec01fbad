"""Change notifications for a local folder (watchdog; inotify on Linux).

The watcher only records which paths changed and calls ``on_change``; the source re-reads
those paths on its own thread at the next trigger. On Linux it also knows which files are
being written in place (created or modified, not yet closed), so that the source does not
take a file between its creation and its last write.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["FolderWatcher"]

log = logging.getLogger("microbatch.file")

_MAX_PATHS = 10_000
"""More changed paths than this between two triggers: a full listing is cheaper."""

WRITE_TIMEOUT = 5.0
"""A file written in place counts as finished this long after its last write even when no
close was seen (a hard link, a lost notification)."""


class FolderWatcher:
    """Watches ``folder`` (and its subfolders when ``recursive``) for files that appear,
    change, move or disappear."""

    def __init__(self, folder: str, *, recursive: bool, on_change: Callable[[], None]) -> None:
        self.folder = folder
        self.recursive = recursive
        self._on_change = on_change
        self._lock = threading.Lock()
        self._paths: set[str] = set()
        self._relist = False
        self._observer: Any = None
        self._writing: dict[str, float] = {}
        self._track_writes = False
        self._changed = threading.Event()

    @property
    def running(self) -> bool:
        return self._observer is not None

    def start(self) -> bool:
        """Start watching; False (with a warning) when the folder cannot be watched."""
        from watchdog import events
        from watchdog.observers import Observer

        watcher = self

        class Handler(events.FileSystemEventHandler):
            def on_any_event(self, event: events.FileSystemEvent) -> None:
                watcher._record(event)

        wanted: list[type[events.FileSystemEvent]] = [
            events.FileCreatedEvent,
            events.FileModifiedEvent,
            events.FileAttribEvent,
            events.FileClosedEvent,
            events.FileMovedEvent,
            events.FileDeletedEvent,
            events.DirCreatedEvent,
            events.DirMovedEvent,
            events.DirDeletedEvent,
        ]
        observer = Observer()
        try:
            observer.schedule(Handler(), self.folder, recursive=self.recursive, event_filter=wanted)
            observer.daemon = True
            observer.start()
        except OSError as error:
            log.warning(
                "cannot watch %s for new files (%s); the folder is listed at every trigger instead",
                self.folder,
                error,
            )
            return False
        self._observer = observer
        from watchdog.utils import platform

        self._track_writes = platform.is_linux()
        return True

    def writing_until(self, path: str) -> float | None:
        """When (``time.monotonic()``) the file at ``path`` counts as finished, if it is being
        written in place now; None when it is not."""
        with self._lock:
            last = self._writing.get(path)
        if last is None:
            return None
        until = last + WRITE_TIMEOUT
        return until if until > time.monotonic() else None

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a change not yet drained; True if there is one."""
        return self._changed.wait(timeout)

    def drain(self) -> tuple[set[str], bool]:
        """The file paths changed since the last call, and whether to list everything again."""
        with self._lock:
            self._changed.clear()
            paths, relist = self._paths, self._relist
            self._paths, self._relist = set(), False
            if len(self._writing) > 1000:
                expired = time.monotonic() - WRITE_TIMEOUT
                self._writing = {p: t for p, t in self._writing.items() if t > expired}
        return paths, relist

    def stop(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=5)

    def _record(self, event: Any) -> None:
        source = _text(event.src_path)
        target = _text(getattr(event, "dest_path", ""))
        started = event.event_type == "modified" or (
            event.event_type == "created" and _empty(source)
        )
        with self._lock:
            if event.is_directory:
                self._relist = True
            else:
                self._paths.update(path for path in (source, target) if path)
                if len(self._paths) > _MAX_PATHS:
                    self._paths.clear()
                    self._relist = True
                if self._track_writes:
                    if started:
                        self._writing[source] = time.monotonic()
                    elif event.event_type != "attrib":  # closed, moved, deleted, filled
                        self._writing.pop(source, None)
            self._changed.set()
        self._on_change()


def _text(path: str | bytes) -> str:
    return path if isinstance(path, str) else path.decode()


def _empty(path: str) -> bool:
    """A file created empty is being written (open, then write); one that appears with data
    was renamed or linked into place whole (watchdog reports both as "created")."""
    try:
        return os.stat(path).st_size == 0
    except OSError:
        return False
