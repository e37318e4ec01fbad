"""Where a file source reads: a filesystem, a folder to list and an optional glob pattern."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from microbatch.errors import ConfigurationError

__all__ = ["SourceLocation", "has_magic"]

_MAGIC = re.compile(r"[*?\[]")


def has_magic(text: str) -> bool:
    """Whether ``text`` holds glob characters (``*``, ``?``, ``[``)."""
    return _MAGIC.search(text) is not None


@dataclass(frozen=True)
class SourceLocation:
    """A source path resolved against its filesystem.

    ``root`` is the folder that is listed (the part of the path before any glob character);
    ``pattern`` holds the remaining components, matched one by one against the names below
    ``root``. A plain folder has an empty pattern; a plain file is its parent folder with the
    file's name as pattern.
    """

    url: str
    fs: Any
    path: str
    root: str
    pattern: tuple[str, ...]
    is_glob: bool

    @classmethod
    def resolve(cls, url: str) -> SourceLocation:
        fs, path = fsspec.core.url_to_fs(url)
        path = path.rstrip("/") or "/"
        if not has_magic(path):
            return cls(url=url, fs=fs, path=path, root=path, pattern=(), is_glob=False)
        parts = path.split("/")
        first = next(index for index, part in enumerate(parts) if has_magic(part))
        root = "/".join(parts[:first]) or "/"
        return cls(url=url, fs=fs, path=path, root=root, pattern=tuple(parts[first:]), is_glob=True)

    @property
    def local(self) -> bool:
        return isinstance(self.fs, LocalFileSystem)

    def show(self, path: str | None = None) -> str:
        """``path`` (default: the source path) as users read it: ``file:/a/b``, ``memory:///a``."""
        target = self.path if path is None else path
        if self.local:
            return f"file:{target}"
        return str(self.fs.unstrip_protocol(target))

    def check_exists(self) -> None:
        """Spark's ``PATH_NOT_FOUND`` when a plain path does not exist (globs may match later)."""
        if self.is_glob:
            return
        if not self.fs.exists(self.path):
            raise ConfigurationError(
                f"[PATH_NOT_FOUND] Path does not exist: {self.show()}. Create the folder before "
                "starting the query, or give a glob pattern (e.g. '<folder>/*.json') to read "
                "files that will match later."
            )

    def single_file(self) -> SourceLocation:
        """For a plain path naming a file: the parent folder with the name as pattern."""
        parent, name = posixpath.split(self.path)
        return SourceLocation(
            url=self.url,
            fs=self.fs,
            path=self.path,
            root=parent or "/",
            pattern=(_escape(name),),
            is_glob=False,
        )

    def relative(self, path: str) -> tuple[str, ...] | None:
        """The components of ``path`` below ``root``, or None when it is not below it."""
        root = self.root.rstrip("/")
        if not path.startswith(root + "/"):
            return None
        return tuple(path[len(root) + 1 :].split("/"))


def _escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def archive_conflict(source: SourceLocation, archive: SourceLocation) -> str | None:
    """Why ``archive`` cannot receive archived files of ``source`` (None when it can).

    As Spark: both paths are cut to the depth of the shorter one, and the archive folder is
    refused when the source pattern matches it there (archived files could be read again).
    """
    if type(source.fs) is not type(archive.fs):
        return (
            f"sourceArchiveDir {archive.show()} is not on the filesystem of the source "
            f"{source.show()}; archived files are moved, so both must be on the same one"
        )
    import fnmatch

    source_parts = [part for part in source.path.split("/") if part]
    archive_parts = [part for part in archive.path.split("/") if part]
    depth = min(len(source_parts), len(archive_parts))
    cut_source, cut_archive = source_parts[:depth], archive_parts[:depth]
    if all(
        fnmatch.fnmatchcase(name, pattern)
        for name, pattern in zip(cut_archive, cut_source, strict=True)
    ):
        return (
            f"sourceArchiveDir {archive.show()} lies where the source path {source.show()} "
            "could match archived files (requirement failed: Base archive path cannot be set to "
            "the path where archived path can possibly match with source pattern); choose a "
            "folder outside the source path"
        )
    return None
