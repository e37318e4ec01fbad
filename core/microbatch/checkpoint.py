"""The checkpoint: a folder of plain JSON files that makes a query restartable.

Layout::

    <checkpoint>/metadata        {"id": <query id>, "version": 1, "source": ..., "sink": ...}
    <checkpoint>/lock            {"runId", "pid", "host", "startedAt"} while a run holds it
    <checkpoint>/offsets/<N>     written BEFORE batch N has any side effect (the write-ahead log)
    <checkpoint>/commits/<N>     written AFTER the sink committed batch N
    <checkpoint>/sources/0/      the source's own state
    <checkpoint>/sink/           the sink's own state

Every file is written atomically through fsspec (see :class:`~microbatch.state.StateStore`),
so a checkpoint may live on any filesystem fsspec reaches, ``memory://`` included.
"""

from __future__ import annotations

import os
import posixpath
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from .errors import (
    CheckpointError,
    CheckpointInUseError,
    CheckpointMismatchError,
    CorruptCheckpointError,
)
from .progress import iso_timestamp
from .state import StateStore

__all__ = ["FORMAT_VERSION", "BatchEntry", "Checkpoint"]

FORMAT_VERSION = 1

# Checkpoints held by running queries of this process. A lock file naming this process is
# stale exactly when its checkpoint is not in this set.
_HELD: set[tuple[str, str]] = set()
_HELD_GUARD = threading.Lock()


