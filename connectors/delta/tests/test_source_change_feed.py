"""``readChangeFeed=true`` through the Delta source: the snapshot as inserts, then each version's
changes in version order, whole versions per batch."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent))
from _delta_source_testing import batch_sizes, run_available_now

CDF = {"delta.enableChangeDataFeed": "true"}


@pytest.fixture(scope="module")
def session() -> mb.Session:
    return mb.Session()


def changes(table: pa.Table) -> list[tuple[int, str, int]]:
    """``(commit version, change type, id)`` of each row, in the order the stream gave them
    (sorted by id inside a version and change type, which Delta leaves unordered)."""
    rows = [(r["_commit_version"], r["_change_type"], r["id"]) for r in table.to_pylist()]
    order = {v: n for n, v in enumerate(dict.fromkeys(r[0] for r in rows))}
    return sorted(rows, key=lambda r: (order[r[0]], r[1], r[2]))


def test_a_change_feed_stream_starts_with_the_snapshot_as_inserts_then_reads_changes(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 3), configuration=CDF)
    delta_table.append(make_numbers(3, 2))
    checkpoint = tmp_path / "cp"
    rows, _ = run_available_now(session, delta_table.uri, checkpoint, readChangeFeed=True)
    assert rows.schema.names == [
        "id",
        "name",
        "_change_type",
        "_commit_version",
        "_commit_timestamp",
    ]
    assert changes(rows) == [(1, "insert", i) for i in range(5)]
    stamp = delta_table.history()[0]["timestamp"]
    assert {r.value // 1000 for r in rows.column("_commit_timestamp")} == {stamp}
    update = delta_table.update({"name": "'x'"}, "id = 1")
    delete = delta_table.delete("id = 4")
    append = delta_table.append(make_numbers(10, 1))
    rows, query = run_available_now(session, delta_table.uri, checkpoint, readChangeFeed=True)
    assert changes(rows) == [
        (update, "update_postimage", 1),
        (update, "update_preimage", 1),
        (delete, "delete", 4),
        (append, "insert", 10),
    ]
    end = query.last_progress["sources"][0]["endOffset"]
    assert (end["reservoirVersion"], end["index"]) == (append + 1, -1)


def test_a_change_feed_stream_from_a_starting_version_and_its_limits(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 1), configuration=CDF)
    for n in range(1, 5):
        delta_table.append(make_numbers(n, 1))
    rows, query = run_available_now(
        session,
        delta_table.uri,
        tmp_path / "cp",
        readChangeFeed=True,
        startingVersion=2,
        maxFilesPerTrigger=2,
    )
    assert changes(rows) == [(v, "insert", v) for v in (2, 3, 4)]
    assert batch_sizes(query) == [2, 1]  # whole versions, two files' worth per batch


def test_a_table_without_a_change_feed_is_refused_at_load(
    session: mb.Session, delta_table: Any, make_numbers: Any
) -> None:
    delta_table.append(make_numbers(0, 1))
    with pytest.raises(mb.SourceError, match="DELTA_MISSING_CHANGE_DATA"):
        session.read_stream.format("delta").option("readChangeFeed", True).load(delta_table.uri)


def test_a_batch_read_of_the_change_feed_needs_a_start(
    session: mb.Session, delta_table: Any, make_numbers: Any
) -> None:
    delta_table.append(make_numbers(0, 2), configuration=CDF)
    delete = delta_table.delete("id = 0")
    read = session.read.format("delta").option("readChangeFeed", True)
    rows = read.option("startingVersion", 1).load(delta_table.uri)
    assert changes(rows) == [(delete, "delete", 0)]
    with pytest.raises(mb.ConfigurationError, match="No startingVersion or startingTimestamp"):
        session.read.format("delta").option("readChangeFeed", True).load(delta_table.uri)
