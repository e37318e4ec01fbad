"""Walking a Delta table's stream of files from an offset, as Delta's own source does.

A stream is the table's snapshot at a version (when the offset says ``isStartingVersion``),
then each later version's data-change ``add`` files in log order. :class:`Scanner` yields, from
an offset on: :class:`FileItem` (one data file, with its split), :class:`VersionItem` (a whole
version, for the change data feed; or a version with nothing to read, which a batch passes
over) and :class:`Barrier` (a version the stream cannot pass: it removes data, changes the
schema, or needs a feature this source lacks). What each version is (data, rearranged only,
deletes, rewrites...) is decided by :mod:`._verdicts`.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa

from microbatch import RetriableError, SourceError

from ._delta_schema import parse_partition_value
from ._file_reader import DeltaFileSplit
from ._log import Commit, LogFile, commit_time_ms, commit_versions, read_commit
from ._offsets import DeltaOffset
from ._table import DeltaTarget, log_entry_name
from ._verdicts import (
    SKIP_KINDS,
    Policy,
    Verdict,
    classify,
    deletion_vector_error,
    log_skip,
    metadata_error,
    not_a_table,
)

if TYPE_CHECKING:
    import pyarrow.fs as pafs
    from deltalake import DeltaTable

__all__ = ["LOST_VERSIONS", "Barrier", "FileItem", "Scanner", "VersionItem", "change_sizes"]

log = logging.getLogger("microbatch.delta")

_CACHE_VERSIONS = 256
_LATEST_REFRESH_SECONDS = 5.0
_OUTSTANDING_VERSIONS = 10_000
LOST_VERSIONS = "numLostVersions"


@dataclass(frozen=True)
class FileItem:
    """File ``index`` of ``version`` (the last of it when ``is_last``), and its split."""

    version: int
    index: int
    is_last: bool
    split: DeltaFileSplit

    @property
    def size(self) -> int:
        return self.split.size


@dataclass(frozen=True)
class VersionItem:
    """A whole version of the change data feed (its file sizes count against the limits), or
    a version with nothing to read (no ``sizes``: skipped, rearranged only, metadata only, an
    empty snapshot), which a batch passes over so the offset does not stay behind it."""

    version: int
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class Barrier:
    """A version the stream cannot read past, and the error that says why."""

    version: int
    error: SourceError


@dataclass
class Counters:
    """Versions the stream skipped or read again, by kind, for the progress metrics."""

    counts: dict[str, int] = field(
        default_factory=lambda: {**dict.fromkeys(SKIP_KINDS.values(), 0), LOST_VERSIONS: 0}
    )
    counted_up_to: int = -1


def _kept_text(kept: list[int]) -> str:
    """Which versions the log keeps, as runs: ``the log now keeps versions 0 to 2 and 4``."""
    if not kept:
        return "the log now keeps no versions"
    runs: list[list[int]] = []
    for version in sorted(kept):
        if runs and version == runs[-1][1] + 1:
            runs[-1][1] = version
        else:
            runs.append([version, version])
    texts = [f"{first} to {last}" if first != last else str(first) for first, last in runs]
    listed = texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]
    word = "version" if len(kept) == 1 else "versions"
    return f"the log now keeps {word} {listed}"


class Scanner:
    """Walks the table's stream from an offset (see the module docstring)."""

    def __init__(
        self,
        target: DeltaTarget,
        read_schema: pa.Schema,
        partition_columns: tuple[str, ...],
        policy: Policy,
        *,
        latest_version: int,
    ) -> None:
        self.target = target
        self.read_schema = read_schema
        self.partition_columns = partition_columns
        self.policy = policy
        self.path = target.uri
        self.known_latest = latest_version
        self.counters = Counters()
        self._fs: pafs.FileSystem | None = None
        self._table: DeltaTable | None = None
        self._commits: OrderedDict[int, Commit] = OrderedDict()
        self._snapshot: tuple[int, list[DeltaFileSplit]] | None = None
        self._sizes: dict[int, tuple[int, ...]] = {}
        self._refreshed = time.monotonic()
        self._types = {f.name: f.type for f in read_schema}
        self.resumed = True
        """False while the query has no committed offsets (a new query): a lost log entry's
        error then does not advise deleting the checkpoint."""

    @property
    def fs(self) -> pafs.FileSystem:
        if self._fs is None:
            self._fs = self.target.filesystem()
        return self._fs

    # -- versions -------------------------------------------------------------------------
    def commit(self, version: int) -> Commit | None:
        """Version ``version``'s commit (cached), ``None`` when it is not there."""
        cached = self._commits.get(version)
        if cached is not None:
            return cached
        commit = read_commit(self.fs, version)
        if commit is not None:
            self._commits[version] = commit
            self.known_latest = max(self.known_latest, version)
            while len(self._commits) > _CACHE_VERSIONS:
                self._commits.popitem(last=False)
        return commit

    def commit_timestamp_ms(self, version: int) -> int:
        """When ``version`` was committed (the commit's time, else its file's)."""
        return commit_time_ms(self.fs, version, self.commit(version))

    def latest_version(self) -> int:
        """The table's latest version, asked of delta-rs: the reader's handle on the table
        brought up to date (``update_incremental``, about a millisecond)."""
        if self._table is None:
            self._table = self.target.open()
            if self._table is None:
                raise not_a_table(self.path)
        else:
            self.target.refresh(self._table)
        latest = int(self._table.version())
        self.known_latest = max(self.known_latest, latest)
        self._refreshed = time.monotonic()
        return latest

    def _missing(self, version: int) -> int | None:
        """``version``'s log entry is not there: ``None`` when it is not committed yet; when
        the table has it (removed by log clean-up), an error, or with ``failOnDataLoss=false``
        the next version the log keeps (the versions between are logged and counted lost)."""
        if (
            version > self.known_latest
            and time.monotonic() - self._refreshed > _LATEST_REFRESH_SECONDS
        ):
            self.latest_version()
        if version > self.known_latest:
            return None
        kept = commit_versions(self.fs)
        later = [v for v in kept if v > version]
        if not self.policy.fail_on_data_loss and later:
            resume = later[0]
            if version > self.counters.counted_up_to:
                self.counters.counted_up_to = resume - 1
                self.counters.counts[LOST_VERSIONS] += resume - version
                log.warning(
                    "Delta source %s: the log entries of versions %d to %d are gone (log "
                    "clean-up); their data is not read (failOnDataLoss=false), the stream goes "
                    "on at version %d",
                    self.path,
                    version,
                    resume - 1,
                    resume,
                )
            return resume
        restart = (
            "If you never deleted it, it's likely your query is lagging behind. Please delete "
            "its checkpoint to restart from scratch. "
            if self.resumed
            else ""
        )
        raise SourceError(
            f"The log entry {log_entry_name(version)} of version {version} of the Delta "
            f"table at {self.path} cannot be found ({_kept_text(kept)}): log entries older "
            "than the table's delta.logRetentionDuration are removed after a checkpoint. "
            f"{restart}To avoid this happening again, you can update your retention policy "
            "of your Delta table. To skip the lost versions instead, set the option "
            "'failOnDataLoss' to 'false'."
        )

    def forget_snapshot(self) -> None:
        """Drop the snapshot's file list (the stream has read past it)."""
        self._snapshot = None

    def close(self) -> None:
        """Release the table handle and what is cached (the scanner may be used again)."""
        self._snapshot = None
        self._table = None
        self._fs = None
        self._commits.clear()
        self._sizes.clear()

    def check_versions(self, first: int, last: int) -> None:
        """Raise when a version in ``first..last`` changes the schema or the features the
        stream reads with (the snapshot a stream starts with may be newer than its schema)."""
        for version in range(first, last + 1):
            commit = self.commit(version)
            if commit is None:
                continue
            error = metadata_error(commit, self.read_schema, self.partition_columns, self.path)
            if error is not None:
                raise error

    # -- the snapshot ---------------------------------------------------------------------
    def snapshot(self, version: int) -> list[DeltaFileSplit]:
        """The files of the table's snapshot at ``version``, in Delta's order (modification
        time, then path), as splits of that version."""
        if self._snapshot is not None and self._snapshot[0] == version:
            return self._snapshot[1]
        try:
            table = self.target.open(version)
        except RetriableError:  # the store away: the batch runs again
            raise
        except Exception as error:  # delta-rs raises several kinds for a version it lacks
            raise SourceError(
                f"The snapshot of version {version} of the Delta table at {self.path} cannot be "
                f"loaded: {error}"
            ) from None
        if table is None:
            raise not_a_table(self.path)
        actions = pa.table(table.get_add_actions(flatten=False))
        rows = sorted(  # by the log's (encoded) path, as Delta sorts
            zip(
                actions.column("modification_time").to_pylist(),
                actions.column("path").to_pylist(),
                actions.column("size_bytes").to_pylist(),
                range(actions.num_rows),
                strict=True,
            )
        )
        partitions = (
            actions.column("partition").to_pylist()
            if "partition" in actions.column_names and self.partition_columns
            else None
        )
        if "deletionVectors" in (table.protocol().reader_features or ()):
            _refuse_deletion_vectors(table, self.path, version)
        splits = []
        for index, (_, raw, size, row) in enumerate(rows):
            path = unquote(raw)
            values = partitions[row] if partitions is not None else {}
            splits.append(
                DeltaFileSplit(
                    path=path,
                    size=int(size),
                    partition_values=tuple(
                        (c, (values or {}).get(c)) for c in self.partition_columns
                    ),
                    version=version,
                    index=index,
                )
            )
        self._snapshot = (version, splits)
        return splits

    def _split(self, file: LogFile, version: int, index: int) -> DeltaFileSplit:
        texts = dict(file.partition_values)
        values: list[tuple[str, Any]] = []
        for column in self.partition_columns:
            try:
                scalar = parse_partition_value(texts.get(column), self._types[column])
            except ValueError as error:
                raise SourceError(
                    f"The data file {file.path} of version {version} of the Delta table at "
                    f"{self.path} has a bad value for partition column '{column}': {error}"
                ) from None
            values.append((column, scalar.as_py()))
        return DeltaFileSplit(file.path, file.size, tuple(values), version, index)

    # -- what is left ---------------------------------------------------------------------
    def outstanding(self, after: DeltaOffset, latest: int) -> tuple[int, int] | None:
        """``(files, bytes)`` the stream has not read after ``after`` up to version
        ``latest`` (Delta's ``numFilesOutstanding`` / ``numBytesOutstanding``); ``None`` when
        that is more than ``_OUTSTANDING_VERSIONS`` versions to look at. Each version's sizes
        are read once and kept while the stream has not passed them."""
        version, index = after.version, after.index
        files = size = 0
        if after.is_starting_version:
            remaining = self.snapshot(version)[index + 1 :]
            files, size = len(remaining), sum(split.size for split in remaining)
            version, index = version + 1, -1
        if latest - version > _OUTSTANDING_VERSIONS:
            return None
        for passed in [v for v in self._sizes if v < version]:
            del self._sizes[passed]
        for current in range(version, latest + 1):
            sizes = self._sizes.get(current)
            if sizes is None:
                commit = self.commit(current)
                if commit is None:
                    break
                verdict = classify(
                    commit, self.policy, self.read_schema, self.partition_columns, self.path
                )
                if verdict.error is not None:
                    break
                sizes = tuple(f.size for f in verdict.files)
                self._sizes[current] = sizes
            left = sizes[index + 1 :] if current == version else sizes
            files += len(left)
            size += sum(left)
        return files, size

    # -- walking --------------------------------------------------------------------------
    def verdict(self, commit: Commit) -> Verdict:
        verdict = classify(commit, self.policy, self.read_schema, self.partition_columns, self.path)
        if commit.version > self.counters.counted_up_to and verdict.error is None:
            self.counters.counted_up_to = commit.version
            name = SKIP_KINDS.get(verdict.kind)
            if name is not None:
                self.counters.counts[name] += 1
                log_skip(self.path, commit, verdict.kind)
        return verdict

    def scan(
        self, start: DeltaOffset, until_version: int | None = None
    ) -> Iterator[FileItem | VersionItem | Barrier]:
        """Everything after ``start``, version by version, up to ``until_version`` (inclusive;
        ``None``: as far as the log goes)."""
        version, after = start.version, start.index
        if start.is_starting_version:
            files = self.snapshot(version)
            if not files:
                yield VersionItem(version, ())
            last = len(files) - 1
            for index in range(after + 1, len(files)):
                yield FileItem(version, index, index == last, files[index])
            version, after = version + 1, -1
        while until_version is None or version <= until_version:
            commit = self.commit(version)
            if commit is None:
                resume = self._missing(version)
                if resume is None:
                    return
                version, after = resume, -1
                continue
            verdict = self.verdict(commit)
            if verdict.error is not None:
                yield Barrier(version, verdict.error)
                return
            if self.policy.change_feed:
                yield VersionItem(version, change_sizes(commit))
            elif not verdict.files:
                yield VersionItem(version, ())  # nothing to read: the stream may pass it
            else:
                last = len(verdict.files) - 1
                for index in range(after + 1, len(verdict.files)):
                    file = verdict.files[index]
                    yield FileItem(version, index, index == last, self._split(file, version, index))
            version, after = version + 1, -1


