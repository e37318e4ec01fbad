"""The change data feed reader (``_change_feed``) over real Delta tables written by delta-rs."""

from __future__ import annotations

import json
import os
import pickle
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import microbatch as mb
from microbatch_delta._change_feed import (
    ChangeRange,
    _bucket,
    as_inserts,
    change_feed_schema,
    change_ranges,
    read_changes,
    require_change_feed,
)
from microbatch_delta._log import commit_time_ms, read_commit
from microbatch_delta._scan import change_sizes
from microbatch_delta._table import DeltaTarget, log_entry_name

sys.path.insert(0, str(Path(__file__).parent))
from _delta_source_testing import upsert

CDF = {"delta.enableChangeDataFeed": "true"}
TABLE = pa.schema([("id", pa.int64()), ("v", pa.string())])
SCHEMA = change_feed_schema(TABLE)
UTC = pa.timestamp("us", tz="UTC")


def rows(table: str, first: int, last: int, schema: pa.Schema = SCHEMA) -> pa.Table:
    batches = list(read_changes(ChangeRange(DeltaTarget(table), first, last), schema))
    for batch in batches:
        assert batch.schema == schema
    return pa.Table.from_batches(batches, schema=schema)


def changes(table: pa.Table) -> list[tuple[Any, ...]]:
    """(version, change type, data columns...) per row, in the order read."""
    names = [n for n in table.schema.names if not n.startswith("_")]
    return [
        (r["_commit_version"], r["_change_type"], *(r[n] for n in names)) for r in table.to_pylist()
    ]


def stamps(path: str) -> dict[int, int]:
    """Commit time (ms) per version from the table's history."""
    return {h["version"]: h["timestamp"] for h in DeltaTable(path).history()}


@pytest.fixture
def table(tmp_path: Path) -> str:
    """v0 create (1 a, 2 b, 3 c); v1 update id 2; v2 delete id 3; v3 merge (update 1, insert 4,
    delete 2 as not matched by source)."""
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), configuration=CDF)
    dt = DeltaTable(path)
    dt.update(updates={"v": "'z'"}, predicate="id = 2")
    dt.delete("id = 3")
    upsert(path, pa.table({"id": [1, 4], "v": ["m", "n"]}), delete_unmatched=True)
    return path


def test_schema_is_the_tables_columns_then_sparks_three() -> None:
    expected = [
        ("id", pa.int64()),
        ("v", pa.string()),
        ("_change_type", pa.string()),
        ("_commit_version", pa.int64()),
        ("_commit_timestamp", UTC),
    ]
    assert [(f.name, f.type) for f in SCHEMA] == expected
    assert all(field.nullable for field in SCHEMA)
    with pytest.raises(
        mb.SchemaError,
        match=r"^\[DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS\].*reserved columns \[_change_type\]",
    ):
        change_feed_schema(pa.schema([("_change_type", pa.string())]))


def test_each_change_type_with_exact_values(table: str) -> None:
    got = rows(table, 0, 3)
    assert got.schema == SCHEMA
    by_version: dict[int, list[tuple[Any, ...]]] = {}
    for row in changes(got):
        by_version.setdefault(row[0], []).append(row[1:])
    assert sorted(by_version[0]) == [("insert", 1, "a"), ("insert", 2, "b"), ("insert", 3, "c")]
    assert sorted(by_version[1]) == [("update_postimage", 2, "z"), ("update_preimage", 2, "b")]
    assert by_version[2] == [("delete", 3, "c")]
    assert sorted(by_version[3]) == [
        ("delete", 2, "z"),
        ("insert", 4, "n"),
        ("update_postimage", 1, "m"),
        ("update_preimage", 1, "a"),
    ]
    assert list(by_version) == [0, 1, 2, 3]
    # _commit_timestamp: the version's commit time (history, commitInfo), in microseconds UTC
    expected = stamps(table)
    for row in got.to_pylist():
        stamp = row["_commit_timestamp"]
        assert stamp.tzinfo is not None
        assert int(stamp.timestamp() * 1000) == expected[row["_commit_version"]]
    fs = DeltaTarget(table).filesystem()
    assert [commit_time_ms(fs, v) for v in range(4)] == [expected[v] for v in range(4)]


