"""Files that changed after a batch read them, and names reused after ``cleanSource``.

A file is read once over the life of the checkpoint, as the bytes it had when its batch took
it (the log keeps that size and modification time). Whatever is written to it afterwards is
never read: such a file is logged at WARNING, with what to do, and counted, once per file
(again after it was removed and came back).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from ._listing import FileEntry
from ._location import SourceLocation
from ._tracking import FileLog

__all__ = ["ChangeReport"]

log = logging.getLogger("microbatch.file")


def _ms(mtime: float | None) -> int | None:
    return None if mtime is None else round(mtime * 1000)


def _when(mtime: float | None) -> str:
    if mtime is None:
        return "unknown"
    return datetime.fromtimestamp(mtime).astimezone().isoformat(timespec="milliseconds")


class ChangeReport:
    """Compares files listed again with what their batch read (see the module docstring).

    ``changed`` counts files written to after they were read; ``reused`` counts new files
    under the name of a file that ``cleanSource`` archived or deleted.
    """

    def __init__(self, location: SourceLocation, log_: FileLog, clean_mode: str, owner: str):
        self.location = location
        self.log = log_
        self.clean_mode = clean_mode
        self.owner = owner
        self.changed = 0
        self.reused = 0
        self._reported: set[str] = set()

    def check(self, entry: FileEntry) -> None:
        """``entry`` was listed and its identity was taken before: report it if it is not
        what was read."""
        taken = self.log.taken_as(entry)
        if taken is None or entry.path in self._reported:
            return
        batch, read = taken
        if read.path != entry.path:
            return  # fileNameOnly: the same name in another folder, by design not read
        grew = entry.size != read.size
        newer = _ms(entry.mtime) != _ms(read.mtime) and (
            entry.mtime is None or read.mtime is None or entry.mtime > read.mtime
        )
        if not (grew or newer):
            return  # unchanged, or only its time set back (cp -p, touch -d): same bytes
        self._reported.add(entry.path)
        where = self.location.show(entry.path)
        if self.clean_mode != "OFF" and batch <= self.log.cleaned_through:
            self.reused += 1
            log.warning(
                "%s: not reading file %s: a file of that name was read in batch %d and "
                "%s by cleanSource=%s, and a file is read once per name over the life of the "
                "checkpoint. Give every new file a new name (for example with a timestamp or a "
                "UUID in it). Counted in metric numFilesSkippedForReusedName.",
                self.owner,
                where,
                batch,
                "archived" if self.clean_mode == "ARCHIVE" else "deleted",
                self.clean_mode.lower(),
            )
            return
        self.changed += 1
        log.warning(
            "%s: file %s changed after batch %d read it (%d bytes, modified %s; now %d bytes, "
            "modified %s): what changed is not read. Files must appear in the source folder "
            "whole: write each file elsewhere, or under a name ending in .tmp, and rename it "
            "into place; for a writer that reopens a file to append to it, set option "
            "minFileAge to longer than the writer's pauses. Counted in metric "
            "numFilesChangedAfterRead.",
            self.owner,
            where,
            batch,
            read.size,
            _when(read.mtime),
            entry.size,
            _when(entry.mtime),
        )

    def forget(self, paths: Iterable[str]) -> None:
        """``paths`` disappeared: a file that comes back under one is reported again."""
        for path in paths:
            self._reported.discard(path)
