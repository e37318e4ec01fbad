"""The checkpoint: a folder of plain JSON files that makes a query restartable.

Layout::

    <checkpoint>/metadata        {"id": <query id>, "version": 1, "source": ..., "sink": ...,
                                  "identity": {"source": {...}, "sink": {...}}}
    <checkpoint>/lock            {"runId", "pid", "host", "startedAt"} while a run holds it
                                 (taken over through ``.lock.takeover-*`` markers when stale)
    <checkpoint>/offsets/<N>     written BEFORE batch N has any side effect (the write-ahead log)
    <checkpoint>/commits/<N>     written AFTER the sink committed batch N
    <checkpoint>/sources/0/      the source's own state
    <checkpoint>/sink/           the sink's own state

Every file is written atomically through fsspec (see :class:`~microbatch.state.StateStore`),
so a checkpoint may live on any filesystem fsspec reaches, ``memory://`` included.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import posixpath
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from ._checkpoint_lock import acquire_lock, parse_lock, young_lock_temporary
from ._checkpoint_lock import lock_holder as holder_of
from ._identity import describe_changes
from .errors import (
    CheckpointError,
    CheckpointInUseError,
    CheckpointMismatchError,
    CorruptCheckpointError,
)
from .progress import iso_timestamp
from .state import StateStore

__all__ = ["FORMAT_VERSION", "BatchEntry", "Checkpoint"]

log = logging.getLogger("microbatch.checkpoint")

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
                batch_id=log_id(value["batchId"]),
                start=value["start"],
                end=value["end"],
                timestamp_ms=int(value["batchTimestampMs"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptCheckpointError(
                f"Checkpoint file {where} is not a valid offset log entry (missing or bad "
                f"field {error}). Restore it, or delete it and later entries to re-plan them."
            ) from None


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from the metadata file."""
    return json.loads(json.dumps(value, default=str))


def _recorded_identity(metadata: dict[str, Any]) -> dict[str, Any]:
    """A copy of the identities recorded in ``metadata``, by side (empty when none are)."""
    recorded = metadata.get("identity")
    return dict(recorded) if isinstance(recorded, dict) else {}


