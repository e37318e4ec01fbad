"""The ``delta`` source: Delta Lake's streaming source on delta-rs, without a JVM.

A new stream reads the table's snapshot at the version current when the query first starts,
then every later version's new data files, in log order (``startingVersion`` /
``startingTimestamp`` start at a version instead, without the snapshot). Offsets have Delta's
own shape (see :mod:`._offsets`) and live in the query's checkpoint. Each version is learnt from
its log entry (:mod:`._log`); versions that remove data stop the stream with Delta's texts, or
are skipped or read again as ``ignoreDeletes`` / ``ignoreChanges`` / ``skipChangeCommits`` say
(:mod:`._scan`); ``maxFilesPerTrigger`` / ``maxBytesPerTrigger`` bound each batch
(:mod:`._admission`). A batch is one split per data file, read by :mod:`._file_reader`.

``session.read.format("delta")`` reads the latest snapshot, or the one ``versionAsOf`` /
``timestampAsOf`` name. ``readChangeFeed=true`` streams the change data feed instead
(:mod:`._change_feed`). ``deltalake`` is imported when a reader starts, not with this module.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from microbatch import (
    ConfigurationError,
    Offset,
    Options,
    ReadAllAvailable,
    ReadContext,
    ReadLimit,
    Source,
    SourceCapabilities,
    SourceError,
    Split,
    StreamReader,
)

from ._admission import Admission, default_read_limit
from ._offsets import BASE_INDEX, DeltaOffset
from ._source_options import SOURCE_OPTIONS, parse_timestamp_ms, starting_version
from ._table import DeltaTarget, target_from_options

if TYPE_CHECKING:
    from ._file_reader import DeltaFileReader
    from ._scan import Scanner

__all__ = ["DeltaSource", "DeltaStreamReader"]

log = logging.getLogger("microbatch.delta")

_INITIAL_OFFSET = "initialOffset"
"""The state file holding where the stream first started (Spark's ``sources/0/0``)."""
_STREAM_ONLY = (
    "maxFilesPerTrigger",
    "maxBytesPerTrigger",
    "ignoreDeletes",
    "ignoreChanges",
    "skipChangeCommits",
)


class DeltaSource(Source):
    """A Delta table, streamed version by version or read as of a version.

    The schema is the table's (from its log, at ``load()``); a user schema is refused.
    """

    format_name = "delta"
    description = "Delta Lake tables through delta-rs, version by version"
    options = SOURCE_OPTIONS
    capabilities = SourceCapabilities(replayable=True, available_now=True, user_schema="forbidden")

    def __init__(
        self,
        options: Options,
        *,
        user_schema: pa.Schema | None = None,
        session: Any = None,
        streaming: bool = True,
    ) -> None:
        super().__init__(options, user_schema=user_schema, session=session, streaming=streaming)
        self.target: DeltaTarget = target_from_options(options)
        self.change_feed = bool(options.read_change_feed)
        if streaming:
            for name in ("versionAsOf", "timestampAsOf"):
                if options.is_set(name):
                    raise ConfigurationError(
                        f"The Delta source option '{name}' is for batch reads (session.read); "
                        "a stream starts where 'startingVersion' or 'startingTimestamp' say"
                    )
        else:
            for name in _STREAM_ONLY:
                if options.is_set(name):
                    log.warning("%s option ignored in batch queries", name)
            if not self.change_feed:
                for name in ("startingVersion", "startingTimestamp"):
                    if options.is_set(name):
                        log.warning(
                            "%s option ignored in batch queries (it applies to streams and to "
                            "change feed reads); use versionAsOf or timestampAsOf",
                            name,
                        )
        self.table_schema: pa.Schema | None = None
        self.table_id = ""
        self.partition_columns: tuple[str, ...] = ()
        self.loaded_version = -1
        """The table's version when the schema was taken (the one read, for a batch read)."""

    def describe(self) -> str:
        return f"DeltaSource[{self.target.uri}]"

    def schema(self) -> pa.Schema:
        from ._delta_schema import table_arrow_schema
        from ._log import column_mapping_mode, unsupported_reader_features, variant_columns
        from ._verdicts import column_mapping_error, feature_error, not_a_table

        version: int | None = None
        if not self.streaming and not self.change_feed:
            version = self._time_travel_version()
        table = self.target.open(version, error=SourceError)
        if table is None:
            raise ConfigurationError(str(not_a_table(self.target.uri)))
        metadata = table.metadata()
        mode = column_mapping_mode(metadata.configuration)
        if mode != "none":
            raise column_mapping_error(self.target.uri, mode)
        missing = unsupported_reader_features(table.protocol().reader_features)
        if missing:
            raise feature_error(self.target.uri, missing)
        variants = variant_columns(table.schema().to_json())
        if variants:
            raise SourceError(
                f"The Delta table at {self.target.uri} has variant columns ({', '.join(variants)}"
                "), which the Delta source cannot read yet."
            )
        self.table_schema = table_arrow_schema(table)
        self.table_id = str(metadata.id)
        self.partition_columns = tuple(metadata.partition_columns)
        self.loaded_version = int(table.version())
        if self.change_feed:
            from ._change_feed import change_feed_schema, require_change_feed

            require_change_feed(table, self.target.uri)
            return change_feed_schema(self.table_schema)
        return self.table_schema

    def _time_travel_version(self) -> int | None:
        """The version ``versionAsOf`` / ``timestampAsOf`` name (``None``: the latest)."""
        from ._log import commit_time_ms, commit_versions
        from ._time_travel import check_version, version_at_or_before

        opts = self.opts
        if opts.version_as_of is None and opts.timestamp_as_of is None:
            return None
        fs = self.target.filesystem()
        versions = commit_versions(fs)
        if opts.version_as_of is not None:
            check_version(int(opts.version_as_of), versions, self.target.uri)
            return int(opts.version_as_of)
        return version_at_or_before(
            parse_timestamp_ms(opts.timestamp_as_of, "timestampAsOf"),
            versions,
            lambda version: commit_time_ms(fs, version),
            self.target.uri,
        )

    def stream_reader(self, context: ReadContext) -> DeltaStreamReader:
        if self.table_schema is None:
            self.schema()
        return DeltaStreamReader(self, context)


def _policy(opts: Options) -> Any:
    from ._verdicts import Policy

    return Policy(
        ignore_deletes=bool(opts.ignore_deletes),
        ignore_changes=bool(opts.ignore_changes),
        skip_change_commits=bool(opts.skip_change_commits),
        change_feed=bool(opts.read_change_feed),
        fail_on_data_loss=bool(opts.fail_on_data_loss),
    )


class DeltaStreamReader(StreamReader):
    """Offsets, planning and progress of one run of the ``delta`` source."""

    def __init__(self, source: DeltaSource, context: ReadContext) -> None:
        from ._file_reader import DeltaFileReader
        from ._scan import Scanner

        assert source.table_schema is not None
        self.source = source
        self.opts = source.opts
        self.context = context
        self.streaming = context.streaming
        self.target = source.target
        self.change_feed = source.change_feed
        self.read_schema = source.table_schema
        self.scanner: Scanner = Scanner(
            self.target,
            self.read_schema,
            source.partition_columns,
            _policy(self.opts),
            latest_version=source.loaded_version,
        )
        self._split_reader: DeltaFileReader = DeltaFileReader(
            self.target,
            self.read_schema,
            source.partition_columns,
            output_schema=context.schema if self.change_feed else None,
        )
        self._pinned: int | None = None
        if not self.streaming:
            self._pinned = source.loaded_version
        self._latest: int | None = None
        self._planned: DeltaOffset | None = None
        """The end of the last batch planned (what the stream has read once it commits)."""

    def __repr__(self) -> str:
        return f"DeltaStreamReader({self.source.describe()})"

    # -- where the stream starts ----------------------------------------------------------
    def initial_offset(self) -> Offset:
        self.scanner.resumed = False  # asked only of a checkpoint without offsets
        state = self.context.state
        if state is not None:
            kept = state.read(_INITIAL_OFFSET)
            if kept is not None:
                self._offset(kept, "initial offset")  # the table must still be the same one
                return dict(kept)
        offset = self._resolve_start().to_json()
        if state is not None and not state.create(_INITIAL_OFFSET, offset):
            kept = state.read(_INITIAL_OFFSET)  # another instance was first
            if kept is not None:
                return dict(kept)
        return offset

    def _resolve_start(self) -> DeltaOffset:
        from ._log import commit_versions
        from ._time_travel import check_version, version_at_or_after

        table_id = self.source.table_id
        opts = self.opts
        if not self.streaming and not self.change_feed:
            return DeltaOffset(self.source.loaded_version, BASE_INDEX, True, table_id)
        if opts.starting_version is not None:
            wanted = starting_version(opts.starting_version)
            if wanted is None:  # latest: only what is committed after the start
                return DeltaOffset(self.scanner.latest_version() + 1, BASE_INDEX, False, table_id)
            versions = commit_versions(self.scanner.fs)
            check_version(wanted, versions, self.target.uri)
            return DeltaOffset(wanted, BASE_INDEX, False, table_id)
        if opts.starting_timestamp is not None:
            versions = commit_versions(self.scanner.fs)
            version = version_at_or_after(
                parse_timestamp_ms(opts.starting_timestamp, "startingTimestamp"),
                versions,
                self.scanner.commit_timestamp_ms,
                self.target.uri,
            )
            return DeltaOffset(version, BASE_INDEX, False, table_id)
        if not self.streaming:
            raise ConfigurationError(
                "No startingVersion or startingTimestamp provided for CDC read: a batch read "
                "of the Delta change data feed needs one of them"
            )
        latest = self.scanner.latest_version()
        self.scanner.check_versions(self.source.loaded_version + 1, latest)
        return DeltaOffset(latest, BASE_INDEX, True, table_id)

    def _offset(self, offset: Offset, what: str) -> DeltaOffset:
        return DeltaOffset.from_json(offset, self.source.table_id, what)

    # -- how far a batch goes -------------------------------------------------------------
    def default_read_limit(self) -> ReadLimit:
        if not self.streaming:
            return ReadAllAvailable()
        return default_read_limit(self.opts)

    def prepare_available_now(self) -> None:
        self._pinned = self.scanner.latest_version()

    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        from ._scan import Barrier, VersionItem

        begin = self._offset(start, "start offset")
        if not self.streaming:
            limit = ReadAllAvailable()
        admission = Admission.for_limit(limit, self.opts)
        end = begin
        limited = False
        for item in self.scanner.scan(begin, self._pinned):
            if isinstance(item, Barrier):
                if end == begin:
                    raise item.error
                break
            if isinstance(item, VersionItem):
                if not item.sizes:  # nothing to read: pass it (its log entry may be cleaned up)
                    end = begin.after_version(item.version)
                    continue
                if not admission.admit_whole(item.sizes):
                    limited = True
                    break
                end = begin.after_version(item.version)
            else:
                if not admission.admit(item.size):
                    limited = True
                    break
                end = begin.after_file(item.version, item.index, item.is_last)
        if limited and self._pinned is None:
            self._latest = self.scanner.latest_version()
        else:
            self._latest = self._pinned if self._pinned is not None else self.scanner.known_latest
        return start if end == begin else end.to_json()

    def report_latest_offset(self) -> Offset | None:
        if self._latest is None:
            return None
        return DeltaOffset(self._latest + 1, BASE_INDEX, False, self.source.table_id).to_json()

    # -- planning -------------------------------------------------------------------------
    def partitions(self, start: Offset, end: Offset) -> Sequence[Split]:
        from ._file_reader import DeltaFileSplit
        from ._scan import Barrier, VersionItem

        begin = self._offset(start, "start offset")
        stop = self._offset(end, "end offset")
        self._planned = stop
        if stop.key() <= begin.key():
            return []
        bound = stop.version if stop.index >= 0 else stop.version - 1
        files: list[Split] = []
        versions: list[tuple[int, int]] = []
        for item in self.scanner.scan(begin, bound):
            if isinstance(item, Barrier):
                raise item.error
            if isinstance(item, VersionItem):
                if item.sizes:
                    versions.append((item.version, sum(item.sizes)))
                continue
            if (item.version, item.index) > stop.key():
                break
            split = item.split
            if self.change_feed:
                split = DeltaFileSplit(
                    split.path,
                    split.size,
                    split.partition_values,
                    split.version,
                    split.index,
                    change_version=split.version,
                    change_timestamp_ms=self.scanner.commit_timestamp_ms(split.version),
                )
            files.append(split)
        return files + self._change_ranges(versions)

    def _change_ranges(self, versions: list[tuple[int, int]]) -> list[Split]:
        """The change-feed versions of a batch (``(version, change bytes)`` of the versions
        that change data) as ranges of whole consecutive versions."""
        from ._change_feed import change_ranges

        ranges: list[Split] = []
        run: list[tuple[int, int]] = []
        for version, size in versions:
            if run and version != run[-1][0] + 1:
                ranges += change_ranges(self.target, run)
                run = []
            run.append((version, size))
        if run:
            ranges += change_ranges(self.target, run)
        return ranges

    def commit(self, end: Offset) -> None:
        self.scanner.resumed = True
        if not self._offset(end, "end offset").is_starting_version:
            self.scanner.forget_snapshot()

    def split_reader(self) -> DeltaFileReader:
        return self._split_reader

    # -- progress -------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        figures: dict[str, Any] = {
            name: str(count) for name, count in self.scanner.counters.counts.items()
        }
        if self._latest is not None:
            figures["latestVersion"] = str(self._latest)
            if self._planned is not None and not self.change_feed:
                left = self.scanner.outstanding(self._planned, self._latest)
                if left is not None:
                    figures["numFilesOutstanding"] = str(left[0])
                    figures["numBytesOutstanding"] = str(left[1])
        return figures

    def stop(self) -> None:
        self.scanner.close()