@dataclass(frozen=True)
class BatchEntry:
    """One offset-log entry: batch ``batch_id`` covers the source range ``(start, end]``."""

    batch_id: int
    start: dict[str, Any] | None
    end: dict[str, Any]
    timestamp_ms: int

    def to_json(self) -> dict[str, Any]:
        return {
            "batchId": self.batch_id,
            "batchTimestampMs": self.timestamp_ms,
            "start": self.start,
            "end": self.end,
        }

    @classmethod
    def from_json(cls, value: Any, where: str) -> BatchEntry:
        try:
            return cls(
                batch_id=int(value["batchId"]),
                start=value["start"],
                end=value["end"],
                timestamp_ms=int(value["batchTimestampMs"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptCheckpointError(
                f"Checkpoint file {where} is not a valid offset log entry (missing or bad "
                f"field {error}). Restore it, or delete it and later entries to re-plan them."
            ) from None


class Checkpoint:
    """Reads and writes one query's checkpoint folder.

    ``retain`` is how many recent batches keep their offset and commit entries
    (Spark's ``minBatchesToRetain``).
    """

    def __init__(self, url: str, *, retain: int = 100, fsync: bool = False) -> None:
        self.url = url.rstrip("/") or url
        self.retain = retain
        self.root = StateStore(self.url, fsync=fsync)
        self.offsets = self.root.child("offsets")
        self.commits = self.root.child("commits")
        self._purged_below = 0
        self._run_id: str | None = None

    # -- metadata -------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any] | None:
        """The metadata of an existing checkpoint, or ``None`` for a new one."""
        value = self.root.read("metadata")
        if value is not None and not (isinstance(value, dict) and "id" in value):
            raise CorruptCheckpointError(
                f"Checkpoint file {self.url}/metadata has no query id. Restore it from a backup "
                "or start the query with a new checkpoint location."
            )
        return value

    def open(self, *, source: str, sink: str) -> dict[str, Any]:
        """Return the checkpoint's metadata, creating it for a new query.

        Refuses a checkpoint written by a query with a different source, a newer format
        version, or one whose logs exist without metadata.
        """
        if self.root.fs.isfile(self.root.path):
            raise CheckpointError(
                f"Checkpoint location {self.url} is a file, not a folder; choose another location"
            )
        existing = self.metadata()
        if existing is None:
            if self.offsets.names() or self.commits.names():
                raise CheckpointError(
                    f"Checkpoint location {self.url} is in an inconsistent state: the metadata "
                    "file is missing but its offset or commit logs contain data. Restore the "
                    "metadata file, or use a new checkpoint location to start over."
                )
            created = {
                "id": str(uuid.uuid4()),
                "version": FORMAT_VERSION,
                "source": source,
                "sink": sink,
                "createdAt": iso_timestamp(time.time()),
            }
            if self.root.create("metadata", created):
                return created
            existing = self.metadata()
            assert existing is not None
        version = existing.get("version", FORMAT_VERSION)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise CheckpointError(
                f"Checkpoint {self.url} has format version {version!r}; this microbatch reads "
                f"versions up to {FORMAT_VERSION}. Upgrade microbatch to use it."
            )
        if existing.get("source") not in (None, source):
            raise CheckpointMismatchError(
                f"Checkpoint {self.url} belongs to a query reading from '{existing['source']}', "
                f"not '{source}'. Changing a query's source is not supported: use a new "
                "checkpoint location for the new query."
            )
        return existing

    # -- ownership ------------------------------------------------------------------------
    @property
    def identity(self) -> tuple[str, str]:
        """The checkpoint's folder, however its URL was spelt (``ck``, ``file://ck``, ``ck/.``)."""
        protocol = self.root.fs.protocol
        protocol = protocol if isinstance(protocol, str) else protocol[0]
        path = self.root.path
        if isinstance(self.root.fs, LocalFileSystem):
            return "file", os.path.realpath(path)
        return protocol, posixpath.normpath(path)

    def acquire(self, run_id: str) -> None:
        """Take the checkpoint for run ``run_id``; :class:`CheckpointInUseError` if held.

        A lock left by a process that no longer runs on this host is taken over; when two
        processes race for the same stale lock, one wins and the other is refused.
        """
        record = {
            "runId": run_id,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "startedAt": iso_timestamp(time.time()),
        }
        with _HELD_GUARD:
            if self.identity in _HELD:
                raise self._in_use("another active query of this process")
            if not self.root.create("lock", record):
                holder = self.lock_holder()
                if holder is not None:
                    raise self._in_use(holder)
                if not self._set_aside("lock") or not self.root.create("lock", record):
                    raise self._in_use(self.lock_holder() or "another process starting now")
            self._run_id = run_id
            _HELD.add(self.identity)

    def release(self) -> None:
        """Give the checkpoint up (idempotent); the lock file goes only if it is this run's."""
        with _HELD_GUARD:
            run_id, self._run_id = self._run_id, None
            if run_id is None or self.identity not in _HELD:
                return
            _HELD.discard(self.identity)
            try:
                lock = self.root.read("lock")
            except CorruptCheckpointError:
                return
            if isinstance(lock, dict) and lock.get("runId") == run_id:
                self.root.delete("lock")

    def _set_aside(self, name: str) -> bool:
        """Move a stale file out of the way; False when another process moved it first."""
        aside = f".{name}.stale-{uuid.uuid4().hex}"
        try:
            self.root.fs.mv(self.root.location(name), self.root.location(aside))
        except FileNotFoundError:
            return False
        self.root.delete(aside)
        return True

    def lock_holder(self) -> str | None:
        """Who holds the lock, or ``None`` when it is free or stale."""
        try:
            lock = self.root.read("lock")
        except CorruptCheckpointError:
            return None  # a torn lock cannot belong to a live run: locks are written whole
        if not isinstance(lock, dict):
            return None
        host, pid = lock.get("host"), lock.get("pid")
        if host != socket.gethostname():
            return f"a query on host {host} (pid {pid}, run {lock.get('runId')})"
        if pid == os.getpid():
            return None  # this process holds nothing here (checked against _HELD above)
        if isinstance(pid, int) and _process_alive(pid):
            return f"process {pid} (run {lock.get('runId')}, started {lock.get('startedAt')})"
        return None

    def _in_use(self, holder: str) -> CheckpointInUseError:
        return CheckpointInUseError(
            f"Checkpoint {self.url} is in use by {holder}. Stop that query first, or give "
            "this query another checkpoint location. If no such query runs any more, delete "
            f"{self.url}/lock."
        )

    # -- logs -----------------------------------------------------------------------------
    def batch_ids(self, store: StateStore) -> list[int]:
        """Sorted ids of the entries in the offset or commit log."""
        return sorted(int(name) for name in store.names() if name.isdigit())

    def latest_offsets(self) -> BatchEntry | None:
        """The newest offset-log entry, or ``None`` when no batch was ever planned."""
        ids = self.batch_ids(self.offsets)
        if not ids:
            return None
        if len(ids) > 1 and ids[-2] != ids[-1] - 1:
            raise CorruptCheckpointError(
                f"Checkpoint {self.url} lacks offsets/{ids[-1] - 1} before offsets/{ids[-1]}; "
                "the offset log must be contiguous. Restore the missing file."
            )
        self._purged_below = ids[0]
        return self.read_offsets(ids[-1])

    def read_offsets(self, batch_id: int) -> BatchEntry:
        value = self.offsets.read(str(batch_id))
        where = f"{self.url}/offsets/{batch_id}"
        if value is None:
            raise CorruptCheckpointError(f"Checkpoint file {where} is missing.")
        return BatchEntry.from_json(value, where)

    def is_committed(self, batch_id: int) -> bool:
        value = self.commits.read(str(batch_id))
        if value is not None and not isinstance(value, dict):
            raise CorruptCheckpointError(
                f"Checkpoint file {self.url}/commits/{batch_id} is not a commit entry."
            )
        return value is not None

    def write_offsets(self, entry: BatchEntry) -> None:
        """Log batch ``entry.batch_id`` before it runs; refuses to overwrite an entry."""
        if not self.offsets.create(str(entry.batch_id), entry.to_json()):
            raise CheckpointInUseError(
                f"Checkpoint {self.url} already has offsets/{entry.batch_id}: another query "
                "is writing to this checkpoint at the same time. Stop it, or use another "
                "checkpoint location."
            )
        self._purge(entry.batch_id)

    def write_commit(self, batch_id: int, num_input_rows: int) -> None:
        """Log that batch ``batch_id`` is durably in the sink."""
        self.commits.write(
            str(batch_id),
            {
                "batchId": batch_id,
                "committedAtMs": int(time.time() * 1000),
                "numInputRows": num_input_rows,
            },
        )

    def _purge(self, newest: int) -> None:
        """Delete log entries older than the retained window."""
        keep_from = newest - self.retain  # as Spark: ids below N - minBatchesToRetain go
        while self._purged_below < keep_from:
            name = str(self._purged_below)
            self.offsets.delete(name)
            self.commits.delete(name)
            self._purged_below += 1

    # -- connector state ------------------------------------------------------------------
    def source_state(self, index: int = 0) -> StateStore:
        return self.root.child(f"sources/{index}")

    def sink_state(self) -> StateStore:
        return self.root.child("sink")


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
