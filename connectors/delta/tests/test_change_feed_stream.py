"""``readChangeFeed=true`` end to end: streaming queries over real Delta tables."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent))
from _delta_source_testing import run_available_now, upsert

CDF = {"delta.enableChangeDataFeed": "true"}
TABLE = pa.schema([("id", pa.int64()), ("v", pa.string())])
META = ["_change_type", "_commit_version", "_commit_timestamp"]


def history_ms(path: str) -> dict[int, int]:
    return {h["version"]: h["timestamp"] for h in DeltaTable(path).history()}


def triples(table: pa.Table) -> list[tuple[Any, ...]]:
    """(version, change type, id, v) per row, sorted inside each version."""
    got = [(r["_commit_version"], r["_change_type"], r["id"], r["v"]) for r in table.to_pylist()]
    versions = [g[0] for g in got]
    assert versions == sorted(versions), "rows must come in version order"
    return sorted(got)


@pytest.fixture
def drain(tmp_path: Path) -> Iterator[Callable[..., pa.Table]]:
    """``drain(path, checkpoint, **options)``: an available-now change feed query into a memory
    table; the rows of that run."""
    session = mb.Session()

    def run(path: str, checkpoint: str = "cp", **options: Any) -> pa.Table:
        rows, _ = run_available_now(
            session, path, tmp_path / checkpoint, readChangeFeed="true", **options
        )
        return rows

    yield run
    session.stop()


@pytest.fixture
def table(tmp_path: Path) -> str:
    """v0 create (1 a, 2 b, 3 c); v1 update id 2 to z."""
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), configuration=CDF)
    DeltaTable(path).update(updates={"v": "'z'"}, predicate="id = 2")
    return path


def test_from_the_snapshot_then_each_version_and_a_restart_reads_only_new_ones(
    drain: Callable[..., pa.Table], table: str
) -> None:
    first = drain(table)
    assert first.schema == pa.schema(
        [*TABLE, ("_change_type", pa.string()), ("_commit_version", pa.int64()),
         ("_commit_timestamp", pa.timestamp("us", tz="UTC"))]
    )  # fmt: skip
    # the snapshot at version 1 (current when the query first started), as inserts of it
    assert triples(first) == [(1, "insert", 1, "a"), (1, "insert", 2, "z"), (1, "insert", 3, "c")]
    stamp = history_ms(table)[1]
    assert {int(t.timestamp() * 1000) for t in first.column("_commit_timestamp").to_pylist()} == {
        stamp
    }
    dt = DeltaTable(table)
    dt.delete("id = 3")  # v2
    upsert(table, pa.table({"id": [1, 4], "v": ["m", "n"]}))  # v3
    write_deltalake(table, pa.table({"id": [5], "v": ["e"]}, schema=TABLE), mode="append")  # v4
    assert DeltaTable(table).optimize.compact()["numFilesRemoved"] >= 2  # v5: no data change
    write_deltalake(table, pa.table({"id": [6], "v": ["f"]}, schema=TABLE), mode="append")  # v6
    assert DeltaTable(table).version() == 6
    second = drain(table)
    assert triples(second) == [
        (2, "delete", 3, "c"),
        (3, "insert", 4, "n"),
        (3, "update_postimage", 1, "m"),
        (3, "update_preimage", 1, "a"),
        (4, "insert", 5, "e"),
        (6, "insert", 6, "f"),
    ]
    stamps = history_ms(table)
    for row in second.to_pylist():
        assert int(row["_commit_timestamp"].timestamp() * 1000) == stamps[row["_commit_version"]]
    assert drain(table).num_rows == 0  # nothing new: no version read twice


def test_from_a_starting_version(drain: Callable[..., pa.Table], table: str) -> None:
    write_deltalake(table, pa.table({"id": [9], "v": ["x"]}, schema=TABLE), mode="append")  # v2
    got = drain(table, startingVersion=1)
    assert triples(got) == [
        (1, "update_postimage", 2, "z"),
        (1, "update_preimage", 2, "b"),
        (2, "insert", 9, "x"),
    ]
    write_deltalake(table, pa.table({"id": [10], "v": ["y"]}, schema=TABLE), mode="append")  # v3
    assert triples(drain(table, startingVersion=1)) == [(3, "insert", 10, "y")]  # restart


def test_a_table_without_the_feed_stops_the_query(
    drain: Callable[..., pa.Table], tmp_path: Path
) -> None:
    path = str(tmp_path / "plain")
    write_deltalake(path, pa.table({"id": [1], "v": ["a"]}, schema=TABLE))
    with pytest.raises(mb.SourceError) as error:  # when the stream is loaded
        drain(path)
    text = str(error.value)
    assert "[DELTA_MISSING_CHANGE_DATA]" in text and path in text
    assert "delta.enableChangeDataFeed = true" in text


def test_a_starting_version_before_the_feed_was_enabled_stops_the_query(
    drain: Callable[..., pa.Table], tmp_path: Path
) -> None:
    path = str(tmp_path / "late")
    write_deltalake(path, pa.table({"id": [1], "v": ["a"]}, schema=TABLE))  # v0
    DeltaTable(path).alter.set_table_properties(CDF)  # v1
    write_deltalake(path, pa.table({"id": [2], "v": ["b"]}, schema=TABLE), mode="append")  # v2
    with pytest.raises(mb.StreamingQueryException) as error:
        drain(path, checkpoint="a", startingVersion=0)
    assert isinstance(error.value.cause, mb.SourceError)
    text = str(error.value.cause)
    assert re.match(
        r"\[DELTA_MISSING_CHANGE_DATA\] Error getting change data for range \[0 , \d+\] "
        r"as change data was not recorded for version \[0\] of the Delta table at ",
        text,
    )
    assert path in text
    assert triples(drain(path, checkpoint="b", startingVersion=1)) == [(2, "insert", 2, "b")]
    # from the snapshot: the versions before the feed was enabled are only in the snapshot
    assert triples(drain(path, checkpoint="c")) == [(2, "insert", 1, "a"), (2, "insert", 2, "b")]
    DeltaTable(path).delete("id = 1")  # v3
    assert triples(drain(path, checkpoint="c")) == [(3, "delete", 1, "a")]


def test_changes_streamed_into_a_delta_table_read_back(table: str, tmp_path: Path) -> None:
    """The change rows, written by the Delta sink, read back with delta-rs and Polars."""
    import polars as pl

    out = str(tmp_path / "changes")
    session = mb.Session()
    try:
        query = (
            session.read_stream.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", 0)
            .load(table)
            .write_stream.format("delta")
            .option("checkpointLocation", str(tmp_path / "cp_out"))
            .trigger(available_now=True)
            .start(out)
        )
        assert query.await_termination(timeout=60)
        assert query.exception() is None
    finally:
        session.stop()
    expected = [
        (0, "insert", 1, "a"),
        (0, "insert", 2, "b"),
        (0, "insert", 3, "c"),
        (1, "update_postimage", 2, "z"),
        (1, "update_preimage", 2, "b"),
    ]
    written = DeltaTable(out).to_pyarrow_table()
    assert written.schema.field("_commit_version").type == pa.int64()
    assert sorted(triples(written.sort_by("_commit_version"))) == expected
    frame = pl.read_delta(out).sort("_commit_version", "_change_type", "id")
    assert list(frame.select("_commit_version", "_change_type", "id", "v").iter_rows()) == expected
    assert frame.schema["_commit_timestamp"] == pl.Datetime("us", "UTC")


def test_a_running_query_follows_changes_and_rate_limits_take_whole_versions(
    table: str, tmp_path: Path
) -> None:
    session = mb.Session()
    try:
        query = (
            session.read_stream.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", 0)
            .option("maxFilesPerTrigger", 1)
            .load(table)
            .write_stream.format("memory")
            .query_name("followed")
            .option("checkpointLocation", str(tmp_path / "cp_follow"))
            .trigger(processing_time="0 seconds")
            .start()
        )
        assert query.process_all_available(timeout=30)
        dt = DeltaTable(table)
        dt.delete("id = 1")  # v2
        dt.update(updates={"v": "'w'"}, predicate="id = 3")  # v3
        assert query.process_all_available(timeout=30)
        query.stop()
        assert query.exception() is None
        got = session.table("followed")
        batches = [p for p in query.recent_progress if p["numInputRows"] > 0]
    finally:
        session.stop()
    assert triples(got) == [
        (0, "insert", 1, "a"),
        (0, "insert", 2, "b"),
        (0, "insert", 3, "c"),
        (1, "update_postimage", 2, "z"),
        (1, "update_preimage", 2, "b"),
        (2, "delete", 1, "a"),
        (3, "update_postimage", 3, "w"),
        (3, "update_preimage", 3, "c"),
    ]
    assert len(batches) == 4  # one whole version a batch
