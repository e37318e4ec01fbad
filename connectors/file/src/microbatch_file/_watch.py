"""Change notifications for a local folder (watchdog; inotify on Linux).

The watcher only records which paths changed and calls ``on_change``; the source re-reads
those paths on its own thread at the next trigger. On Linux it also knows how each file got
its content (:meth:`FolderWatcher.write_state`): a file created in the folder and written in
place is ``WRITING`` from its creation or first write until its writer closes it
(close-after-write), then ``WHOLE``; a file renamed or moved into the folder is ``WHOLE`` at
once. A file the watcher saw no event for (present before the watch began) has no state.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["WRITE_TIMEOUT", "FolderWatcher", "WriteState"]

log = logging.getLogger("microbatch.file")

_MAX_PATHS = 10_000
"""More changed paths than this between two triggers: a full listing is cheaper."""

_MAX_STATES = 10_000
"""Write states kept before old ones are dropped (a file whose state was dropped is judged
by its size and modification time, as one present before the watch began)."""

WRITE_TIMEOUT = 30.0
"""A file written in place and not closed, with no write for this long, is looked up in
``/proc``: while a process this one can see holds it open for writing it stays ``WRITING``
(looked up again after as long); otherwise (the close notification was lost, or the writer
is a process of another user) it counts as finished."""

CREATE_TIMEOUT = 0.25
"""A file reported created but not written since is looked up in ``/proc`` after this long:
a writer (``cp``, ``open`` then ``write``) holds it open, a file linked into place (``ln``) or
reported for a folder moved in whole is not held open by anyone."""

_WRITERS_TTL = 1.0
"""How long one scan of ``/proc`` for files open for writing is reused."""


class _StopRaceFilter(logging.Filter):
    """Drops watchdog's "queue_events() called when the thread is inactive" error: watchdog
    7 logs it when an event arrives while its inotify thread is being stopped, which
    :meth:`FolderWatcher.stop` does on every stop of a busy folder. Nothing is lost by it (the
    watch is over); as an ERROR line it would only alarm whoever reads the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in str(record.msg)


_STOP_RACE_FILTER = _StopRaceFilter()


