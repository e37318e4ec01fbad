"""Real queries into ``format("delta")`` with ``mode=merge`` in update output mode: the table
ends with the latest value of each key, one commit per batch id, also when a batch is replayed
after its Delta commit."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest
from deltalake import DeltaTable

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent))
from _delta_merge_testing import batch_commits, keyed_values, latest_per_key, rows_by


def run_once(session: mb.Session, table: Path, checkpoint: Path) -> mb.StreamingQuery:
    """One available-now run (one batch of 20 values) upserting by ``key`` into ``table``."""
    query = (
        keyed_values(session, 20)
        .write_stream.format("delta")
        .option("mode", "merge")
        .option("mergeKeys", "key")
        .option("userMetadata", "latest totals")
        .option("delta.enableChangeDataFeed", "true")
        .output_mode("update")
        .partition_by("bucket")
        .option("checkpointLocation", str(checkpoint))
        .trigger(available_now=True)
        .start(str(table))
    )
    assert query.await_termination(timeout=60)
    assert query.exception() is None
    return query


def test_update_mode_keeps_the_latest_value_of_each_key(tmp_path: Path) -> None:
    table, checkpoint = tmp_path / "latest", tmp_path / "checkpoint"
    session = mb.Session()
    for _ in range(3):
        query = run_once(session, table, checkpoint)
    expected = latest_per_key(range(60))
    assert pl.read_delta(str(table)).sort("key").to_dicts() == expected
    delta = DeltaTable(str(table))
    assert rows_by(delta.to_pyarrow_table(), "key") == expected
    assert delta.metadata().partition_columns == ["bucket"]
    assert delta.metadata().configuration == {"delta.enableChangeDataFeed": "true"}
    assert batch_commits(table, query.id) == [(0, "WRITE"), (1, "MERGE"), (2, "MERGE")]
    assert {entry["userMetadata"] for entry in delta.history()} == {"latest totals"}
    assert not list(table.glob("_microbatch_staging/**/*.parquet")), "staged files were kept"


def test_a_batch_replayed_after_its_delta_commit_is_applied_once(tmp_path: Path) -> None:
    """The query stopped after the sink committed batch 1 and before the engine recorded it
    (its commit-log entry is gone): the restart replays batch 1, which the sink skips, and goes
    on with batch 2."""
    table, checkpoint = tmp_path / "latest", tmp_path / "checkpoint"
    session = mb.Session()
    for _ in range(2):
        query = run_once(session, table, checkpoint)
    (checkpoint / "commits" / "1").unlink()
    replay = run_once(session, table, checkpoint)  # batch 1 again, then batch 2
    assert replay.id == query.id
    assert sorted(path.name for path in (checkpoint / "commits").iterdir()) == ["0", "1", "2"]
    assert batch_commits(table, query.id) == [(0, "WRITE"), (1, "MERGE"), (2, "MERGE")]
    assert DeltaTable(str(table)).version() == 2, "the replayed batch was committed again"
    assert not list(table.glob("_microbatch_staging/**/*.parquet")), "the replay's files were kept"
    assert pl.read_delta(str(table)).sort("key").to_dicts() == latest_per_key(range(60))


def test_merge_keys_are_checked_when_the_query_starts(tmp_path: Path) -> None:
    session = mb.Session()
    writer = (
        keyed_values(session, 20)
        .write_stream.format("delta")
        .option("mode", "merge")
        .option("mergeKeys", "Key")
        .output_mode("update")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    with pytest.raises(mb.ConfigurationError, match=r"'Key', which is not a column.*'key'"):
        query = writer.start(str(tmp_path / "table"))
        query.await_termination(timeout=60)
    assert not (tmp_path / "table" / "_delta_log").exists()
    with pytest.raises(
        mb.ConfigurationError,
        match=r"mergeKeys names 'kee', which is not a column of the rows \(did you mean 'key'\?\)",
    ):
        writer.option("mergeKeys", "kee").start(str(tmp_path / "table"))
    assert not (tmp_path / "table" / "_delta_log").exists()