def log_id(value: Any) -> int:
    """A batch id read from a log entry: a non-negative int (``True`` is not one)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"'batchId' must be a non-negative integer, got {value!r}")
    return value


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
        self._metadata_update: dict[str, Any] | None = None
        self._logs_checked = False
        self._left_overs_purged = False

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

    def open(
        self, *, source: str, sink: str, identity: dict[str, dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Return the checkpoint's metadata, creating it for a new query.

        Refuses a checkpoint written by a query with a different source, a newer format
        version, or one whose logs exist without metadata. ``identity`` holds what the query
        reads and writes (``{"source": {...}, "sink": {...}}``, see ``Source.identity``): it is
        recorded the first time (also in a checkpoint made before identities were recorded)
        and a :class:`CheckpointMismatchError` raised when it differs from the recorded one.
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
            if identity is not None:
                created["identity"] = _jsonable(identity)
            if self.root.create("metadata", created):
                return created
            existing = self.metadata()
            assert existing is not None
        version = existing.get("version", FORMAT_VERSION)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise CorruptCheckpointError(
                f"Checkpoint file {self.url}/metadata has format version {version!r}, which is "
                "not a positive integer: the file is damaged. Restore it from a backup, or start "
                "the query with a new checkpoint location."
            )
        if version > FORMAT_VERSION:
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
        if identity is not None:
            existing = self._check_identity(existing, sink, _jsonable(identity))
        return existing

    def _check_identity(
        self, existing: dict[str, Any], sink: str, identity: dict[str, Any]
    ) -> dict[str, Any]:
        """Compare each side's recorded identity with ``identity``; record missing sides."""
        recorded = _recorded_identity(existing)
        missing = False
        # Before any batch was planned nothing was read or written: a start that failed
        # (a wrong path, say) may be corrected freely, and the new identity is recorded.
        planned = bool(self.offsets.names() or self.commits.names())
        for side in ("source", "sink"):
            before, now = recorded.get(side), identity.get(side)
            if now is None:
                continue
            if not planned and before != now:
                recorded[side] = now
                missing = True
                continue
            if isinstance(before, dict):
                changes = describe_changes(before, now)
            else:  # not recorded yet: only the format name of older metadata can be compared
                legacy = existing.get(side)
                changes = (
                    []
                    if legacy in (None, now.get("format"))
                    else [f"format was {legacy!r}, is now {now.get('format')!r}"]
                )
                if not changes:
                    recorded[side] = now
                    missing = True
                    continue
            if changes:
                effect = (
                    "its offsets belong to the old input: the new one would be read again from "
                    "the start"
                    if side == "source"
                    else "its commit log describes the old output"
                )
                raise CheckpointMismatchError(
                    f"Checkpoint {self.url} belongs to a query with another {side}: "
                    f"{'; '.join(changes)}. Going on would be wrong, since {effect}. To move "
                    f"the query to the new {side} on purpose, stop it and run `microbatch "
                    f"checkpoint forget-identity {self.url} --{side}` (the next start records "
                    "the new one); otherwise start it with a new checkpoint location."
                )
        if not missing:
            return existing
        updated = {**existing, "identity": recorded}
        if "sink" in identity:
            updated["sink"] = sink
        self._metadata_update = updated
        return updated

    def record_metadata(self) -> None:
        """Write the identity that :meth:`open` found missing; call once the query started.

        Deferred so that a start refused later (by the sink, say) records nothing.
        """
        update, self._metadata_update = self._metadata_update, None
        if update is not None:
            self.root.write("metadata", update)

    def forget_identity(self, sides: tuple[str, ...] = ("source", "sink")) -> list[str]:
        """Remove the recorded identity of ``sides``, so that the next start records the
        query's current source or sink instead of refusing it (moving a query on purpose).
        Returns the sides that had one. Refused while a live process holds the checkpoint."""
        existing = self.metadata()
        if existing is None:
            raise CheckpointError(f"No checkpoint at {self.url}: it has no metadata file.")
        holder = self.lock_holder()
        if holder is not None:
            raise self._in_use(holder)
        recorded = _recorded_identity(existing)
        forgotten = [side for side in sides if recorded.pop(side, None) is not None]
        updated = {**existing, "identity": recorded}
        if "sink" in sides and updated.pop("sink", None) is not None and "sink" not in forgotten:
            forgotten.append("sink")  # older metadata: only the sink's format name was recorded
        if forgotten:
            self.root.write("metadata", updated)
        return forgotten

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

        A lock left by a process that no longer runs on this host is taken over; when several
        processes race for the same stale lock, exactly one wins and the others are refused
        (see :mod:`microbatch._checkpoint_lock`). Call :meth:`sweep_temporary` once it is held.
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
            holder = acquire_lock(self.root, record)
            if holder is not None:
                raise self._in_use(holder)
            self._run_id = run_id
            _HELD.add(self.identity)

    def release(self) -> None:
        """Give the checkpoint up (idempotent); the lock file goes only if it is this run's."""
        with _HELD_GUARD:
            run_id, self._run_id = self._run_id, None
            if run_id is None or self.identity not in _HELD:
                return
            _HELD.discard(self.identity)
            lock = parse_lock(self.root.read_bytes("lock"))
            if lock is not None and lock.get("runId") == run_id:
                self.root.delete("lock")

    def lock_holder(self) -> str | None:
        """Who holds the lock, or ``None`` when it is free or stale."""
        return holder_of(parse_lock(self.root.read_bytes("lock")))

    def _in_use(self, holder: str) -> CheckpointInUseError:
        return CheckpointInUseError(
            f"Checkpoint {self.url} is in use by {holder}. Stop that query first, or give "
            "this query another checkpoint location. If no such query runs any more, delete "
            f"{self.url}/lock."
        )

    # -- logs -----------------------------------------------------------------------------
    def batch_ids(self, store: StateStore) -> list[int]:
        """Sorted ids of the entries in the offset or commit log."""
        return sorted(int(name) for name in store.names() if name.isascii() and name.isdigit())

    def last_committed_batch_id(self) -> int | None:
        """The newest batch id in the commit log, or ``None`` when nothing was committed."""
        ids = self.batch_ids(self.commits)
        return ids[-1] if ids else None

    def check_logs(self) -> None:
        """Check that the offset and commit logs agree; :class:`CorruptCheckpointError` naming
        the first file that does not.

        Every entry must hold the batch id of its file name; the offset log must be contiguous;
        every commit entry needs its offset entry (none may be ahead of the offset log); and
        only the newest offset entry may lack a commit entry (the batch that was running when
        the query last stopped). Commit entries older than the oldest offset entry are left
        overs of retention clean-up and are accepted.
        """
        offset_ids = self._checked_ids(self.offsets, "offsets")
        commit_ids = self._checked_ids(self.commits, "commits")
        for before, after in itertools.pairwise(offset_ids):
            if after != before + 1:
                raise CorruptCheckpointError(
                    f"Checkpoint {self.url} lacks offsets/{after - 1} before offsets/{after}; "
                    "the offset log must be contiguous. Restore the missing file."
                )
        for batch_id in offset_ids:
            self.read_offsets(batch_id)
        for batch_id in commit_ids:
            self._read_commit(batch_id)
        newest = offset_ids[-1] if offset_ids else None
        if commit_ids and (newest is None or commit_ids[-1] > newest):
            missing = commit_ids[-1]
            raise CorruptCheckpointError(
                f"Checkpoint file {self.url}/commits/{missing} records a batch that has no "
                f"offset entry (offsets/{missing} is missing"
                + (f"; the newest is offsets/{newest})" if newest is not None else ")")
                + ". Restore the offset log from a backup; without it the batch's source range "
                "is unknown."
            )
        committed = set(commit_ids)
        for batch_id in offset_ids[:-1]:
            if batch_id not in committed:
                raise CorruptCheckpointError(
                    f"Checkpoint {self.url} has offsets/{batch_id} and later entries but no "
                    f"commits/{batch_id}: only the newest batch can be uncommitted. Restore "
                    f"{self.url}/commits/{batch_id} from a backup."
                )
        self._logs_checked = True

    def _checked_ids(self, store: StateStore, log_name: str) -> list[int]:
        """:meth:`batch_ids` of ``store``, refusing a file named by another spelling of its id
        (``002``)."""
        ids = []
        for name in store.names():
            if name.isascii() and name.isdigit():
                if name != str(int(name)):
                    raise CorruptCheckpointError(
                        f"Checkpoint file {self.url}/{log_name}/{name} is not named by its batch "
                        f"id ({int(name)}): rename it or remove it."
                    )
                ids.append(int(name))
        return sorted(ids)

    def latest_offsets(self) -> BatchEntry | None:
        """The newest offset-log entry, or ``None`` when no batch was ever planned.

        Checks the logs first (see :meth:`check_logs`), unless that was done already.
        """
        if not self._logs_checked:
            self.check_logs()
        ids = self.batch_ids(self.offsets)
        if not ids:
            return None
        self._purged_below = ids[0]
        return self.read_offsets(ids[-1])

    def read_offsets(self, batch_id: int) -> BatchEntry:
        """The offset entry of batch ``batch_id``, checked to hold that batch id."""
        value = self.offsets.read(str(batch_id))
        where = f"{self.url}/offsets/{batch_id}"
        if value is None:
            raise CorruptCheckpointError(f"Checkpoint file {where} is missing.")
        entry = BatchEntry.from_json(value, where)
        if entry.batch_id != batch_id:
            raise CorruptCheckpointError(
                f"Checkpoint file {where} holds batchId {entry.batch_id}, not {batch_id}: the "
                "entry was renamed or damaged, and applying it would run its range again. "
                "Restore the file from a backup."
            )
        return entry

    def is_committed(self, batch_id: int) -> bool:
        return self._read_commit(batch_id) is not None

    def _read_commit(self, batch_id: int) -> dict[str, Any] | None:
        value = self.commits.read(str(batch_id))
        where = f"{self.url}/commits/{batch_id}"
        if value is None:
            return None
        if not isinstance(value, dict):
            raise CorruptCheckpointError(f"Checkpoint file {where} is not a commit entry.")
        if "batchId" in value:
            try:
                recorded = log_id(value["batchId"])
            except ValueError as error:
                raise CorruptCheckpointError(
                    f"Checkpoint file {where} is not a valid commit entry ({error}). Restore it "
                    "from a backup."
                ) from None
            if recorded != batch_id:
                raise CorruptCheckpointError(
                    f"Checkpoint file {where} holds batchId {recorded}, not {batch_id}: the entry "
                    "was renamed or damaged. Restore the file from a backup."
                )
        return value

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
        if not self._left_overs_purged:
            # A process killed between the two deletes below left commits/<k> without
            # offsets/<k>: below the oldest offset entry, so the loop would never reach it.
            self._left_overs_purged = True
            for batch_id in self.batch_ids(self.commits):
                if batch_id >= min(self._purged_below, keep_from):
                    break
                self.commits.delete(str(batch_id))
        while self._purged_below < keep_from:
            name = str(self._purged_below)
            self.offsets.delete(name)
            self.commits.delete(name)
            self._purged_below += 1

    def sweep_temporary(self) -> int:
        """Remove the temporary files that killed writes left in every folder of the
        checkpoint; call it only while holding the lock. Returns how many were removed."""
        removed = 0
        for relative, names in sorted(self._files_by_folder().items()):
            folder = self.root.child(relative) if relative else self.root
            # Another process that tries to take the lock meanwhile writes ``.lock.*.tmp``
            # files in the root (the lock, a takeover marker): removing one would fail its
            # start with a bare FileNotFoundError instead of "in use". Those of killed
            # processes are removed once they are surely abandoned.
            keep = None if relative else young_lock_temporary(folder)
            removed += folder.sweep_temporary(keep=keep, names=names)
        if removed:
            log.info("removed %d temporary file(s) of interrupted writes in %s", removed, self.url)
        return removed

    def _files_by_folder(self) -> dict[str, list[str]]:
        """The names of the files in the checkpoint folder and in each folder below it, keyed
        by the folder's path relative to the checkpoint (``""`` for the checkpoint folder),
        from one listing of the whole tree."""
        try:
            found = self.root.fs.find(self.root.path)
        except FileNotFoundError:
            return {}
        base = self.root.path.rstrip("/")
        files: dict[str, list[str]] = {}
        for path in found:
            folder, _, name = str(path).rstrip("/").rpartition("/")
            files.setdefault(folder[len(base) :].lstrip("/"), []).append(name)
        return files

    # -- connector state ------------------------------------------------------------------
    def source_state(self, index: int = 0) -> StateStore:
        return self.root.child(f"sources/{index}")

    def sink_state(self) -> StateStore:
        return self.root.child("sink")
