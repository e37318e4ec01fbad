"""The checkpoint: a folder of plain JSON files that makes a query restartable.

Layout (format 2)::

    <checkpoint>/metadata        {"id": <query id>, "version": 2, "source": ..., "sink": ...,
                                  "identity": {"source": {...}, "sink": {...}}}
    <checkpoint>/lock            {"runId", "pid", "host", "startedAt"} while a run holds it
                                 (taken over through ``.lock.takeover-*`` markers when stale)
    <checkpoint>/offsets/<N>     written BEFORE batch N has any side effect (the write-ahead
                                 log): a range per source, the watermark, the fixed settings
                                 (see :mod:`microbatch._batch_entry`)
    <checkpoint>/commits/<N>     written AFTER the sink committed batch N
    <checkpoint>/sources/<i>/    the own state of source i (plan order)
    <checkpoint>/sink/           the sink's own state
    <checkpoint>/state/<op>/     the state of stateful operator op (plan order), a folder per
                                 partition below it

**Formats.** ``version`` in the metadata is the checkpoint's format, and every offset entry
says its own (format 1, written by microbatch 0.1, has one source range and nothing else). A
format-1 checkpoint is upgraded in place when a query starts on it: one atomic rewrite of the
metadata (``"version": 2, "upgradedFrom": 1``) before the first format-2 entry is written.
The older entries stay as they are and are read as format 1, so a process killed at any
moment leaves a checkpoint that is either still format 1 or already format 2, and restarts
either way. A newer format than this code reads is refused with an error naming the file.

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
from collections.abc import Mapping
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from ._batch_entry import (
    FORMAT_VERSION,
    READABLE_VERSIONS,
    BatchEntry,
    SourceRange,
    check_format_version,
    log_id,
)
from ._checkpoint_lock import acquire_lock, parse_lock, young_lock_temporary
from ._checkpoint_lock import lock_holder as holder_of
from ._fixed_conf import resolve
from ._identity import describe_changes
from .batch_log import BatchLog
from .errors import (
    CheckpointError,
    CheckpointInUseError,
    CheckpointMismatchError,
    CorruptCheckpointError,
)
from .progress import iso_timestamp
from .state import StateStore

__all__ = ["FORMAT_VERSION", "READABLE_VERSIONS", "BatchEntry", "Checkpoint", "SourceRange"]

log = logging.getLogger("microbatch.checkpoint")

# Checkpoints held by running queries of this process. A lock file naming this process is
# stale exactly when its checkpoint is not in this set.
_HELD: set[tuple[str, str]] = set()
_HELD_GUARD = threading.Lock()


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from the metadata file."""
    return json.loads(json.dumps(value, default=str))


def _upgraded(metadata: dict[str, Any], version: int) -> dict[str, Any]:
    """``metadata`` of a format-``version`` checkpoint as the upgrade rewrites it."""
    return {
        **metadata,
        "version": FORMAT_VERSION,
        "upgradedFrom": version,
        "upgradedAt": iso_timestamp(time.time()),
    }


def _recorded_identity(metadata: dict[str, Any]) -> dict[str, Any]:
    """A copy of the identities recorded in ``metadata``, by side (empty when none are)."""
    recorded = metadata.get("identity")
    return dict(recorded) if isinstance(recorded, dict) else {}