def test_versions_come_in_order(tmp_path: Path) -> None:
    """A partitioned table, so delta-rs reads several files per version and mixes versions."""
    path = str(tmp_path / "p")
    schema = pa.schema([("id", pa.int64()), ("p", pa.int64())])
    write_deltalake(
        path, pa.table({"id": range(6), "p": [i % 3 for i in range(6)]}, schema=schema),
        partition_by=["p"], configuration=CDF,
    )  # fmt: skip
    for version in range(1, 8):
        data = pa.table({"id": [10 * version + p for p in range(3)], "p": [0, 1, 2]})
        write_deltalake(path, data, mode="append")
    DeltaTable(path).update(updates={"id": "id + 1000"}, predicate="id < 3")  # v8
    cf_schema = change_feed_schema(schema)
    for _ in range(5):
        got = rows(path, 0, 8, cf_schema)
        versions = got.column("_commit_version").to_pylist()
        assert versions == sorted(versions)
        assert sorted(set(versions)) == list(range(9))
        assert versions.count(8) == 6  # three pre- and three postimages
        ids = {v: sorted(r[2] for r in changes(got) if r[0] == v) for v in range(1, 8)}
        assert ids == {v: [10 * v, 10 * v + 1, 10 * v + 2] for v in range(1, 8)}


def test_one_version_is_streamed_batch_by_batch(tmp_path: Path) -> None:
    path = str(tmp_path / "big")
    write_deltalake(path, pa.table({"id": [0], "v": ["x"]}), configuration=CDF)
    n = 200_000
    write_deltalake(path, pa.table({"id": range(n), "v": ["y"] * n}, schema=TABLE), mode="append")
    batches = read_changes(ChangeRange(DeltaTarget(path), 1, 1), SCHEMA)
    first = next(batches)
    assert 0 < first.num_rows < n
    rest = list(batches)
    assert first.num_rows + sum(b.num_rows for b in rest) == n
    assert {b.schema for b in rest} == {SCHEMA}


def test_versions_without_data_changes_have_no_rows(tmp_path: Path) -> None:
    path = str(tmp_path / "o")
    write_deltalake(path, pa.table({"id": [1], "v": ["a"]}, schema=TABLE), configuration=CDF)
    write_deltalake(path, pa.table({"id": [2], "v": ["b"]}, schema=TABLE), mode="append")
    dt = DeltaTable(path)
    assert dt.optimize.compact()["numFilesRemoved"] == 2  # v2: dataChange=false
    dt.alter.set_table_properties({"delta.logRetentionDuration": "interval 30 days"})  # v3
    write_deltalake(path, pa.table({"id": [3], "v": ["c"]}, schema=TABLE), mode="append")
    assert DeltaTable(path).version() == 4
    assert rows(path, 2, 2).num_rows == 0
    assert rows(path, 3, 3).num_rows == 0
    assert changes(rows(path, 1, 4)) == [(1, "insert", 2, "b"), (4, "insert", 3, "c")]
    sizes = [(v, change_bytes(path, v)) for v in range(5)]
    assert [size > 0 for _, size in sizes] == [True, True, False, False, True]


def test_a_table_that_never_enabled_the_feed_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "plain")
    write_deltalake(path, pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=TABLE))
    write_deltalake(path, pa.table({"id": [3], "v": ["c"]}, schema=TABLE), mode="append")
    DeltaTable(path).delete("id = 1")
    with pytest.raises(mb.SourceError) as error:
        require_change_feed(DeltaTable(path), path)
    text = str(error.value)
    assert text.startswith("[DELTA_MISSING_CHANGE_DATA] ")
    assert path in text and "`delta.enableChangeDataFeed = true`" in text
    assert "alter.set_table_properties" in text
    assert "Otherwise, to start recording change data, set the table property" in text
    assert "To read its changes, to start" not in text
    # delta-rs alone would give inserts and a whole-file delete here: versions 1 and 2
    for first, last in ((1, 2), (2, 2), (0, 2)):
        with pytest.raises(mb.SourceError, match=_missing(first, last, first, path)):
            list(read_changes(ChangeRange(DeltaTarget(path), first, last), SCHEMA))


