"""``cleanSource``: archiving or deleting the files of committed batches (best effort)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterable

from ._listing import FileEntry
from ._location import SourceLocation

__all__ = ["Cleaner"]

log = logging.getLogger("microbatch.file")


class Cleaner:
    """Moves files under ``archive`` (the full original path re-rooted there, as Spark does)
    or deletes them. Failures are logged, never raised: the data is already committed."""

    def __init__(self, location: SourceLocation, mode: str, archive: SourceLocation | None):
        self.location = location
        self.mode = mode
        self.archive = archive

    def target(self, path: str) -> str:
        """Where ``path`` is archived."""
        assert self.archive is not None
        return f"{self.archive.path.rstrip('/')}/{path.lstrip('/')}"

    def clean(self, entries: Iterable[FileEntry]) -> None:
        for entry in entries:
            try:
                if self.mode == "DELETE":
                    self._delete(entry.path)
                else:
                    self._archive(entry.path)
            except OSError as error:
                log.warning(
                    "cleanSource=%s: could not clean up %s (%s); the file stays in place",
                    self.mode.lower(),
                    self.location.show(entry.path),
                    error,
                )

    def _delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):  # already cleaned by an earlier attempt
            if self.location.local:
                os.remove(path)
            else:
                self.location.fs.rm(path)

    def _archive(self, path: str) -> None:
        fs = self.location.fs
        target = self.target(path)
        if self.location.local:
            if not os.path.exists(path):
                return  # already archived by an earlier attempt
            if os.path.exists(target):
                raise FileExistsError(f"{target} exists already")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                os.rename(path, target)
            except OSError:
                shutil.move(path, target)
        else:
            if not fs.exists(path):
                return
            if fs.exists(target):
                raise FileExistsError(f"{self.location.show(target)} exists already")
            parent = target.rsplit("/", 1)[0]
            if parent:
                fs.makedirs(parent, exist_ok=True)
            fs.mv(path, target)
