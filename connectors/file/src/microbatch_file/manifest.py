"""The file sink's manifest log: which files each committed batch added to an output folder.

Layout under ``<root>/_microbatch_metadata/``::

    0, 1, ...      one JSON entry per committed batch:
                   {"version": 1, "batchId": 3, "committedAtMs": ...,
                    "files": [{"path": "k=v/part-00003-00000-<uuid>.c000.snappy.parquet",
                               "size": 1234, "rows": 10, "partition": {"k": "v"}}]}
    9.compact      every ``compact_interval`` batches: all entries up to batch 9 in one file
                   ({"version": 1, "batchId": 9, "entries": [entry, ...]})

An entry is written atomically and create-exclusively: its appearance is the commit of the
batch. Batch ids are contiguous from 0, so version ``N`` of the log is entries ``0..N``. Paths
inside entries are relative to the root, with ``/`` separators.

**Readers** take the newest compact plus the plain entries after it (as Spark's
``CompactibleFileStreamLog`` does). **Clean-up** never removes a file a reader may still need:
a plain entry is deleted only once the compact covering it has existed for ``retention``
seconds (:data:`RETENTION_SECONDS`, measured on the writer's clock at its compactions), and of
the superseded compacts only the newest one is kept, until the next compaction. A reader that
lists the folder and reads what it listed within that time always finds it; one that is slower
(or that lost the race against two compactions) lists again and retries after a pause.

**Consistency.** Every entry's ``batchId`` must match its file name, a compact must hold
exactly the entries ``0..N``, and the plain entries after it must follow without a gap. Anything
else is a :class:`~microbatch.errors.CorruptCheckpointError` naming the file that is missing or
wrong, for readers and for the sink alike; :meth:`Manifest.verify` also checks the log against
the newest batch of the checkpoint's commit log when the sink starts.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import fsspec

from microbatch.errors import CorruptCheckpointError
from microbatch.state import StateStore

__all__ = ["METADATA_DIR", "RETENTION_SECONDS", "Manifest"]

log = logging.getLogger("microbatch_file.manifest")

METADATA_DIR = "_microbatch_metadata"
"""Name of the manifest folder inside a sink's output folder."""

RETENTION_SECONDS = 60.0
"""How long a plain entry stays after the compact that covers it appeared (for readers that
listed the folder before that compact)."""