class Checkpoint:
    """Reads and writes one query's checkpoint folder.

    ``retain`` is how many recent batches keep their offset and commit entries
    (Spark's ``minBatchesToRetain``). ``session_conf`` holds the session's values of the
    settings fixed per checkpoint (``RuntimeConf.fixed_per_checkpoint()``), see
    :attr:`fixed_conf`; without it, a new checkpoint takes their defaults and an existing one
    its recorded values, with nothing logged (as ``microbatch checkpoint inspect`` reads it).
    """

    def __init__(
        self,
        url: str,
        *,
        retain: int = 100,
        fsync: bool = False,
        session_conf: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = url.rstrip("/") or url
        self.retain = retain
        self.root = StateStore(self.url, fsync=fsync)
        self.offsets = self.root.child("offsets")
        self.commits = self.root.child("commits")
        self._offset_log = BatchLog(
            self.offsets,
            id_field=None,  # checked below, with what a wrong batch id would do
            advice="Restore it from a backup, or delete it and every later entry to re-run "
            "those batches from the source.",
        )
        self._commit_log = BatchLog(self.commits, id_field=None)
        self._session_conf = dict(session_conf) if session_conf is not None else None
        self._run_id: str | None = None
        self._metadata_update: dict[str, Any] | None = None
        self._format: int | None = None
        """The format the metadata file says, once read (``FORMAT_VERSION`` once upgraded)."""
        self._fixed: dict[str, Any] | None = None
        self._logs_checked = False

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

        Refuses a checkpoint written by a query with a different source, one of a format this
        code does not read (see :data:`READABLE_VERSIONS`), or one whose logs exist without
        metadata. A checkpoint of an older format is returned as it will be once upgraded; the
        upgrade itself is written by :meth:`record_metadata`. ``identity`` holds what the query
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
                self._format = FORMAT_VERSION
                return created
            existing = self.metadata()
            assert existing is not None
        version = self._format_of(existing)
        if existing.get("source") not in (None, source):
            raise CheckpointMismatchError(
                f"Checkpoint {self.url} belongs to a query reading from '{existing['source']}', "
                f"not '{source}'. Changing a query's source is not supported: use a new "
                "checkpoint location for the new query."
            )
        if identity is not None:
            existing = self._check_identity(existing, sink, _jsonable(identity))
        if version < FORMAT_VERSION:
            existing = self._metadata_update = _upgraded(existing, version)
        return existing

    def format_version(self) -> int | None:
        """The checkpoint's format as its metadata says (``None``: no metadata file), checked
        to be one this code reads (see :func:`~microbatch._batch_entry.check_format_version`).
        A format-1 checkpoint says 1 until a query started on it (:meth:`record_metadata`)."""
        metadata = self.metadata()
        return None if metadata is None else self._format_of(metadata)

    def _format_of(self, metadata: dict[str, Any]) -> int:
        version = check_format_version(metadata.get("version", 1), f"{self.url}/metadata")
        self._format = version
        return version

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
        """Write the identity that :meth:`open` found missing, and upgrade a checkpoint of an
        older format (see the module docstring); call once the query started.

        Deferred so that a start refused later (by the sink, say) records nothing and leaves
        a format-1 checkpoint readable by the code that wrote it.
        """
        update, self._metadata_update = self._metadata_update, None
        if update is None:
            return
        self.root.write("metadata", update)  # one atomic write: the whole upgrade
        if self._format is not None and self._format < FORMAT_VERSION:
            ids = self.batch_ids(self.offsets)
            log.info(
                "upgraded checkpoint %s from format %d to format %d; %s",
                self.url,
                self._format,
                FORMAT_VERSION,
                f"its offset entries {ids[0]}..{ids[-1]} stay in format {self._format} and "
                "new ones are written in the new format"
                if ids
                else "it had no offset entry yet",
            )
        self._format = FORMAT_VERSION

    def _ensure_current_format(self) -> None:
        """Make the metadata say the current format before the first entry in it is written:
        a checkpoint whose metadata was not looked at yet (no :meth:`open`) is upgraded here."""
        if self._format == FORMAT_VERSION:
            return
        version = self.format_version() if self._format is None else self._format
        if version is None:  # no metadata file: nothing to upgrade
            return
        pending = self._metadata_update
        if version < FORMAT_VERSION and (pending or {}).get("version") != FORMAT_VERSION:
            current = pending or self.metadata()
            assert current is not None
            self._metadata_update = _upgraded(current, version)
        self.record_metadata()

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
        """Sorted ids of the entries in the offset or commit log (or of the numbered files or
        folders of another folder of the checkpoint)."""
        if store is self.offsets:
            return self._offset_log.ids()
        if store is self.commits:
            return self._commit_log.ids()
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
        offset_ids = self._offset_log.ids()  # a file named by another spelling (002) fails
        commit_ids = self._commit_log.ids()
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

    def latest_offsets(self, *, sources: int | None = None) -> BatchEntry | None:
        """The newest offset-log entry, or ``None`` when no batch was ever planned.

        Checks the logs first (see :meth:`check_logs`), unless that was done already, and
        resolves :attr:`fixed_conf` (logging a session value that differs from the recorded
        one). ``sources``, when given, is how many sources the query reads: an entry with
        ranges of another number of sources raises :class:`CheckpointMismatchError`.
        """
        if not self._logs_checked:
            self.check_logs()
        ids = self.batch_ids(self.offsets)
        latest = self.read_offsets(ids[-1]) if ids else None
        if self._fixed is None:
            self._fixed = self._resolve_fixed_conf(latest)
        if latest is None:
            return None
        if sources is not None and len(latest.sources) != sources:
            raise CheckpointMismatchError(
                f"Checkpoint file {self.url}/offsets/{latest.batch_id} holds the offsets of "
                f"{len(latest.sources)} sources, but the query reads {sources}. Changing the "
                "number of a query's sources is not supported: use a new checkpoint location."
            )
        return latest

    @property
    def fixed_conf(self) -> dict[str, Any]:
        """The settings fixed for this checkpoint's lifetime
        (:data:`~microbatch._session.FIXED_PER_CHECKPOINT`), as new offset entries record them
        and as the query must run with them: the values the newest entry recorded (for a key
        it lacks, format 1 entries included, the value such a checkpoint behaves as), or the
        session's for a checkpoint with no entry yet. Resolved once, by
        :meth:`latest_offsets` or on first use."""
        if self._fixed is None:
            ids = self.batch_ids(self.offsets)
            self._fixed = self._resolve_fixed_conf(self.read_offsets(ids[-1]) if ids else None)
        return dict(self._fixed)

    def _resolve_fixed_conf(self, latest: BatchEntry | None) -> dict[str, Any]:
        session = self._session_conf or {}  # none given: nothing to compare with
        if latest is None:
            return resolve(None, "", session)
        return resolve(latest.conf, f"{self.url}/offsets/{latest.batch_id}", session)

    def read_offsets(self, batch_id: int) -> BatchEntry:
        """The offset entry of batch ``batch_id``, checked to hold that batch id."""
        value = self._offset_log.get(batch_id)
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
        value = self._commit_log.get(batch_id)
        where = f"{self.url}/commits/{batch_id}"
        if value is None:
            return None
        if "batchId" in value:  # the log checked that the entry is a JSON object
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
        """Log batch ``entry.batch_id`` before it runs, in the current format (a checkpoint of
        an older format is upgraded first); refuses to overwrite an entry."""
        self._ensure_current_format()
        if not self._offset_log.write(entry.batch_id, entry.to_json()):
            raise CheckpointInUseError(
                f"Checkpoint {self.url} already has offsets/{entry.batch_id}: another query "
                "is writing to this checkpoint at the same time. Stop it, or use another "
                "checkpoint location."
            )
        self._purge(entry.batch_id)

    def write_commit(self, batch_id: int, num_input_rows: int) -> None:
        """Log that batch ``batch_id`` is durably in the sink."""
        self._commit_log.write(
            batch_id,
            {
                "batchId": batch_id,
                "committedAtMs": int(time.time() * 1000),
                "numInputRows": num_input_rows,
            },
            overwrite=True,
        )

    def _purge(self, newest: int) -> None:
        """Delete log entries older than the retained window."""
        keep_from = newest - self.retain  # as Spark: ids below N - minBatchesToRetain go
        if keep_from > 0:
            # offsets first: a process killed in between leaves commit entries older than the
            # oldest offset entry, which the next purge removes (see check_logs)
            self._offset_log.purge(keep_from)
            self._commit_log.purge(keep_from)

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

    def operator_state(self, operator_id: int) -> StateStore:
        """The state folder of stateful operator ``operator_id`` (``state/<operator_id>/``,
        operators numbered in plan order as Spark does). An operator keeps one subfolder per
        partition in it (``.child(str(partition))``), as Spark's ``state/<op>/<partition>``."""
        if isinstance(operator_id, bool) or not isinstance(operator_id, int) or operator_id < 0:
            raise ValueError(f"an operator id is a non-negative integer, not {operator_id!r}")
        return self.root.child(f"state/{operator_id}")

    def operator_ids(self) -> list[int]:
        """Sorted ids of the operators that have a state folder."""
        return self.batch_ids(self.root.child("state"))
