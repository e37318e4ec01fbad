"""The two halves of a file sink's run (see :mod:`.sinks`): :class:`FilePartWriter` and
:class:`FileStreamWriter`.

``FilePartWriter`` returns the files of a part in a :class:`FileCommitMessage`. It pickles (it
holds the filesystem, the folder, the format and the limits) and opens its own files, so a
part may be written in another process.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import fsspec
import pyarrow as pa

import microbatch as mb
from microbatch.errors import MicrobatchError, SinkError

from ._retriable import transient_as_retriable
from ._writer_files import OutputFolder, WriterLimits
from ._writer_files import PartWriter as _FilesOfPart
from ._writer_formats import FileFormat
from .manifest import Manifest
from .sink_partitions import PartitionValueTooLongError

__all__ = ["FileCommitMessage", "FilePartWriter", "FileStreamWriter"]

log = logging.getLogger("microbatch_file.sink")


@dataclass(frozen=True)
class FileCommitMessage(mb.CommitMessage):
    """What one ``write`` returns: the files it wrote (``path`` relative to the output folder,
    ``size`` in bytes, ``rows``, rendered ``partition`` values). ``skipped`` when the batch was
    already committed and nothing was written."""

    batch_id: int
    part: int
    files: tuple[dict[str, Any], ...] = ()
    skipped: bool = False


def check_owner(owner_label: str, batch_id: int, entry: dict[str, Any], mine: str) -> None:
    """Refuse a batch of the folder that another query committed."""
    owner = entry.get("queryId")
    if owner and mine and owner != mine:
        raise SinkError(
            f"{owner_label}: batch {batch_id} in this folder was written by another "
            f"query (id {owner}), not by this one (id {mine}). Two queries (or a query whose "
            "checkpoint was replaced) cannot share an output folder: write to a new folder, "
            "or delete this one to start over."
        )


@dataclass(kw_only=True, eq=False, repr=False)
class _Output:
    """What both halves of a run know: the output folder ``root`` on ``fs``, the format and
    limits of its files, the partition columns, whether files are flushed to the disk
    (``fsync``), and ``owner``, naming the sink in errors and logs."""

    fs: fsspec.AbstractFileSystem
    root: str
    file_format: FileFormat
    limits: WriterLimits
    partition_by: tuple[str, ...]
    fsync: bool
    owner: str


@dataclass
class FilePartWriter(_Output, mb.PartWriter):
    """Writes the parts of a batch into the output folder.

    A replayed batch that the manifest already holds writes nothing (and reads nothing). The
    answer is kept per batch id for the parts this object writes; a pickled copy asks again.
    """

    _committed: dict[int, bool] = field(default_factory=dict, init=False, repr=False, compare=False)

    _folder: OutputFolder | None = field(default=None, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_committed"], state["_folder"] = {}, None  # a copy looks again for itself
        return state

    def _output(self) -> OutputFolder:
        """The output folder (kept, so that its subfolders are made once per batch)."""
        if self._folder is None:
            self._folder = OutputFolder(self.fs, self.root, fsync=self.fsync)
        return self._folder

    def write(self, data: pa.RecordBatchReader, part: mb.PartContext) -> FileCommitMessage:
        batch_id, index = part.batch_id, part.part_index
        try:
            what = f"{self.owner}: writing part {index} of batch {batch_id}"
            with transient_as_retriable(what, keep=(MicrobatchError,)):
                if self._is_committed(batch_id, part.query_id):
                    return FileCommitMessage(batch_id, index, skipped=True)
                files = _FilesOfPart(
                    folder=self._output(),
                    file_format=self.file_format,
                    limits=self.limits,
                    batch_id=batch_id,
                    part=index,
                    partition_by=self.partition_by,
                ).write_all(data)
        except PartitionValueTooLongError as error:
            raise SinkError(f"{self.owner}: batch {batch_id} cannot be written: {error}") from None
        except MicrobatchError:
            raise
        except OSError as error:
            raise SinkError(
                f"{self.owner} failed to write part {index} of batch {batch_id}: {error}"
            ) from error
        return FileCommitMessage(batch_id, index, tuple(files))

    def _is_committed(self, batch_id: int, query_id: str) -> bool:
        known = self._committed.get(batch_id)
        if known is None:
            entry = Manifest(self.fs, self.root).entry(batch_id)
            if entry is not None:
                check_owner(self.owner, batch_id, entry, query_id)
            known = self._committed[batch_id] = entry is not None
        return known


def _written(messages: Sequence[mb.CommitMessage | None]) -> list[dict[str, Any]]:
    return [f for m in messages if isinstance(m, FileCommitMessage) for f in m.files]


@dataclass(eq=False, kw_only=True, repr=False)
class FileStreamWriter(_Output, mb.StreamWriter):
    """Commits the batches of one run into the manifest of the output folder.

    Opening it deletes temporary files of manifest writes a crash cut short, and checks that
    the manifest is whole and agrees with the checkpoint's commit log.
    """

    context: mb.WriteContext
    manifest: Manifest = field(init=False)
    folder: OutputFolder = field(init=False)
    _swept: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.manifest = Manifest(self.fs, self.root, fsync=self.fsync)
        swept = self.manifest.sweep_temporary()
        if swept:
            log.info(
                "%s: deleted %d temporary file(s) of manifest writes interrupted by a crash",
                self.owner,
                swept,
            )
        # the log must be whole and agree with the checkpoint's commit log (None: new query)
        self.manifest.verify(self.context.last_committed_batch_id)
        self.folder = OutputFolder(self.fs, self.root, fsync=self.fsync)

    def part_writer(self) -> FilePartWriter:
        return FilePartWriter(**{f.name: getattr(self, f.name) for f in fields(_Output)})

    def commit(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        written = _written(messages)
        what = f"{self.owner}: committing batch {batch_id}"
        with transient_as_retriable(what, keep=(MicrobatchError,)):
            self._commit(batch_id, written)

    def _commit(self, batch_id: int, written: list[dict[str, Any]]) -> None:
        entry = self.manifest.entry(batch_id)
        if entry is not None:
            check_owner(self.owner, batch_id, entry, self.context.query_id)
            log.info("%s: batch %d is already committed; skipping it", self.owner, batch_id)
            listed = {f["path"] for f in entry["files"]}
            self._delete([f["path"] for f in written if f["path"] not in listed])
            self._sweep(batch_id, listed)
            return
        self._sweep(batch_id, {f["path"] for f in written})
        if not self.manifest.commit(batch_id, written, query_id=self.context.query_id or None):
            self._delete([f["path"] for f in written])
            raise SinkError(
                f"{self.owner}: batch {batch_id} was committed by another writer while this "
                "query wrote it; only one query may write to an output folder"
            )

    def abort(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        if self.manifest.has_batch(batch_id):
            return
        self._delete([f["path"] for f in _written(messages)])

    def stop(self) -> None:
        """Nothing to release: every file is closed by the ``write`` that opened it."""

    # -- internals ------------------------------------------------------------------------
    def _sweep(self, batch_id: int, keep: set[str]) -> None:
        """Once per run, on its first commit: delete files of ``batch_id`` that a crashed
        attempt left behind (they are not in ``keep``)."""
        if self._swept:
            return
        self._swept = True
        leftovers = [p for p in self.folder.data_files(batch_id) if p not in keep]
        if leftovers:
            log.info(
                "%s: deleting %d file(s) left by an earlier attempt of batch %d",
                self.owner,
                len(leftovers),
                batch_id,
            )
            self._delete(leftovers)

    def _delete(self, paths: list[str]) -> None:
        for relative in paths:
            try:
                self.folder.delete(relative)
            except OSError:
                log.warning("%s: could not delete %s", self.owner, relative, exc_info=True)
