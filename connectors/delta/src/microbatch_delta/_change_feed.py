"""The change data feed of a Delta table as record batches (``readChangeFeed=true``).

Every change row carries the table's columns and three more, as Delta's own reader gives them:
``_change_type`` (``insert``, ``delete``, ``update_preimage``, ``update_postimage``),
``_commit_version`` (the version that made the change) and ``_commit_timestamp`` (that
version's commit time).

The source plans :class:`ChangeRange` splits of whole versions and reads each with
:func:`read_changes`; the rows of a range come in version order. The initial snapshot of a
stream started without a starting version goes through :func:`as_inserts`.

delta-rs (``DeltaTable.load_cdf``) reads the change files; what it does not do is checked here:

- a version whose table configuration did not have ``delta.enableChangeDataFeed = true`` has no
  recorded changes, and delta-rs would invent some from its data files (an update would come
  out as a delete of the whole rewritten file and inserts): such a range is refused with
  Delta's ``DELTA_MISSING_CHANGE_DATA`` error, as Delta does;
- delta-rs yields the rows of a range in no particular order across versions: a range of
  several versions is read whole, its batches filed by version, and given back in version
  order (the rows of one version keep the order delta-rs read them in; Delta promises no order
  inside a version either). A range of one version is streamed batch by batch, so its memory
  stays bounded however large the version is: plan a version with large change files as a
  range of its own (:func:`change_ranges`).

``deltalake`` is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb

from ._log import read_commit
from ._table import DeltaTarget, log_entry_name

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = [
    "CHANGE_DATA_FEED_KEY",
    "CHANGE_RANGE_BYTES",
    "CHANGE_RANGE_VERSIONS",
    "CHANGE_TYPE_COLUMN",
    "COMMIT_TIMESTAMP_COLUMN",
    "COMMIT_VERSION_COLUMN",
    "ChangeRange",
    "as_inserts",
    "change_feed_enabled",
    "change_feed_schema",
    "change_ranges",
    "read_changes",
    "require_change_feed",
]

CHANGE_DATA_FEED_KEY = "delta.enableChangeDataFeed"
CHANGE_TYPE_COLUMN = "_change_type"
COMMIT_VERSION_COLUMN = "_commit_version"
COMMIT_TIMESTAMP_COLUMN = "_commit_timestamp"

CHANGE_RANGE_BYTES = 8 << 20
"""Default bound of the change files (bytes, as the log records them) one multi-version range
may hold: a range of several versions is held in memory while it is ordered, and its Arrow
data takes several times its (compressed) file size (measured: 25 MB of files, about 700 MB
at peak)."""
CHANGE_RANGE_VERSIONS = 100
"""Default bound of the versions in one range (measured with deltalake 1.6.6 on a local table:
a small version costs about 2 ms read in a range of 100, about 35 ms in a range of its own,
most of it loading the table at that version)."""

_CHANGE_FIELDS = (
    pa.field(CHANGE_TYPE_COLUMN, pa.string()),
    pa.field(COMMIT_VERSION_COLUMN, pa.int64()),
    pa.field(COMMIT_TIMESTAMP_COLUMN, pa.timestamp("us", tz="UTC")),
)
_INSERT = pa.scalar("insert", pa.string())
_ENABLE_HINT = (
    f"to start recording change data, set the table property `{CHANGE_DATA_FEED_KEY} = true` "
    f"(delta-rs: DeltaTable(path).alter.set_table_properties({{'{CHANGE_DATA_FEED_KEY}': "
    f"'true'}}); Spark: ALTER TABLE table_name SET TBLPROPERTIES ({CHANGE_DATA_FEED_KEY}=true))"
)


def change_feed_schema(table_schema: pa.Schema) -> pa.Schema:
    """The schema of the change rows: the table's columns, then ``_change_type`` (string),
    ``_commit_version`` (int64) and ``_commit_timestamp`` (timestamp, microseconds, UTC), all
    nullable, as Delta's ``cdcReadSchema``.

    Raises :class:`~microbatch.errors.SchemaError` when the table already has a column of one
    of those names (Delta refuses to record changes for such a table).
    """
    reserved = [f.name for f in _CHANGE_FIELDS if f.name in table_schema.names]
    if reserved:
        raise mb.SchemaError(
            "[DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS] Unable to read the change data feed of "
            f"the table. The table already contains reserved columns [{','.join(reserved)}] "
            "that are used as metadata for the table's Change Data Feed. To read its Change "
            "Data Feed rename/drop these columns."
        )
    return pa.schema([*table_schema, *_CHANGE_FIELDS], metadata=table_schema.metadata)


def change_feed_enabled(configuration: Mapping[str, str | None]) -> bool:
    """True when a table configuration records changes (``delta.enableChangeDataFeed`` is
    ``true``, in any case, as Delta parses it)."""
    value = configuration.get(CHANGE_DATA_FEED_KEY)
    return value is not None and value.strip().lower() == "true"


def require_change_feed(table: DeltaTable, path: str) -> None:
    """Raise :class:`~microbatch.errors.SourceError` unless ``table`` (at its loaded version)
    records its changes. ``path`` names the table in the message."""
    if change_feed_enabled(table.metadata().configuration):
        return
    version = table.version()
    raise mb.SourceError(
        f"[DELTA_MISSING_CHANGE_DATA] readChangeFeed: the Delta table at {path} does not "
        f"record its change data feed (version {version} does not have `{CHANGE_DATA_FEED_KEY} "
        f"= true` in its table properties). If you've enabled the change data feed on this "
        "table, read it from a version that records it (startingVersion). Otherwise, "
        f"{_ENABLE_HINT}; changes are recorded from that version on."
    )


@dataclass(frozen=True)
class ChangeRange(mb.Split):
    """The changes of versions ``first_version`` to ``last_version`` (inclusive) of a table."""

    target: DeltaTarget
    first_version: int
    last_version: int

    def __post_init__(self) -> None:
        if self.first_version < 0 or self.last_version < self.first_version:
            raise ValueError(
                f"A change range needs 0 <= first_version <= last_version, got "
                f"[{self.first_version}, {self.last_version}]"
            )


def change_ranges(
    target: DeltaTarget,
    versions: Iterable[tuple[int, int]],
    *,
    max_bytes: int = CHANGE_RANGE_BYTES,
    max_versions: int = CHANGE_RANGE_VERSIONS,
) -> list[ChangeRange]:
    """Group consecutive versions into ranges for :func:`read_changes`.

    ``versions`` holds ``(version, bytes)`` pairs in increasing, consecutive version order
    (the bytes of a version's changes, see ``_scan.change_sizes``). A range takes versions
    while their bytes stay within ``max_bytes`` and their count within ``max_versions``; a
    version larger than ``max_bytes`` gets a range of its own, which is streamed with bounded
    memory.
    """
    ranges: list[ChangeRange] = []
    first = last = -1
    total = 0

    def close() -> None:
        if first >= 0:
            ranges.append(ChangeRange(target, first, last))

    for version, size in versions:
        if first >= 0 and version != last + 1:
            raise ValueError(f"versions must be consecutive: {version} follows {last}")
        if first < 0 or total + size > max_bytes or version - first >= max_versions:
            close()
            first, total = version, 0
        last = version
        total += size
    close()
    return ranges


def read_changes(split: ChangeRange, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The change rows of ``split`` as batches of ``schema`` (a :func:`change_feed_schema`), in
    version order.

    Raises :class:`~microbatch.errors.SourceError` (Delta's ``DELTA_MISSING_CHANGE_DATA``
    text) when a version of the range did not record its changes, and when the table or a
    version is gone. A version that changed no data (optimize) yields no rows.
    """
    first, last = split.first_version, split.last_version
    table = _open(split.target, first)
    if not change_feed_enabled(table.metadata().configuration):
        raise _not_recorded(split.target.uri, first, last, first)
    if last > first:
        filesystem = split.target.filesystem()
        for version in range(first + 1, last + 1):
            commit = read_commit(filesystem, version)
            if commit is None:
                raise mb.SourceError(
                    f"The log entry {log_entry_name(version)} of the Delta table at "
                    f"{split.target.uri} is gone: the change data feed of version {version} "
                    "cannot be read"
                )
            metadata = commit.metadata
            if metadata is not None and not change_feed_enabled(
                metadata.get("configuration") or {}
            ):
                raise _not_recorded(split.target.uri, first, last, version)
    try:
        reader = pa.RecordBatchReader.from_stream(
            table.load_cdf(starting_version=first, ending_version=last)
        )
        if first == last:
            for batch in reader:
                if batch.num_rows:
                    yield _conform(batch, schema, split)
            return
        by_version: dict[int, list[pa.RecordBatch]] = {}
        for batch in reader:
            if batch.num_rows:
                _bucket(_conform(batch, schema, split), by_version)
    except mb.SourceError:
        raise
    except Exception as error:
        raise mb.SourceError(
            f"Reading the change data feed of versions {first} to {last} of the Delta table "
            f"at {split.target.uri} failed: {error}"
        ) from error
    for version in sorted(by_version):
        yield from by_version.pop(version)


def as_inserts(
    batches: Iterable[pa.RecordBatch], version: int, timestamp_ms: int, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of the table's snapshot at ``version`` as change rows of ``schema``:
    ``_change_type`` ``insert``, ``_commit_version`` ``version``, ``_commit_timestamp``
    ``timestamp_ms`` (the version's commit time, see ``_log.commit_time_ms``). This is how
    Delta's change feed stream started without a starting version emits the table's contents
    first."""
    stamp = pa.scalar(timestamp_ms * 1000, pa.timestamp("us", tz="UTC"))
    for batch in batches:
        if not batch.num_rows:
            continue
        n = batch.num_rows
        extra = {
            CHANGE_TYPE_COLUMN: pa.repeat(_INSERT, n),
            COMMIT_VERSION_COLUMN: pa.repeat(pa.scalar(version, pa.int64()), n),
            COMMIT_TIMESTAMP_COLUMN: pa.repeat(stamp, n),
        }
        arrays = [batch.column(name) for name in batch.schema.names if name not in extra]
        names = [name for name in batch.schema.names if name not in extra]
        yield _conform(
            pa.RecordBatch.from_arrays([*arrays, *extra.values()], names=[*names, *extra]),
            schema,
            None,
        )


def _bucket(batch: pa.RecordBatch, by_version: dict[int, list[pa.RecordBatch]]) -> None:
    """File ``batch``'s rows under their versions, keeping their order (delta-rs's batches
    mostly hold one version: those are filed whole)."""
    versions = batch.column(COMMIT_VERSION_COLUMN)
    low, high = pc.min_max(versions).values()
    if low == high:
        by_version.setdefault(low.as_py(), []).append(batch)
        return
    for version in pc.unique(versions).to_pylist():
        part = batch.filter(pc.equal(versions, version))
        by_version.setdefault(version, []).append(part)


def _open(target: DeltaTarget, version: int) -> DeltaTable:
    try:
        table = target.open(version=version)
    except mb.RetriableError:  # the store away: the batch runs again
        raise
    except Exception as error:
        raise mb.SourceError(
            f"Cannot load version {version} of the Delta table at {target.uri} to read its "
            f"change data feed: {error}"
        ) from error
    if table is None:
        raise mb.SourceError(
            f"The Delta table at {target.uri} is gone: its change data feed cannot be read"
        )
    return table


def _not_recorded(path: str, start: int, end: int, version: int) -> mb.SourceError:
    return mb.SourceError(
        f"[DELTA_MISSING_CHANGE_DATA] Error getting change data for range [{start} , {end}] "
        f"as change data was not recorded for version [{version}] of the Delta table at "
        f"{path}. If you've enabled change data feed on this table, use its history "
        f"(DeltaTable(path).history()) to see when it was first enabled and start from there "
        f"(startingVersion). Otherwise, {_ENABLE_HINT}."
    )


def _conform(batch: pa.RecordBatch, schema: pa.Schema, split: ChangeRange | None) -> pa.RecordBatch:
    """``batch`` with exactly ``schema``'s columns, types and order. A column of the schema the
    batch lacks (added to the table later) is null; a column the schema lacks means the table's
    schema changed within the stream, which the caller must restart for."""
    extra = [name for name in batch.schema.names if schema.get_field_index(name) < 0]
    if extra:
        where = (
            f"versions {split.first_version} to {split.last_version} of {split.target.uri}"
            if split is not None
            else "the table's snapshot"
        )
        raise mb.SourceError(
            f"The change data feed of {where} has columns {extra} that the stream's schema "
            "does not: the table's schema changed. Restart the query to read the new schema."
        )
    arrays: list[pa.Array] = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            arrays.append(pa.nulls(batch.num_rows, field.type))
            continue
        column = batch.column(index)
        arrays.append(column if column.type == field.type else _cast(column, field))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _cast(column: pa.Array, field: pa.Field) -> pa.Array:
    try:
        return column.cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise mb.SourceError(
            f"The change data feed's column {field.name!r} ({column.type}) does not convert to "
            f"the stream's type {field.type}: {error}"
        ) from error
