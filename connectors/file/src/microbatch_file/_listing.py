"""Listing a source folder: which files belong to the source, with their size, time and partition.

Rules (Spark's, plus in-progress names): names starting with ``.`` or ``_`` (files and folders)
are never read, nor names ending in an in-progress suffix; below the listed folder only
``key=value`` folders are entered (any folder with ``recursiveFileLookup``).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from ._location import SourceLocation

__all__ = ["FileEntry", "Layout", "Listing", "mtime_of"]

log = logging.getLogger("microbatch.file")

Partition = tuple[tuple[str, str], ...]


class FileEntry(NamedTuple):
    """One file: full path on its filesystem, size in bytes, modification time in seconds
    (None when the filesystem keeps none) and the raw ``key=value`` pairs of its folders."""

    path: str
    size: int
    mtime: float | None
    partition: Partition = ()

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def mtime_of(info: dict[str, Any]) -> float | None:
    """The modification time in an fsspec ``info`` dict, whatever the filesystem calls it."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


@dataclass(frozen=True)
class Layout:
    """Which names below a :class:`SourceLocation` are files of the source."""

    location: SourceLocation
    in_progress_suffixes: tuple[str, ...]
    recursive: bool = False
    name_filter: str | None = None

    def __post_init__(self) -> None:
        suffixes = tuple(suffix for suffix in self.in_progress_suffixes if suffix)
        object.__setattr__(self, "in_progress_suffixes", suffixes)

    def hidden(self, name: str) -> bool:
        return name.startswith((".", "_"))

    def wanted_name(self, name: str) -> bool:
        """Whether a file of this name may be a source file: not hidden, not in progress, and
        matching ``pathGlobFilter``; for a folder source ``classify((name,)) == ()``, quickly
        (most files are these)."""
        return not (
            name.startswith((".", "_"))
            or (self.in_progress_suffixes and name.endswith(self.in_progress_suffixes))
            or (self.name_filter is not None and not fnmatch.fnmatchcase(name, self.name_filter))
        )

    def enter(self, parts: tuple[str, ...]) -> bool:
        """Whether the folder ``parts`` (below the root) may hold files of the source."""
        pattern = self.location.pattern
        depth = len(parts)
        if self.hidden(parts[-1]):
            return False
        if depth <= len(pattern):
            return fnmatch.fnmatchcase(parts[-1], pattern[depth - 1])
        return self.recursive or _partition_pair(parts[-1]) is not None

    def classify(self, parts: tuple[str, ...]) -> Partition | None:
        """The partition of the file ``parts`` (below the root), or None when not a source file."""
        pattern = self.location.pattern
        name = parts[-1]
        if len(parts) < len(pattern) or not self.wanted_name(name):
            return None
        for index, expected in enumerate(pattern):
            if self.hidden(parts[index]) or not fnmatch.fnmatchcase(parts[index], expected):
                return None
        folders = parts[len(pattern) : -1]
        if self.recursive:
            return None if any(self.hidden(folder) for folder in folders) else ()
        pairs = []
        for folder in folders:
            pair = _partition_pair(folder)
            if pair is None or self.hidden(folder):
                return None
            pairs.append(pair)
        return tuple(pairs)


def _partition_pair(name: str) -> tuple[str, str] | None:
    key, sep, value = name.partition("=")
    if not sep or not key:
        return None
    return key, value


class Listing:
    """Lists every source file below a location (local folders with ``os.scandir``, others
    with one ``find`` call), and classifies single paths for incremental updates."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.location = layout.location
        self._ignored_reported: set[str] = set()

    def list_all(self) -> dict[str, FileEntry]:
        """Every source file now, by path. A root that does not exist gives no files."""
        walk = self._walk_local if self.location.local else self._walk_fsspec
        return dict(walk())

    def entry_for(self, path: str) -> FileEntry | None:
        """The entry of one file path (None when it is not a source file or does not exist)."""
        parts = self.location.relative(path)
        if parts is None:
            return None
        partition = self.layout.classify(parts)
        if partition is None:
            return None
        try:
            if self.location.local:
                info = os.stat(path)
                if not stat.S_ISREG(info.st_mode):
                    return None
                return FileEntry(path, info.st_size, info.st_mtime, partition)
            details = self.location.fs.info(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if details.get("type") != "file":
            return None
        return FileEntry(path, int(details.get("size") or 0), mtime_of(details), partition)

    # -- walkers --------------------------------------------------------------------------
    def _walk_local(self) -> Iterator[tuple[str, FileEntry]]:
        root = self.location.root
        layout = self.layout
        plain = not self.location.pattern
        stack: list[tuple[str, tuple[str, ...]]] = [(root, ())]
        while stack:
            folder, parts = stack.pop()
            try:
                scanner = os.scandir(folder)
            except (FileNotFoundError, NotADirectoryError):
                continue
            with scanner:
                for item in scanner:
                    try:
                        is_dir = item.is_dir()
                    except OSError:
                        continue
                    if is_dir:
                        child = (*parts, item.name)
                        if layout.enter(child):
                            stack.append((item.path, child))
                        else:
                            self._report_ignored(item.path, child)
                        continue
                    partition: Partition = ()
                    if plain and not parts:
                        if not layout.wanted_name(item.name):
                            continue
                    else:
                        found = layout.classify((*parts, item.name))
                        if found is None:
                            continue
                        partition = found
                    try:
                        info = item.stat()
                    except FileNotFoundError:
                        continue
                    if stat.S_ISREG(info.st_mode):
                        yield (
                            item.path,
                            FileEntry(item.path, info.st_size, info.st_mtime, partition),
                        )

    def _walk_fsspec(self) -> Iterator[tuple[str, FileEntry]]:
        fs = self.location.fs
        try:
            found = fs.find(self.location.root, withdirs=False, detail=True)
        except FileNotFoundError:
            return
        for path, details in found.items():
            if details.get("type", "file") != "file":
                continue
            parts = self.location.relative(path)
            if parts is None:
                continue
            partition = self.layout.classify(parts)
            if partition is None:
                if len(parts) > 1:
                    self._report_ignored_file(path, parts)
                continue
            yield path, FileEntry(path, int(details.get("size") or 0), mtime_of(details), partition)

    # -- reporting ------------------------------------------------------------------------
    def _report_ignored(self, path: str, parts: tuple[str, ...]) -> None:
        pattern = self.location.pattern
        if len(parts) <= len(pattern) or self.layout.hidden(parts[-1]) or self.layout.recursive:
            return
        if path in self._ignored_reported:
            return
        self._ignored_reported.add(path)
        log.warning(
            "file source %s: not reading the files in folder %s, which is not a key=value "
            "partition folder; set option recursiveFileLookup=true to read every subfolder",
            self.location.show(),
            self.location.show(path),
        )

    def _report_ignored_file(self, path: str, parts: tuple[str, ...]) -> None:
        pattern = self.location.pattern
        for depth in range(len(pattern) + 1, len(parts)):
            folder = parts[:depth]
            if not self.layout.enter(folder):
                self._report_ignored(f"{self.location.root.rstrip('/')}/{'/'.join(folder)}", folder)
                return
