"""A log of JSON entries keyed by batch id, in one :class:`~microbatch.state.StateStore` folder.

The checkpoint's offset and commit logs, the file source's log of taken files and the file
sink's manifest are all one :class:`BatchLog`.

Layout (Spark's ``CompactibleFileStreamLog``)::

    0, 1, ...     one JSON object per batch, named by its batch id (``002`` is refused)
    9.compact     with ``compact_interval=10``: every entry from batch 0 up to 9, written
                  after batch 9 ({"version": 1, "batchId": 9, "entries": [entry0, ...]});
                  later batches are plain files again until ``19.compact``

Other names in the folder (``cleanup``, ``.keep``, temporary files) are not the log's and are
left alone.

API:

- ``BatchLog(store, compact_interval=None, growing=False, retention=0.0, id_field="batchId",
  validate=None, label=..., advice=..., clock=time.monotonic)``
- ``write(batch_id, entry, overwrite=False) -> bool``: store one entry atomically (a reader
  sees all of it or nothing, also after the writer is killed); by default create-exclusive,
  False when the batch has an entry already. A batch after a gap is refused. Compacts after
  every ``compact_interval``-th batch (``growing``: after more, the longer the log is).
- ``get(batch_id)``: one entry or ``None``, read through compaction.
- ``entries()``: every entry, oldest first: one consistent version of the log, also while
  another process writes and compacts it.
- ``ids()`` / ``latest_id()``: the batch ids held, from one folder listing.
- ``purge(before)``: delete the entries of batches below ``before`` (for logs without
  compaction, which keep their newest entries only: Spark's ``minBatchesToRetain``).
- ``compact(batch_id, entries=None)`` and ``sweep_temporary()`` for writers.
- ``where(name)``, ``corrupt(name, why)``, ``missing(batch_id, why)``: a file's URL and the
  errors naming it, for callers that check more than the log does.

Every entry is a JSON object holding its own batch id in ``id_field`` (``None``: not checked);
``validate`` may add checks of its own. A file that is not valid JSON, an entry that names
another batch, a compact that lacks a batch, or a gap before a later entry raises
:class:`~microbatch.errors.CorruptCheckpointError` naming the file and what is wrong.

**Readers beside a writer.** A compact makes older files superfluous, but they are deleted
only when no reader can need them any more: a plain entry once the compact covering it has
been known to the writer for ``retention`` seconds, and of the superseded compacts only the
newest stays until the next compaction. A reader that listed the folder just before a
compaction therefore finds what it listed; one that was slower lists again and retries after
a pause, and a gap seen on two looks is corruption. One writer per folder.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import CorruptCheckpointError
from .state import StateStore

__all__ = ["BatchLog"]

COMPACT_SUFFIX = ".compact"
COMPACT_VERSION = 1
_READ_PAUSES = (0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
"""Pause before each attempt to read a consistent version (seconds)."""

T = TypeVar("T")


class _Gap(Exception):
    """Batch ``batch_id`` has no entry although a later one exists (maybe only in a listing
    that raced with the writer: checked once more before it counts as corruption)."""

    def __init__(self, batch_id: int) -> None:
        super().__init__(batch_id)
        self.batch_id = batch_id


class BatchLog:
    """A log of JSON objects keyed by batch id in ``store`` (see the module docstring).

    ``compact_interval`` (None: never) compacts after every batch ``N`` with
    ``(N + 1) % compact_interval == 0``; with ``growing`` the interval grows with the log
    instead, to the square root of its length (a compaction rewrites every entry, so a long log
    is rewritten less often, and holds at most that many plain files). A compacting log holds
    every batch from 0, a log without compaction starts at its oldest entry (older ones
    purged). ``retention`` (seconds
    of ``clock``, monotonic) is how long superseded plain entries outlive the compact covering
    them. ``label`` starts error messages (``"Manifest"`` gives "Manifest file <url> ...") and
    ``advice`` ends those about a damaged or missing file. ``validate(entry)`` returns what is
    wrong with an entry (or None); it runs on every entry read. The entries of the newest
    compacts are kept in memory, for readers that read the log again and again and for the
    writer's next compaction.
    """

    def __init__(
        self,
        store: StateStore,
        *,
        compact_interval: int | None = None,
        growing: bool = False,
        retention: float = 0.0,
        id_field: str | None = "batchId",
        validate: Callable[[dict[str, Any]], str | None] | None = None,
        label: str = "Checkpoint",
        advice: str = "Restore it from a backup.",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if compact_interval is not None and compact_interval < 1:
            raise ValueError("compact_interval must be at least 1")
        if retention < 0:
            raise ValueError("retention cannot be negative")
        self.store = store
        self.compact_interval = compact_interval
        self.growing = growing
        self.retention = retention
        self.id_field = id_field
        self.validate = validate
        self.label = label
        self.advice = advice
        self._clock = clock
        self._compacts: dict[int, list[dict[str, Any]]] = {}
        """Entries of the newest compacts read (the two newest are kept)."""
        self._known_since: dict[int, float] = {}
        """Writer only: compact id -> when this process first knew it existed."""
        self._latest: int | None = None
        """Writer only: the newest batch id, once a write has looked it up."""
        self._compacted = 0
        """Writer only: how many batches the newest compact holds, once looked up."""
        self._written: dict[int, dict[str, Any]] = {}
        """Writer only: the entries it wrote since the newest compact (for the next one)."""
        self._looked_up = False
        self._floor: int | None = None
        """Writer only: no plain entry below this id exists (kept by :meth:`purge`)."""

    # ------------------------------------------------------------------ naming

    def where(self, name: str) -> str:
        """The URL of the log's file ``name`` (as error messages name it)."""
        return f"{self.store.url.rstrip('/')}/{name}"

    def _list(self) -> tuple[list[int], list[int]]:
        """Sorted ids of the plain entries and of the compacts, from one listing."""
        plain: list[int] = []
        compacts: list[int] = []
        for name in self.store.names():
            compact = name.endswith(COMPACT_SUFFIX)
            stem = name[: -len(COMPACT_SUFFIX)] if compact else name
            if not (stem.isascii() and stem.isdigit()):
                continue
            if stem != str(int(stem)):
                raise CorruptCheckpointError(
                    f"{self.label} file {self.where(name)} is not named by its batch id "
                    f"({int(stem)}): rename it or remove it."
                )
            (compacts if compact else plain).append(int(stem))
        return sorted(plain), sorted(compacts)

    # ------------------------------------------------------------------ reads

    def ids(self) -> list[int]:
        """Sorted ids of the batches the log holds (those of the newest compact included),
        from one listing and without reading any entry."""
        plain, compacts = self._list()
        base = compacts[-1] if compacts else -1
        return list(range(base + 1)) + [b for b in plain if b > base]

    def latest_id(self) -> int | None:
        """The newest batch id in the log, or None when it is empty."""
        plain, compacts = self._list()
        return max(plain + compacts, default=None)

    def get(self, batch_id: int) -> dict[str, Any] | None:
        """The entry of batch ``batch_id``, or None when the log has none."""
        plain = self._read_plain(batch_id)
        if plain is not None or self.compact_interval is None:
            return plain

        def lookup() -> dict[str, Any] | None:
            names, compacts = self._list()
            if batch_id in names:  # written since the first look
                value = self._read_plain(batch_id)
                if value is None:
                    raise FileNotFoundError(self.where(str(batch_id)))
                return value
            covering = [c for c in compacts if c >= batch_id]
            return self._read_compact(covering[-1])[batch_id] if covering else None

        return self._consistent(lookup)

    def entries(self) -> list[dict[str, Any]]:
        """Every entry, oldest first: one consistent version of the log. A gap raises
        :class:`CorruptCheckpointError` naming the missing file."""
        return self._consistent(self._entries)

    def _entries(self) -> list[dict[str, Any]]:
        plain, compacts = self._list()
        if compacts:
            base = compacts[-1]
            entries = list(self._read_compact(base))
        else:
            base = -1 if self.compact_interval is not None or not plain else plain[0] - 1
            entries = []
        listed = {b for b in plain if b > base}
        for batch_id in range(base + 1, max(listed, default=base) + 1):
            entry = self._read_plain(batch_id)
            if entry is None:
                if batch_id in listed:  # compacted and cleaned up since the listing
                    raise FileNotFoundError(self.where(str(batch_id)))
                raise _Gap(batch_id)
            entries.append(entry)
        return entries

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
                    raise self.missing(found.batch_id, "later batches are recorded") from None
                gap = found.batch_id
        raise RuntimeError(
            f"Could not read a consistent version of the log {self.store.url}: its files kept "
            f"disappearing over {len(_READ_PAUSES)} attempts. Either this reader takes longer "
            f"than the writer's retention ({self.retention:g} s) to read the log, or more than "
            "one process writes to it."
        )

    def _read(self, name: str) -> Any | None:
        try:
            return self.store.read(name)
        except CorruptCheckpointError:
            raise self.corrupt(name, "it is not valid JSON") from None

    def _read_plain(self, batch_id: int) -> dict[str, Any] | None:
        name = str(batch_id)
        value = self._read(name)
        if value is None:
            return None
        problem = self._problem(value, batch_id)
        if problem is not None:
            raise self.corrupt(name, problem)
        return value

    def _problem(self, entry: Any, batch_id: int) -> str | None:
        """What is wrong with ``entry`` as the entry of batch ``batch_id`` (None: nothing)."""
        if type(entry) is not dict:
            return "it is not a JSON object"
        if self.id_field is not None:
            found = entry.get(self.id_field)
            if type(found) is not int:
                return f"its {self.id_field!r} is not a batch id"
            if found != batch_id:
                return f"it holds batch {found}"
        return None if self.validate is None else self.validate(entry)

    def _read_compact(self, batch_id: int) -> list[dict[str, Any]]:
        cached = self._compacts.get(batch_id)
        if cached is not None:
            return cached
        name = f"{batch_id}{COMPACT_SUFFIX}"
        value = self._read(name)
        if value is None:
            raise FileNotFoundError(self.where(name))
        if type(value) is not dict or type(value.get("entries")) is not list:
            raise self.corrupt(name, "it is not a compact file")
        if value.get("batchId", batch_id) != batch_id:
            raise self.corrupt(name, f"it holds batches up to {value.get('batchId')!r}")
        entries: list[dict[str, Any]] = value["entries"]
        for index, entry in enumerate(entries):  # one cheap pass: compacts can be long
            problem = self._problem(entry, index)
            if problem is not None:
                raise self.corrupt(name, f"it has no entry for batch {index}: {problem}")
        if len(entries) != batch_id + 1:
            raise self.corrupt(name, f"it has no entry for batch {len(entries)}")
        self._remember(batch_id, entries)
        return entries

    def _remember(self, batch_id: int, entries: list[dict[str, Any]]) -> None:
        """Cache a compact's entries; only the two newest are kept (they hold the whole log)."""
        self._compacts[batch_id] = entries
        for old in sorted(self._compacts)[:-2]:
            del self._compacts[old]

    # ------------------------------------------------------------------ errors

    def corrupt(self, name: str, why: str) -> CorruptCheckpointError:
        """The error for the log's file ``name`` that exists but is wrong."""
        return CorruptCheckpointError(
            f"{self.label} file {self.where(name)} is not a valid entry ({why}). {self.advice}"
        )

    def missing(self, batch_id: int, why: str) -> CorruptCheckpointError:
        """The error for the missing entry of batch ``batch_id``."""
        return CorruptCheckpointError(
            f"{self.label} file {self.where(str(batch_id))} is missing ({why}). {self.advice}"
        )

    # ------------------------------------------------------------------ writes

    def write(self, batch_id: int, entry: dict[str, Any], *, overwrite: bool = False) -> bool:
        """Store ``entry`` as the entry of batch ``batch_id``, atomically.

        Create-exclusive unless ``overwrite``: returns False (writing nothing) when the batch
        has an entry already, plain or compacted (a damaged one raises). Raises
        :class:`CorruptCheckpointError` when the log ends before ``batch_id - 1`` (the entry
        would leave a gap); the first entry of an empty log may have any id. Compacts afterwards
        when ``batch_id`` completes an interval.
        """
        if self.id_field is not None and entry.get(self.id_field) != batch_id:
            raise ValueError(f"the entry of batch {batch_id} must hold it in {self.id_field!r}")
        if not self._looked_up:
            plain, compacts = self._list()
            self._latest = max(plain + compacts, default=None)
            self._compacted = compacts[-1] + 1 if compacts else 0
            if self._floor is None:  # spares :meth:`purge` a listing
                self._floor = plain[0] if plain else batch_id
            self._looked_up = True
        latest = self._latest
        exists = latest is not None and batch_id <= latest and not overwrite
        if exists and self.get(batch_id) is not None:
            return False
        if latest is not None and batch_id > latest + 1:
            raise self.missing(
                latest + 1, f"the log ends at batch {latest}, so batch {batch_id} cannot follow"
            )
        if overwrite:
            self.store.write(str(batch_id), entry)
        elif not self.store.create(str(batch_id), entry):
            return False
        self._latest = batch_id if latest is None else max(latest, batch_id)
        if self.compact_interval is not None:
            self._written[batch_id] = entry
        if self._due(batch_id):
            self.compact(batch_id)
        return True

    def _due(self, batch_id: int) -> bool:
        """Whether the log is compacted after batch ``batch_id``."""
        interval = self.compact_interval
        if interval is None:
            return False
        if not self.growing:
            return (batch_id + 1) % interval == 0
        return batch_id + 1 - self._compacted >= max(interval, math.isqrt(batch_id + 1))

    def compact(self, batch_id: int, entries: list[dict[str, Any]] | None = None) -> None:
        """Write ``<batch_id>.compact`` holding every entry from batch 0 up to ``batch_id``
        (``entries``, or those of the log), then delete what it supersedes once no reader can
        need it any more (see the module docstring)."""
        if entries is not None:
            for index, entry in enumerate(entries):
                if self._problem(entry, index) is not None:
                    raise ValueError(f"entry {index} of a compact is not that of batch {index}")
        else:  # a compacting log starts at batch 0
            entries = self._known_entries(batch_id) or self.entries()[: batch_id + 1]
        if len(entries) != batch_id + 1:
            raise self.missing(len(entries), f"batch {batch_id} is not in the log yet")
        self.store.write(
            f"{batch_id}{COMPACT_SUFFIX}",
            {"version": COMPACT_VERSION, "batchId": batch_id, "entries": entries},
        )
        self._remember(batch_id, entries)
        self._known_since.setdefault(batch_id, self._clock())
        self._compacted = max(self._compacted, batch_id + 1)
        self._written = {b: e for b, e in self._written.items() if b > batch_id}
        self._clean_up(batch_id)

    def _known_entries(self, batch_id: int) -> list[dict[str, Any]] | None:
        """The entries up to ``batch_id`` from memory (the newest compact and what this writer
        wrote since), or None when they are not all there."""
        base = self._compacted - 1
        known = self._compacts.get(base, []) if base >= 0 else []
        if len(known) != base + 1:
            return None
        written = [self._written.get(b) for b in range(base + 1, batch_id + 1)]
        if any(entry is None for entry in written):
            return None
        return [*known, *(entry for entry in written if entry is not None)]

    def _clean_up(self, newest: int) -> None:
        """Delete the compacts older than the one before ``newest``, and the plain entries
        whose first covering compact has been known for ``retention`` seconds."""
        plain, compacts = self._list()
        now = self._clock()
        for compact in compacts:
            self._known_since.setdefault(compact, now)
        older = [c for c in compacts if c < newest]
        for compact in older[:-1]:
            self.store.delete(f"{compact}{COMPACT_SUFFIX}")
            self._compacts.pop(compact, None)
        known = sorted(c for c in self._known_since if c <= newest)
        kept: list[int] = []
        for batch_id in plain:
            if batch_id > newest:
                continue
            first = known[bisect.bisect_left(known, batch_id)]
            if now - self._known_since[first] >= self.retention:
                self.store.delete(str(batch_id))
            else:
                kept.append(batch_id)
        floor = min(kept) if kept else newest
        for compact in [c for c in self._known_since if c < floor]:
            del self._known_since[compact]

    def purge(self, before: int) -> None:
        """Delete the plain entries of every batch below ``before``. The folder is listed on
        the first call only; later calls delete from where the previous one stopped."""
        if self._floor is None:
            plain, _ = self._list()
            self._floor = plain[0] if plain else before
        while self._floor < before:
            self.store.delete(str(self._floor))
            self._floor += 1

    def sweep_temporary(self) -> int:
        """Delete the temporary files of writes killed half-way; return how many. Only the
        log's writer may call it, before it writes."""
        return self.store.sweep_temporary()