def change_sizes(commit: Commit) -> tuple[int, ...]:
    """The sizes of the files one version's changes are read from (Delta's rule): its ``cdc``
    files when it has any (their total shared out evenly: the log entry is summed, not kept per
    file), else the files it adds and removes with ``dataChange``. A version that changes no
    data (optimize, table properties) has none."""
    if commit.cdc_files:
        share, rest = divmod(commit.cdc_bytes, commit.cdc_files)
        return (share + 1,) * rest + (share,) * (commit.cdc_files - rest)
    return tuple(f.size for f in commit.adds) + tuple(f.size for f in commit.removes)


def _refuse_deletion_vectors(table: DeltaTable, path: str, version: int) -> None:
    """Raise when a file of ``table``'s snapshot has a deletion vector (the add actions delta-rs
    lists do not say; its ``deletion_vectors()`` lists the files that have one)."""
    try:
        for batch in pa.RecordBatchReader.from_stream(table.deletion_vectors()):
            if batch.num_rows:
                first = str(batch.column(0)[0])
                break
        else:
            return
    except Exception as error:  # a vector delta-rs cannot read is refused all the same
        raise SourceError(
            f"The snapshot of version {version} of the Delta table at {path} has deletion "
            f"vectors that cannot be read ({error}); the Delta source cannot apply them (rows "
            "they mark deleted would be read)."
        ) from None
    raise deletion_vector_error(path, first, version)