def test_a_feed_enabled_after_creation_starts_at_that_version(tmp_path: Path) -> None:
    path = str(tmp_path / "late")
    write_deltalake(path, pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=TABLE))  # v0
    DeltaTable(path).alter.set_table_properties(CDF)  # v1
    write_deltalake(path, pa.table({"id": [3], "v": ["c"]}, schema=TABLE), mode="append")  # v2
    DeltaTable(path).update(updates={"v": "'z'"}, predicate="id = 1")  # v3
    require_change_feed(DeltaTable(path), path)
    with pytest.raises(mb.SourceError) as error:
        require_change_feed(DeltaTable(path, version=0), path)
    assert "version 0" in str(error.value)
    with pytest.raises(mb.SourceError, match=_missing(0, 3, 0, path)):
        list(read_changes(ChangeRange(DeltaTarget(path), 0, 3), SCHEMA))
    got = changes(rows(path, 1, 3))
    assert got[0] == (2, "insert", 3, "c")
    assert sorted(got[1:]) == [(3, "update_postimage", 1, "z"), (3, "update_preimage", 1, "a")]


def test_a_feed_disabled_within_the_range_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "off")
    write_deltalake(
        path, pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=TABLE), configuration=CDF
    )
    write_deltalake(path, pa.table({"id": [3], "v": ["c"]}, schema=TABLE), mode="append")  # v1
    DeltaTable(path).alter.set_table_properties({"delta.enableChangeDataFeed": "false"})  # v2
    DeltaTable(path).delete("id = 1")  # v3: no change data
    DeltaTable(path).alter.set_table_properties(CDF)  # v4
    write_deltalake(path, pa.table({"id": [5], "v": ["e"]}, schema=TABLE), mode="append")  # v5
    target = DeltaTarget(path)
    with pytest.raises(mb.SourceError, match=_missing(0, 5, 2, path)):
        list(read_changes(ChangeRange(target, 0, 5), SCHEMA))
    for first in (2, 3):  # delta-rs alone returns v3's rewrite (and v5) from version 3
        with pytest.raises(mb.SourceError, match=_missing(first, 5, first, path)):
            list(read_changes(ChangeRange(target, first, 5), SCHEMA))
    assert changes(rows(path, 0, 1))[-1] == (1, "insert", 3, "c")
    assert changes(rows(path, 4, 5)) == [(5, "insert", 5, "e")]


def test_columns_added_later_are_null_and_unknown_columns_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "evolve")
    write_deltalake(path, pa.table({"id": [1], "v": ["a"]}, schema=TABLE), configuration=CDF)
    wide = pa.schema([*TABLE, ("w", pa.float64())])
    write_deltalake(
        path, pa.table({"id": [2], "v": ["b"], "w": [0.5]}, schema=wide), mode="append",
        schema_mode="merge",
    )  # fmt: skip
    wide_cf = change_feed_schema(wide)
    got = rows(path, 0, 0, wide_cf)
    assert got.column("w").to_pylist() == [None] and got.schema == wide_cf
    assert rows(path, 1, 1, wide_cf).column("w").to_pylist() == [0.5]
    with pytest.raises(mb.SourceError, match=r"columns \['w'\].*schema changed"):
        list(read_changes(ChangeRange(DeltaTarget(path), 1, 1), SCHEMA))


def test_types_are_cast_to_the_stream_schema(tmp_path: Path) -> None:
    """delta-rs gives string_view, uint64 versions and ms timestamps; partition columns last."""
    path = str(tmp_path / "types")
    schema = pa.schema(
        [("p", pa.string()), ("ts", UTC), ("d", pa.date32()), ("x", pa.decimal128(10, 2))]
    )
    data = pa.table(
        {"p": ["k"], "ts": pa.array([1_500_000], UTC), "d": pa.array([3], pa.date32()),
         "x": pa.array([Decimal("0.12")], pa.decimal128(10, 2))},
        schema=schema,
    )  # fmt: skip
    write_deltalake(path, data, partition_by=["p"], configuration=CDF)
    cf = change_feed_schema(schema)
    got = rows(path, 0, 0, cf)
    assert got.schema == cf
    assert got.drop_columns(["_change_type", "_commit_version", "_commit_timestamp"]) == data


def test_as_inserts_makes_the_snapshot_change_rows(tmp_path: Path) -> None:
    snapshot = pa.table({"v": ["a", "b"], "id": pa.array([1, 2], pa.int32())})  # other order/type
    empty = pa.RecordBatch.from_pylist([], schema=snapshot.schema)
    batches = as_inserts([empty, *snapshot.to_batches()], 7, 1_700_000_000_123, SCHEMA)
    got = pa.Table.from_batches(list(batches), schema=SCHEMA)
    assert got.schema == SCHEMA
    assert got.to_pydict() == {
        "id": [1, 2],
        "v": ["a", "b"],
        "_change_type": ["insert", "insert"],
        "_commit_version": [7, 7],
        "_commit_timestamp": pa.array([1_700_000_000_123_000] * 2, UTC).to_pylist(),
    }


