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

The log is a :class:`~microbatch.batch_log.BatchLog`: see there how readers beside the writer
read it, when clean-up deletes what a compact superseded (here :data:`RETENTION_SECONDS` after
it), and which damage raises a :class:`~microbatch.errors.CorruptCheckpointError` naming the
file, for readers and for the sink alike. :meth:`Manifest.verify` also checks the log against
the newest batch of the checkpoint's commit log when the sink starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import fsspec

from microbatch.batch_log import BatchLog
from microbatch.errors import CorruptCheckpointError
from microbatch.state import StateStore

__all__ = ["METADATA_DIR", "RETENTION_SECONDS", "Manifest"]

METADATA_DIR = "_microbatch_metadata"
"""Name of the manifest folder inside a sink's output folder."""

RETENTION_SECONDS = 60.0
"""How long a plain entry stays after the compact that covers it appeared (for readers that
listed the folder before that compact)."""


def files_problem(entry: dict[str, Any]) -> str | None:
    """Why a log entry is malformed (no ``files`` list), for ``BatchLog(validate=...)``."""
    return None if type(entry.get("files")) is list else "it has no list of files"


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
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self.path = f"{self.root.rstrip('/')}/{METADATA_DIR}"
        self._store = StateStore(fs.unstrip_protocol(self.path), fsync=fsync, fs=fs)
        self._log = BatchLog(
            self._store,
            compact_interval=compact_interval,
            retention=retention,
            validate=files_problem,
            label="Manifest",
            advice=(
                f"The manifest {self.path} must record every batch from 0 on, and the files of "
                "a batch whose entry is missing or damaged are hidden from readers: restore the "
                "file from a backup, and never delete or change files of this folder by hand."
            ),
            clock=clock,
        )

    # ------------------------------------------------------------------ queries

    def exists(self) -> bool:
        """True when ``root`` holds a manifest folder (it is a sink's output folder)."""
        return bool(self.fs.isdir(self.path))

    def has_batch(self, batch_id: int) -> bool:
        """True when batch ``batch_id`` is committed (its entry exists, plain or compacted)."""
        return self.entry(batch_id) is not None

    def entry(self, batch_id: int) -> dict[str, Any] | None:
        """The committed entry of batch ``batch_id``, or None when it is not committed."""
        return self._log.get(batch_id)

    def latest_batch_id(self) -> int | None:
        """The highest committed batch id, or None when nothing is committed."""
        return self._log.latest_id()

    def entries(self) -> list[dict[str, Any]]:
        """Every committed batch entry, in batch-id order: one consistent version of the log.

        A gap or an entry that does not match its name raises :class:`CorruptCheckpointError`.
        """
        return self._log.entries()

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
                f"{self._log.where(str(missing))} (batches {missing} to {last}) is "
                "missing, so the files of those batches are hidden from readers. Restore the "
                "manifest folder from a backup. If the output path was changed, go back to the "
                "old one (a query cannot move its output folder) or start a new query with a "
                "new checkpoint."
            )
        if newest > last + 1:
            raise CorruptCheckpointError(
                f"The manifest {self.path} records batch {newest} (file "
                f"{self._log.where(str(newest))}), but the checkpoint's commit log ends "
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
        entry: dict[str, Any] = {
            "version": 1,
            "batchId": batch_id,
            "committedAtMs": int(time.time() * 1000),
            "files": files,
        }
        if query_id is not None:
            entry["queryId"] = query_id
        return self._log.write(batch_id, entry)

    def sweep_temporary(self) -> int:
        """Delete the temporary files (``.<name>.<uuid>.tmp``) of writes killed half-way;
        return how many. Only the folder's writer may call it, before it writes."""
        return self._log.sweep_temporary()
