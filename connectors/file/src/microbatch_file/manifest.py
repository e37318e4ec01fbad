"""The file sink's manifest log: which files each committed batch added to an output folder.

Layout under ``<root>/_microbatch_metadata/``::

    0, 1, ...      one JSON entry per committed batch:
                   {"version": 1, "batchId": 3, "committedAtMs": ...,
                    "files": [{"path": "k=v/part-00003-00000-<uuid>.c000.snappy.parquet",
                               "size": 1234, "rows": 10, "partition": {"k": "v"}}]}
    9.compact      every ``compact_interval`` batches: all entries up to batch 9 in one file
                   ({"version": 1, "batchId": 9, "entries": [entry, ...]}); the plain entries
                   and older compacts it covers are then deleted.

An entry is written atomically and create-exclusively: its appearance is the commit of the
batch. Readers take the newest compact plus the plain entries after it, and retry when the
writer's clean-up removes a file under them, so they always see a consistent set of batches.
Paths inside entries are relative to the root, with ``/`` separators.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import fsspec

from microbatch.errors import CorruptCheckpointError
from microbatch.state import StateStore

__all__ = ["METADATA_DIR", "Manifest"]

METADATA_DIR = "_microbatch_metadata"
"""Name of the manifest folder inside a sink's output folder."""

_COMPACT = ".compact"
_READ_ATTEMPTS = 5


