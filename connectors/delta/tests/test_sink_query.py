"""Real queries through ``mb.Session()`` into ``format("delta")``, read back with delta-rs and
Polars."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent))
from _delta_sink_testing import log_entries, transactions


@pytest.fixture(scope="module")
def session() -> mb.Session:
    return mb.Session()


def rate(session: mb.Session, rows: int = 10) -> mb.StreamFrame:
    return (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", 2)
        .load()
    )


def run(writer: mb.DataStreamWriter, path: str | None = None) -> mb.StreamingQuery:
    query = writer.trigger(available_now=True).start(path)
    assert query.await_termination(timeout=60)
    assert query.exception() is None
    return query


def test_a_query_appends_each_batch_in_one_commit_and_restarts_exactly_once(
    session: mb.Session, tmp_path: Path
) -> None:
    path, checkpoint = tmp_path / "table", tmp_path / "checkpoint"
    for _ in range(3):  # each available-now run of rate-micro-batch is one batch
        writer = rate(session).write_stream.format("delta")
        query = run(writer.option("checkpointLocation", str(checkpoint)), str(path))
    assert query.last_progress is not None
    assert query.last_progress["sink"]["description"] == f"DeltaSink[{path}]"
    table = DeltaTable(str(path))
    assert sorted(table.to_pyarrow_table().column("value").to_pylist()) == list(range(30))
    assert sorted(pl.read_delta(str(path))["value"].to_list()) == list(range(30))
    assert transactions(path) == [(query.id, 0), (query.id, 1), (query.id, 2)]
    assert [h["operation"] for h in reversed(table.history())] == ["CREATE TABLE", "WRITE", "WRITE"]
    for entry in log_entries(path):  # each batch's two parts in its one commit
        assert sum("add" in action for action in entry) == 2


def test_options_reach_the_table(session: mb.Session, tmp_path: Path) -> None:
    path = tmp_path / "table"
    writer = (
        rate(session, 40)
        .with_column("bucket", pc.bit_wise_and(mb.col("value"), pa.scalar(1, pa.int64())))
        .write_stream.format("delta")
        .option("path", str(path))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .option("userMetadata", "nightly load")
        .option("maxRecordsPerFile", 5)
        .option("delta.enableChangeDataFeed", "true")
        .option("delta.appendOnly", True)
        .partition_by("bucket")
    )
    run(writer)
    table = DeltaTable(str(path))
    assert table.metadata().partition_columns == ["bucket"]
    configuration = table.metadata().configuration
    assert configuration["delta.enableChangeDataFeed"] == "true"
    assert configuration["delta.appendOnly"] == "true"
    assert table.history()[0]["userMetadata"] == "nightly load"
    sizes = [action["add"]["stats"] for action in log_entries(path)[0] if "add" in action]
    assert len(sizes) == 8  # 40 rows in 2 buckets, at most 5 rows a file
    frame = pl.read_delta(str(path))
    assert sorted(frame["value"].to_list()) == list(range(40))
    assert all(row["bucket"] == row["value"] % 2 for row in frame.to_dicts())


def test_path_given_twice_is_refused(session: mb.Session, tmp_path: Path) -> None:
    writer = rate(session).write_stream.format("delta").option("path", str(tmp_path / "a"))
    with pytest.raises(mb.ConfigurationError, match="There is a 'path' option set"):
        writer.option("checkpointLocation", str(tmp_path / "cp")).start(str(tmp_path / "b"))


def test_update_mode_without_merge_stops_the_query_with_the_reason(
    session: mb.Session, tmp_path: Path
) -> None:
    writer = (
        rate(session)
        .write_stream.format("delta")
        .output_mode("update")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
    )
    with pytest.raises((mb.UnsupportedOperationError, mb.StreamingQueryException)) as caught:
        query = writer.start(str(tmp_path / "t"))
        query.await_termination(timeout=60)
    assert "update output mode only with mode=merge" in str(caught.value)
    assert not (tmp_path / "t" / "_delta_log").exists()