def test_change_ranges_group_small_versions_and_isolate_large_ones(tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path))
    sizes = [(5, 10), (6, 10), (7, 100), (8, 0), (9, 10), (10, 10), (11, 10)]
    got = change_ranges(target, sizes, max_bytes=50, max_versions=2)
    assert [(r.first_version, r.last_version) for r in got] == [(5, 6), (7, 7), (8, 9), (10, 11)]
    assert change_ranges(target, []) == []
    with pytest.raises(ValueError, match="consecutive"):
        change_ranges(target, [(1, 0), (3, 0)])
    with pytest.raises(ValueError, match="first_version <= last_version"):
        ChangeRange(target, 4, 3)
    split = ChangeRange(DeltaTarget("/x", {"k": "v"}), 1, 2)
    assert pickle.loads(pickle.dumps(split)) == split


def test_change_sizes_follow_deltas_rule(table: str) -> None:
    """Versions with cdc files count those; plain appends count their added files."""
    entries = {v: _actions(table, v) for v in range(4)}
    assert change_bytes(table, 0) == sum(a["add"]["size"] for a in entries[0] if "add" in a)
    for version in (1, 2, 3):
        cdc = [a["cdc"]["size"] for a in entries[version] if "cdc" in a]
        assert cdc and change_bytes(table, version) == sum(cdc)
        assert len(_sizes(table, version)) == len(cdc)


def test_a_missing_table_or_version_is_a_source_error(tmp_path: Path, table: str) -> None:
    with pytest.raises(mb.SourceError, match="is gone"):
        list(read_changes(ChangeRange(DeltaTarget(str(tmp_path / "none")), 0, 0), SCHEMA))
    with pytest.raises(mb.SourceError, match="version 9"):
        list(read_changes(ChangeRange(DeltaTarget(table), 9, 9), SCHEMA))


def test_a_damaged_log_entry_is_a_source_error(tmp_path: Path) -> None:
    path = str(tmp_path / "damaged")
    write_deltalake(path, pa.table({"id": [1], "v": ["a"]}, schema=TABLE), configuration=CDF)
    write_deltalake(path, pa.table({"id": [2], "v": ["b"]}, schema=TABLE), mode="append")
    with open(os.path.join(path, log_entry_name(1)), "a") as entry:
        entry.write("{not json\n")
    with pytest.raises(mb.SourceError, match=r"00000000000000000001.json is not valid JSON"):
        list(read_changes(ChangeRange(DeltaTarget(path), 0, 1), SCHEMA))


def test_a_batch_of_several_versions_is_split_keeping_row_order() -> None:
    batch = pa.RecordBatch.from_pydict(
        {"id": [1, 2, 3, 4, 5], "_commit_version": [7, 5, 7, 5, 6]},
        schema=pa.schema([("id", pa.int64()), ("_commit_version", pa.int64())]),
    )
    by_version: dict[int, list[pa.RecordBatch]] = {5: [batch.slice(1, 1)]}
    _bucket(batch, by_version)
    _bucket(batch.slice(4, 1), by_version)
    got = {v: [i for b in bs for i in b.column("id").to_pylist()] for v, bs in by_version.items()}
    assert got == {5: [2, 2, 4], 6: [5, 5], 7: [1, 3]}


def _missing(first: int, last: int, version: int, path: str) -> str:
    return re.escape(
        f"[DELTA_MISSING_CHANGE_DATA] Error getting change data for range [{first} , {last}] "
        f"as change data was not recorded for version [{version}] of the Delta table at {path}."
    )


def _actions(path: str, version: int) -> list[dict[str, Any]]:
    with open(os.path.join(path, log_entry_name(version))) as entry:
        return [json.loads(line) for line in entry if line.strip()]


def _sizes(path: str, version: int) -> tuple[int, ...]:
    commit = read_commit(DeltaTarget(path).filesystem(), version)
    assert commit is not None
    return change_sizes(commit)


def change_bytes(path: str, version: int) -> int:
    """The bytes of ``version``'s changes, as the source plans change ranges with them."""
    return sum(_sizes(path, version))