_COMPACT = ".compact"
_READ_PAUSES = (0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
"""Pause before each attempt to read a consistent version (seconds)."""

T = TypeVar("T")


class _Gap(Exception):
    """Batch ``batch_id`` has no entry although a later one exists (maybe only in a listing
    that raced with the writer: checked once more before it counts as corruption)."""

    def __init__(self, batch_id: int) -> None:
        super().__init__(batch_id)
        self.batch_id = batch_id


class Manifest:
    """The manifest log of the output folder ``root`` on ``fs``.

    ``root`` is a path in ``fs`` (as returned by ``fsspec.core.url_to_fs``). Paths returned by
    :meth:`files` are paths in the same ``fs``. One writer per folder; any number of readers,
    in any process. With ``fsync`` (local disks only) entries survive a power loss, not only a
    killed process. ``retention`` and ``clock`` (monotonic seconds) only matter to the writer.
    """

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        root: str,
        *,
        compact_interval: int = 10,
        fsync: bool = False,
        retention: float = RETENTION_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if compact_interval < 1:
            raise ValueError("compact_interval must be at least 1")
        if retention < 0:
            raise ValueError("retention cannot be negative")
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self.path = f"{self.root.rstrip('/')}/{METADATA_DIR}"
        self.compact_interval = compact_interval
        self.retention = retention
        self._clock = clock
        self._store = StateStore(fs.unstrip_protocol(self.path), fsync=fsync, fs=fs)
        self._compacts: dict[int, list[dict[str, Any]]] = {}
        self._known_since: dict[int, float] = {}
        """Writer only: compact id -> when this process first knew it existed."""

    # ------------------------------------------------------------------ queries

    def exists(self) -> bool:
        """True when ``root`` holds a manifest folder (it is a sink's output folder)."""
        return bool(self.fs.isdir(self.path))

    def has_batch(self, batch_id: int) -> bool:
        """True when batch ``batch_id`` is committed (its entry exists, plain or compacted)."""
        return self.entry(batch_id) is not None

    def entry(self, batch_id: int) -> dict[str, Any] | None:
        """The committed entry of batch ``batch_id``, or None when it is not committed."""
        plain = self._read_plain(batch_id)
        if plain is not None:
            return plain

        def lookup() -> dict[str, Any] | None:
            names, compacts = self._list()
            if batch_id in names:  # written since the first look
                value = self._read_plain(batch_id)
                if value is None:
                    raise FileNotFoundError(self._store.location(str(batch_id)))
                return value
            covering = [c for c in compacts if c >= batch_id]
            return self._compact(covering[-1])[batch_id] if covering else None

        return self._consistent(lookup)

    def latest_batch_id(self) -> int | None:
        """The highest committed batch id, or None when nothing is committed."""
        plain, compacts = self._list()
        ids = plain + compacts
        return max(ids) if ids else None

    def entries(self) -> list[dict[str, Any]]:
        """Every committed batch entry, in batch-id order: one consistent version of the log.

        A gap or an entry that does not match its name raises :class:`CorruptCheckpointError`.
        """
        return self._consistent(self._entries)

    def files(self) -> list[str]:
        """Full paths (in ``fs``) of every committed file, in commit order."""
        return [self.full_path(f["path"]) for entry in self.entries() for f in entry["files"]]

    def full_path(self, relative: str) -> str:
        """The path in ``fs`` of a path relative to the root."""
        return f"{self.root.rstrip('/')}/{relative}"

    def verify(self, last_committed_batch_id: int | None) -> int | None:
        """Check that the log is whole and agrees with the checkpoint's commit log, whose
        newest batch is ``last_committed_batch_id`` (None: nothing committed, or unknown);
        return the newest batch id of the log.

        The sink records a batch before the checkpoint commits it, so the log ends at that
        batch or the one after it. Ending earlier means entries were lost (their files would
        be hidden from readers); ending later means the checkpoint is older than the folder
        (its next batches would be skipped as already written). Both raise
        :class:`CorruptCheckpointError`.
        """
        entries = self.entries()
        newest: int | None = entries[-1]["batchId"] if entries else None
        last = last_committed_batch_id
        if last is None:
            return newest
        if newest is None or newest < last:
            missing = 0 if newest is None else newest + 1
            ends = "holds no batch" if newest is None else f"ends at batch {newest}"
            raise CorruptCheckpointError(
                f"The checkpoint's commit log records batch {last} as committed, but the "
                f"manifest {self.path} {ends}: the manifest file "
                f"{self._store.location(str(missing))} (batches {missing} to {last}) is "
                "missing, so the files of those batches are hidden from readers. Restore the "
                "manifest folder from a backup. If the output path was changed, go back to the "
                "old one (a query cannot move its output folder) or start a new query with a "
                "new checkpoint."
            )
        if newest > last + 1:
            raise CorruptCheckpointError(
                f"The manifest {self.path} records batch {newest} (file "
                f"{self._store.location(str(newest))}), but the checkpoint's commit log ends "
                f"at batch {last}: the checkpoint is older than the output folder (restored "
                "from a backup?), and the batches it would run next are already in the folder "
                "and would be skipped. Restore the checkpoint that belongs to this folder, or "
                "write to a new folder with a new checkpoint."
            )
        return newest

    # ------------------------------------------------------------------ writes

    def commit(
        self, batch_id: int, files: list[dict[str, Any]], *, query_id: str | None = None
    ) -> bool:
        """Record ``files`` as the output of batch ``batch_id``, atomically.

        Returns False (and writes nothing) when the batch is already committed; raises
        :class:`CorruptCheckpointError` when the log ends before ``batch_id - 1`` (the entry
        would leave a gap). Every ``compact_interval`` batches the log is compacted
        afterwards. ``query_id`` is stored in the entry (``"queryId"``) so that a writer can
        recognise its own batches.
        """
        plain, compacts = self._list()
        if batch_id in plain:
            self._read_plain(batch_id)  # a corrupt entry raises
            return False
        if any(c >= batch_id for c in compacts):
            return False
        latest = max(plain + compacts, default=None)
        if latest is not None and batch_id > latest + 1:
            raise self._missing(
                latest + 1, f"the log ends at batch {latest}, so batch {batch_id} cannot follow"
            )
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
        """Write ``<batch_id>.compact`` holding every entry up to ``batch_id``, then delete
        what it supersedes once no reader can need it any more (see the module docstring)."""
        entries = [e for e in self.entries() if e["batchId"] <= batch_id]
        if len(entries) != batch_id + 1:
            raise self._missing(len(entries), f"batch {batch_id} is not committed yet")
        self._store.write(
            f"{batch_id}{_COMPACT}", {"version": 1, "batchId": batch_id, "entries": entries}
        )
        self._remember(batch_id, entries)
        self._known_since.setdefault(batch_id, self._clock())
        self._clean_up(batch_id)

    def sweep_temporary(self) -> int:
        """Delete the temporary files (``.<name>.<uuid>.tmp``) of writes killed half-way;
        return how many. Only the folder's writer may call it, before it writes."""
        return self._store.sweep_temporary()

    # ------------------------------------------------------------------ internals

    def _clean_up(self, newest: int) -> None:
        """Delete the compacts older than the one before ``newest``, and the plain entries
        whose first covering compact has been known for ``retention`` seconds."""
        plain, compacts = self._list()
        now = self._clock()
        for compact in compacts:
            self._known_since.setdefault(compact, now)
        older = [c for c in compacts if c < newest]
        for compact in older[:-1]:
            self._store.delete(f"{compact}{_COMPACT}")
            self._compacts.pop(compact, None)
        known = sorted(c for c in self._known_since if c <= newest)
        kept: list[int] = []
        for batch_id in plain:
            if batch_id > newest:
                continue
            first = known[bisect.bisect_left(known, batch_id)]
            if now - self._known_since[first] >= self.retention:
                self._store.delete(str(batch_id))
            else:
                kept.append(batch_id)
        floor = min(kept) if kept else newest
        for compact in [c for c in self._known_since if c < floor]:
            del self._known_since[compact]

    def _consistent(self, read: Callable[[], T]) -> T:
        """``read()``, again after a pause while files it listed vanish under it; a gap that
        is still there on a second look is corruption."""
        gap: int | None = None
        for pause in _READ_PAUSES:
            if pause:
                time.sleep(pause)
            try:
                return read()
            except FileNotFoundError:
                gap = None
            except _Gap as found:
                if gap == found.batch_id:
                    raise self._missing(found.batch_id, "later batches are recorded") from None
                gap = found.batch_id
        raise self._unstable()

    def _list(self) -> tuple[list[int], list[int]]:
        plain: list[int] = []
        compacts: list[int] = []
        for name in self._store.names():
            if name.endswith(_COMPACT) and name[: -len(_COMPACT)].isdigit():
                compacts.append(int(name[: -len(_COMPACT)]))
            elif name.isdigit():
                plain.append(int(name))
        return sorted(plain), sorted(compacts)

    def _entries(self) -> list[dict[str, Any]]:
        plain, compacts = self._list()
        base = compacts[-1] if compacts else -1
        entries = list(self._compact(base)) if compacts else []
        listed = {b for b in plain if b > base}
        for batch_id in range(base + 1, max(listed, default=base) + 1):
            entry = self._read_plain(batch_id)
            if entry is None:
                if batch_id in listed:  # compacted and cleaned up since the listing
                    raise FileNotFoundError(self._store.location(str(batch_id)))
                raise _Gap(batch_id)
            entries.append(entry)
        return entries

    def _compact(self, batch_id: int) -> list[dict[str, Any]]:
        cached = self._compacts.get(batch_id)
        if cached is not None:
            return cached
        name = f"{batch_id}{_COMPACT}"
        value = self._read(name)
        if value is None:
            raise FileNotFoundError(self._store.location(name))
        if (
            not isinstance(value, dict)
            or not isinstance(value.get("entries"), list)
            or value.get("batchId", batch_id) != batch_id
        ):
            raise self._corrupt(name)
        entries: list[dict[str, Any]] = value["entries"]
        for index, entry in enumerate(entries):  # one cheap pass: compacts can be long
            if (
                type(entry) is not dict
                or type(found := entry.get("batchId")) is not int
                or found != index
                or type(entry.get("files")) is not list
            ):
                self._checked(entry, name)
                raise self._corrupt(name, f"it has no entry for batch {index}")
        if len(entries) != batch_id + 1:
            raise self._corrupt(name, f"it has no entry for batch {len(entries)}")
        self._remember(batch_id, entries)
        return entries

    def _remember(self, batch_id: int, entries: list[dict[str, Any]]) -> None:
        """Cache a compact's entries; only the two newest are kept (they hold the whole log)."""
        self._compacts[batch_id] = entries
        for old in sorted(self._compacts)[:-2]:
            del self._compacts[old]

    def _read_plain(self, batch_id: int) -> dict[str, Any] | None:
        name = str(batch_id)
        value = self._read(name)
        if value is None:
            return None
        entry = self._checked(value, name)
        if entry["batchId"] != batch_id:
            raise self._corrupt(name, f"it holds batch {entry['batchId']}")
        return entry

    def _read(self, name: str) -> Any | None:
        try:
            return self._store.read(name)
        except CorruptCheckpointError:
            raise self._corrupt(name) from None

    def _checked(self, entry: Any, name: str) -> dict[str, Any]:
        if (
            not isinstance(entry, dict)
            or type(entry.get("batchId")) is not int
            or not isinstance(entry.get("files"), list)
        ):
            raise self._corrupt(name)
        return entry

    def _corrupt(self, name: str, why: str = "") -> CorruptCheckpointError:
        reason = f" ({why})" if why else ""
        return CorruptCheckpointError(
            f"Manifest file {self._store.location(name)} is not a valid manifest entry"
            f"{reason}. Restore it from a backup; the folder {self.path} must hold only files "
            "written by the file sink (deleting the entry hides the files of its batch from "
            "readers)."
        )

    def _missing(self, batch_id: int, why: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(
            f"Manifest file {self._store.location(str(batch_id))} is missing ({why}): the "
            f"manifest {self.path} must record every batch from 0 on, and without this entry "
            "the files of the batch are hidden from readers. Restore the file from a backup; "
            "never delete files of this folder by hand."
        )

    def _unstable(self) -> RuntimeError:
        return RuntimeError(
            f"Could not read a consistent version of the manifest {self.path}: its files kept "
            f"disappearing over {len(_READ_PAUSES)} attempts. Either this reader takes longer "
            f"than the writer's retention ({self.retention:g} s) to read the log, or more than "
            "one query writes to this folder."
        )
