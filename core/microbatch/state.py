"""Durable JSON files in one folder, written atomically through fsspec.

The checkpoint is built from these folders, and each connector gets one of its own
(``ReadContext.state`` / ``WriteContext.state``) for what it must remember across restarts.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from .errors import CorruptCheckpointError

__all__ = ["StateStore"]

_TEMPORARY = re.compile(r"\..+\.[0-9a-f]{32}\.tmp")
"""The name of a temporary file of :meth:`StateStore.write`: ``.<name>.<uuid hex>.tmp``."""


class StateStore:
    """A folder of JSON files addressed by name.

    Writes are atomic: a reader sees the old content or the new one, never a partial file, also
    after the writing process is killed. :meth:`create` refuses to replace an existing file,
    which is how two writers of one checkpoint are detected.
    """

    def __init__(
        self, url: str, *, fsync: bool = False, fs: fsspec.AbstractFileSystem | None = None
    ) -> None:
        """``fs``, when given, is used instead of a filesystem made from ``url`` (so that one
        carrying credentials or other settings is kept)."""
        if fs is None:
            self.fs, self.path = fsspec.core.url_to_fs(url)
        else:
            self.fs, self.path = fs, fs._strip_protocol(url)
        self.url = url
        self.fsync = fsync
        self._local = isinstance(self.fs, LocalFileSystem)
        self._made = False

    def child(self, name: str) -> StateStore:
        """The store of a subfolder."""
        return StateStore(f"{self.url.rstrip('/')}/{name}", fsync=self.fsync, fs=self.fs)

    def location(self, name: str) -> str:
        return f"{self.path.rstrip('/')}/{name}"

    def exists(self, name: str) -> bool:
        return bool(self.fs.exists(self.location(name)))

    def names(self, *, hidden: bool = False) -> list[str]:
        """Names of the files in this folder, unsorted; names starting with ``.`` (temporary
        files and other bookkeeping) only when ``hidden``."""
        try:
            entries = self.fs.ls(self.path, detail=False)
        except FileNotFoundError:
            return []
        names = (str(entry).rstrip("/").rsplit("/", 1)[-1] for entry in entries)
        return [name for name in names if hidden or not name.startswith(".")]

    def sweep_temporary(
        self, *, keep: Callable[[str], bool] | None = None, names: Iterable[str] | None = None
    ) -> int:
        """Remove the temporary files (``.<name>.<32 hex>.tmp``) that writes of this store
        left behind when their process was killed; return how many were removed.

        Only call it while no other process writes to this folder (for a checkpoint: once its
        lock is taken), since it cannot tell a killed write from one in progress. ``keep``
        names temporary files to leave alone (those of writes other processes may be making);
        ``names`` are the folder's file names when the caller has listed them already.
        """
        removed = 0
        for name in self.names(hidden=True) if names is None else names:
            if _TEMPORARY.fullmatch(name) and not (keep is not None and keep(name)):
                self.delete(name)
                removed += 1
        return removed

    def read_bytes(self, name: str) -> bytes | None:
        """The raw content stored under ``name``, or ``None`` when there is no such file."""
        try:
            with self.fs.open(self.location(name), "rb") as handle:
                data: bytes = handle.read()
        except FileNotFoundError:
            return None
        return data

    def read(self, name: str) -> Any | None:
        """The JSON value stored under ``name``, or ``None`` when there is no such file.

        A file that is not valid JSON raises :class:`CorruptCheckpointError` naming it.
        """
        raw = self.read_bytes(name)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise CorruptCheckpointError(
                f"Checkpoint file {self.url.rstrip('/')}/{name} is corrupted ({error}). "
                "Restore it from a backup, or delete it and every later entry to re-run those "
                "batches from the source."
            ) from None

    def write(self, name: str, value: Any) -> None:
        """Store ``value`` as JSON under ``name``, replacing any previous content atomically."""
        self._put(name, value, exclusive=False)

    def create(self, name: str, value: Any) -> bool:
        """Store ``value`` under ``name`` unless a file of that name exists; False if it did."""
        return self._put(name, value, exclusive=True)

    def delete(self, name: str) -> None:
        """Remove ``name`` if it exists."""
        with contextlib.suppress(FileNotFoundError):
            if self._local:
                os.remove(self.location(name))
            else:
                self.fs.rm(self.location(name))

    def _put(self, name: str, value: Any, *, exclusive: bool) -> bool:
        data = json.dumps(value, separators=(",", ":"), sort_keys=False).encode()
        if self._local:
            return self._put_local(self.location(name), data, exclusive=exclusive)
        if not self._made:
            self.fs.makedirs(self.path, exist_ok=True)
            self._made = True
        target = self.location(name)
        if exclusive and self.fs.exists(target):
            return False
        temporary = self.location(f".{name}.{uuid.uuid4().hex}.tmp")
        with self.fs.open(temporary, "wb") as handle:
            handle.write(data)
        self.fs.mv(temporary, target)
        return True

    def _put_local(self, target: str, data: bytes, *, exclusive: bool) -> bool:
        folder = os.path.dirname(target)
        if not self._made:
            os.makedirs(folder, exist_ok=True)
            self._made = True
        temporary = os.path.join(folder, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
        with open(temporary, "wb") as handle:
            handle.write(data)
            if self.fsync:
                handle.flush()
                os.fsync(handle.fileno())
        try:
            if exclusive:
                try:
                    os.link(temporary, target)
                except FileExistsError:
                    return False
            else:
                os.replace(temporary, target)
        finally:
            if exclusive and os.path.exists(temporary):
                os.unlink(temporary)
        if self.fsync:
            directory = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        return True