class WriteState(enum.Enum):
    WRITING = "writing"
    """Created or written in place, not closed since."""
    WHOLE = "whole"
    """Moved into place, or closed by its writer, and not written since."""


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
        self._states: dict[str, tuple[WriteState, float, bool]] = {}
        """Path: state, ``time.monotonic()`` of its last event, whether it was written."""
        self._track_writes = False
        self._changed = threading.Event()
        self._writers: tuple[float, dict[tuple[int, int], list[str]]] = (float("-inf"), {})

    @property
    def running(self) -> bool:
        return self._observer is not None

    def start(self) -> bool:
        """Start watching; False (with a warning) when the folder cannot be watched."""
        from watchdog import events
        from watchdog.utils import platform

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
        linux = platform.is_linux()
        if linux:
            # full events: a file moved in from outside the folder is a move (whole), not a
            # creation (which would be written in place)
            from watchdog.observers.inotify import InotifyObserver

            logging.getLogger("watchdog.observers.inotify").addFilter(_STOP_RACE_FILTER)
            observer: Any = InotifyObserver(generate_full_events=True)
        else:
            from watchdog.observers import Observer

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
        self._track_writes = linux
        return True

    def write_state(self, path: str) -> tuple[WriteState, float] | None:
        """How the file at ``path`` got its content; None when no event was seen (or writes
        are not tracked). With ``WRITING`` comes the ``time.monotonic()`` at which to ask
        again (see :data:`WRITE_TIMEOUT`), with ``WHOLE`` the time of the event."""
        with self._lock:
            state = self._states.get(path)
        if state is None:
            return None
        if state[0] is WriteState.WRITING:
            due = state[1] + (WRITE_TIMEOUT if state[2] else CREATE_TIMEOUT)
            if due > time.monotonic():
                return WriteState.WRITING, due
            still = self._open_for_writing(path, since=state[1])
            with self._lock:
                if self._states.get(path) == state:
                    now = time.monotonic()
                    kind = WriteState.WRITING if still else WriteState.WHOLE
                    self._states[path] = (kind, now, True)
                state = self._states.get(path)
            if state is None:
                return None
            if state[0] is WriteState.WRITING:
                return WriteState.WRITING, state[1] + WRITE_TIMEOUT
        return state[0], state[1]

    def held_for_writing(self, path: str) -> bool:
        """Whether a process whose ``/proc`` entries this one may read holds ``path`` open for
        writing now (one scan of ``/proc``, reused for :data:`_WRITERS_TTL` seconds); False
        when writes are not tracked. For files the watcher saw no event for: a file its
        writer opened before the watch began and is still writing."""
        if not self._track_writes:
            return False
        return self._open_for_writing(path, since=float("-inf"))

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a change not yet drained; True if there is one."""
        return self._changed.wait(timeout)

    def drain(self) -> tuple[set[str], bool]:
        """The file paths changed since the last call, and whether to list everything again."""
        with self._lock:
            self._changed.clear()
            paths, relist = self._paths, self._relist
            self._paths, self._relist = set(), False
            if len(self._states) > _MAX_STATES:
                self._prune()
        return paths, relist

    def stop(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=5)

    def _open_for_writing(self, path: str, *, since: float) -> bool:
        """Whether a process whose ``/proc`` entries this one may read has ``path`` open for
        writing (one scan of ``/proc``, made after ``since`` and reused for
        :data:`_WRITERS_TTL` seconds)."""
        try:
            info = os.stat(path)
        except OSError:
            return False
        scanned, opened = self._writers
        if scanned <= since or time.monotonic() - scanned > _WRITERS_TTL:
            opened = _open_files()
            self._writers = (time.monotonic(), opened)
        return any(_for_writing(fdinfo) for fdinfo in opened.get((info.st_dev, info.st_ino), ()))

    def _prune(self) -> None:
        """Drop the oldest states (under the lock): files written in place but finished long
        ago are judged by their times alone."""
        keep = sorted(self._states.items(), key=lambda item: item[1][1])[-_MAX_STATES // 2 :]
        self._states = dict(keep)

    def _record(self, event: Any) -> None:
        source = _text(event.src_path)
        target = _text(getattr(event, "dest_path", ""))
        kind = event.event_type
        with self._lock:
            if event.is_directory:
                self._relist = True
            else:
                self._paths.update(path for path in (source, target) if path)
                if len(self._paths) > _MAX_PATHS:
                    self._paths.clear()
                    self._relist = True
                if self._track_writes:
                    self._track(kind, source, target)
            self._changed.set()
        self._on_change()

    def _track(self, kind: str, source: str, target: str) -> None:
        """Update the write state of the paths of one event (under the lock)."""
        now = time.monotonic()
        states = self._states
        if kind == "modified":
            states[source] = (WriteState.WRITING, now, True)
        elif kind == "created" and not _linked(source):
            states[source] = (WriteState.WRITING, now, False)
        elif kind in ("created", "closed"):  # linked into place (``ln``), or closed: whole
            states[source] = (WriteState.WHOLE, now, False)
        elif kind == "moved":
            if source:
                states.pop(source, None)
            if target:
                states[target] = (WriteState.WHOLE, now, False)
        elif kind == "deleted":
            states.pop(source, None)


def _text(path: str | bytes) -> str:
    return path if isinstance(path, str) else path.decode()


def _linked(path: str) -> bool:
    """A file "created" with more than one link was linked into place whole (``ln``); one
    created by opening it is written in place."""
    try:
        return os.stat(path).st_nlink > 1
    except OSError:
        return False


def _open_files() -> dict[tuple[int, int], list[str]]:
    """``(st_dev, st_ino)`` of every file open in a process whose ``/proc/<pid>/fd`` this
    process may read (its own user's, or all as root), with the ``/proc/<pid>/fdinfo/<fd>``
    paths that tell how each is open (read only for the files asked about: reading every
    one would cost most of the scan)."""
    found: dict[tuple[int, int], list[str]] = {}
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        folder = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(folder)
        except OSError:
            continue
        for fd in fds:
            try:
                if not os.readlink(f"{folder}/{fd}").startswith("/"):
                    continue  # a socket, pipe or other non-file
                info = os.stat(f"{folder}/{fd}")
            except OSError:
                continue
            found.setdefault((info.st_dev, info.st_ino), []).append(f"/proc/{pid}/fdinfo/{fd}")
    return found


def _for_writing(fdinfo: str) -> bool:
    """Whether the descriptor ``fdinfo`` describes is open for writing (False once gone)."""
    try:
        with open(fdinfo) as handle:
            flags = next(int(line.split()[1], 8) for line in handle if line.startswith("flags:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return False
    return flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)