class Manifest:
    """The manifest log of the output folder ``root`` on ``fs``.

    ``root`` is a path in ``fs`` (as returned by ``fsspec.core.url_to_fs``). Paths returned by
    :meth:`files` are paths in the same ``fs``. One writer per folder; any number of readers.
    With ``fsync`` (local disks only) entries survive a power loss, not only a killed process.
    """

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        root: str,
        *,
        compact_interval: int = 10,
        fsync: bool = False,
    ) -> None:
        if compact_interval < 1:
            raise ValueError("compact_interval must be at least 1")
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self.path = f"{self.root.rstrip('/')}/{METADATA_DIR}"
        self.compact_interval = compact_interval
        self._store = StateStore(fs.unstrip_protocol(self.path), fsync=fsync, fs=fs)
        self._compacts: dict[int, list[dict[str, Any]]] = {}

    # ------------------------------------------------------------------ queries

    def exists(self) -> bool:
        """True when ``root`` holds a manifest folder (it is a sink's output folder)."""
        return bool(self.fs.isdir(self.path))

    def has_batch(self, batch_id: int) -> bool:
        """True when batch ``batch_id`` is committed (its entry exists, plain or compacted)."""
        return self.entry(batch_id) is not None

    def entry(self, batch_id: int) -> dict[str, Any] | None:
        """The committed entry of batch ``batch_id``, or None when it is not committed."""
        plain = self._read(str(batch_id))
        if plain is not None:
            return self._checked(plain, str(batch_id))
        for _ in range(_READ_ATTEMPTS):
            try:
                names, compacts = self._list()
                if batch_id in names:  # written since the first look
                    value = self._read(str(batch_id))
                    if value is None:
                        raise FileNotFoundError(self._store.location(str(batch_id)))
                    return self._checked(value, str(batch_id))
                covering = [c for c in compacts if c >= batch_id]
                if not covering:
                    return None
                found = [e for e in self._compact(min(covering)) if e["batchId"] == batch_id]
                return found[0] if found else None
            except FileNotFoundError:
                continue
        raise self._unstable()

    def latest_batch_id(self) -> int | None:
        """The highest committed batch id, or None when nothing is committed."""
        plain, compacts = self._list()
        ids = plain + compacts
        return max(ids) if ids else None

    def entries(self) -> list[dict[str, Any]]:
        """Every committed batch entry, in batch-id order (a consistent snapshot)."""
        for _ in range(_READ_ATTEMPTS):
            try:
                return list(self._entries())
            except FileNotFoundError:
                continue
        raise self._unstable()

    def files(self) -> list[str]:
        """Full paths (in ``fs``) of every committed file, in commit order."""
        return [self.full_path(f["path"]) for entry in self.entries() for f in entry["files"]]

    def full_path(self, relative: str) -> str:
        """The path in ``fs`` of a path relative to the root."""
        return f"{self.root.rstrip('/')}/{relative}"

    # ------------------------------------------------------------------ writes

    def commit(
        self, batch_id: int, files: list[dict[str, Any]], *, query_id: str | None = None
    ) -> bool:
        """Record ``files`` as the output of batch ``batch_id``, atomically.

        Returns False (and writes nothing) when the batch is already committed. Every
        ``compact_interval`` batches the log is compacted afterwards. ``query_id`` is stored
        in the entry (``"queryId"``) so that a writer can recognise its own batches.
        """
        if self.has_batch(batch_id):
            return False
        entry: dict[str, Any] = {
            "version": 1,
            "batchId": batch_id,
            "committedAtMs": int(time.time() * 1000),
            "files": files,
        }
        if query_id is not None:
            entry["queryId"] = query_id
        if not self._store.create(str(batch_id), entry):
            return False
        if (batch_id + 1) % self.compact_interval == 0:
            self.compact(batch_id)
        return True

    def compact(self, batch_id: int) -> None:
        """Write ``<batch_id>.compact`` holding every entry up to ``batch_id``, then delete the
        plain entries and older compacts it covers."""
        entries = [e for e in self.entries() if e["batchId"] <= batch_id]
        self._store.write(
            f"{batch_id}{_COMPACT}", {"version": 1, "batchId": batch_id, "entries": entries}
        )
        self._compacts[batch_id] = entries
        plain, compacts = self._list()
        for old in plain:
            if old <= batch_id:
                self._store.delete(str(old))
        for old in compacts:
            if old < batch_id:
                self._store.delete(f"{old}{_COMPACT}")
                self._compacts.pop(old, None)

    # ------------------------------------------------------------------ internals

    def _list(self) -> tuple[list[int], list[int]]:
        plain: list[int] = []
        compacts: list[int] = []
        for name in self._store.names():
            if name.endswith(_COMPACT) and name[: -len(_COMPACT)].isdigit():
                compacts.append(int(name[: -len(_COMPACT)]))
            elif name.isdigit():
                plain.append(int(name))
        return sorted(plain), sorted(compacts)

    def _entries(self) -> Iterator[dict[str, Any]]:
        plain, compacts = self._list()
        base = -1
        if compacts:
            base = compacts[-1]
            yield from self._compact(base)
        for batch_id in plain:
            if batch_id > base:
                entry = self._read(str(batch_id))
                if entry is None:
                    raise FileNotFoundError(self._store.location(str(batch_id)))
                yield self._checked(entry, str(batch_id))

    def _compact(self, batch_id: int) -> list[dict[str, Any]]:
        cached = self._compacts.get(batch_id)
        if cached is not None:
            return cached
        name = f"{batch_id}{_COMPACT}"
        value = self._read(name)
        if value is None:
            raise FileNotFoundError(self._store.location(name))
        if not isinstance(value, dict) or not isinstance(value.get("entries"), list):
            raise self._corrupt(name)
        entries = [self._checked(entry, name) for entry in value["entries"]]
        self._compacts[batch_id] = entries
        return entries

    def _read(self, name: str) -> Any | None:
        try:
            return self._store.read(name)
        except CorruptCheckpointError:
            raise self._corrupt(name) from None

    def _checked(self, entry: Any, name: str) -> dict[str, Any]:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("batchId"), int)
            or not isinstance(entry.get("files"), list)
        ):
            raise self._corrupt(name)
        return entry

    def _corrupt(self, name: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(
            f"Manifest file {self._store.location(name)} is not a valid manifest entry. Restore "
            f"it from a backup; the folder {self.path} must hold only files written by the file "
            "sink (deleting the entry hides the files of its batch from readers)."
        )

    def _unstable(self) -> RuntimeError:
        return RuntimeError(
            f"The manifest {self.path} kept changing while it was read; is more than one query "
            "writing to this folder?"
        )
