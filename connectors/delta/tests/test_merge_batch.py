"""``microbatch_delta.merge_batch``: upserts from ``foreach_batch`` functions, once per batch id
(called directly, and from real queries)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable

import microbatch as mb
from microbatch_delta import merge_batch

sys.path.insert(0, str(Path(__file__).parent))
from _delta_merge_testing import batch_commits, keyed_values, latest_per_key, log_entries, rows_by

SCHEMA = pa.schema([("user", pa.string()), ("total", pa.int64())])


def batch(*pairs: tuple[str | None, int]) -> pa.Table:
    return pa.Table.from_pylist([{"user": user, "total": total} for user, total in pairs], SCHEMA)


def test_a_replayed_batch_id_is_applied_once(tmp_path: Path) -> None:
    path = str(tmp_path / "totals")
    assert merge_batch(batch(("ann", 1), ("bob", 1)), 0, path, "user", app_id="app")
    assert merge_batch(batch(("ann", 5)), 1, path, "user", app_id="app")
    # a replay of batch 0 (here with other rows, to see it is skipped, not re-applied)
    assert not merge_batch(batch(("ann", 99), ("cat", 99)), 0, path, "user", app_id="app")
    assert not merge_batch(batch(("ann", 99)), 1, path, "user", app_id="app")
    table = DeltaTable(path)
    assert table.transaction_version("app") == 1  # never moved backwards
    assert rows_by(table.to_pyarrow_table(), "user") == [
        {"user": "ann", "total": 5},
        {"user": "bob", "total": 1},
    ]
    assert batch_commits(tmp_path / "totals", "app") == [(0, "WRITE"), (1, "MERGE")]
    # another app id is another stream: its batch 0 is its own
    assert merge_batch(batch(("cat", 7)), 0, path, "user", app_id="other")
    assert DeltaTable(path).transaction_version("app") == 1
    assert pl.read_delta(path).sort("user").to_dicts() == [
        {"user": "ann", "total": 5},
        {"user": "bob", "total": 1},
        {"user": "cat", "total": 7},
    ]


def test_several_rows_of_a_key_and_null_keys(tmp_path: Path) -> None:
    path = str(tmp_path / "totals")
    merge_batch(batch(("ann", 1), (None, 1), ("ann", 2), (None, 2)), 0, path, ["user"], app_id="a")
    merge_batch(batch((None, 3), ("bob", 1), (None, 4)), 1, path, ["user"], app_id="a")
    assert rows_by(DeltaTable(path).to_pyarrow_table(), "user") == [
        {"user": None, "total": 4},
        {"user": "ann", "total": 2},
        {"user": "bob", "total": 1},
    ]


def test_arrow_streams_and_polars_frames_are_taken(tmp_path: Path) -> None:
    path = str(tmp_path / "totals")
    merge_batch(pl.DataFrame({"user": ["ann"], "total": [1]}), 0, path, "user", app_id="a")
    reader = pa.RecordBatchReader.from_batches(SCHEMA, batch(("bob", 2)).to_batches())
    merge_batch(reader, 1, path, "user", app_id="a")
    merge_batch(batch(("ann", 3)).to_batches()[0], 2, path, "user", app_id="a")
    assert pl.read_delta(path).sort("user").to_dicts() == [
        {"user": "ann", "total": 3},
        {"user": "bob", "total": 2},
    ]
    with pytest.raises(mb.ConfigurationError, match=r"takes a pyarrow Table.*got dict"):
        merge_batch({"user": ["x"]}, 3, path, "user", app_id="a")


def test_the_first_call_creates_the_table_with_its_settings(tmp_path: Path) -> None:
    path = tmp_path / "events"
    rows = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),
            "day": ["2024-01-01", "2024-01-02"],
            "at": pa.array([0, 1], pa.timestamp("ns", tz="America/New_York")),
        }
    )
    merge_batch(
        rows,
        0,
        path,
        "id",
        app_id="a",
        partition_by="day",
        configuration={"delta.enableChangeDataFeed": "true"},
        user_metadata="first load",
    )
    table = DeltaTable(str(path))
    assert table.metadata().partition_columns == ["day"]
    assert table.metadata().configuration == {"delta.enableChangeDataFeed": "true"}
    assert table.history(1)[0]["userMetadata"] == "first load"
    assert (path / "day=2024-01-01").is_dir()
    back = table.to_pyarrow_table()
    assert back.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert sorted(back.column("id").to_pylist()) == [1, 2]


def test_columns_that_differ_from_the_table_are_refused_unless_merge_schema(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "totals")
    merge_batch(batch(("ann", 1)), 0, path, "user", app_id="a")
    wider = pa.table({"user": ["ann"], "total": [2], "region": ["eu"]})
    with pytest.raises(mb.SchemaError, match="has columns the table lacks: 'region'"):
        merge_batch(wider, 1, path, "user", app_id="a")
    with pytest.raises(mb.SchemaError, match="lacks the table's columns 'total'"):
        merge_batch(pa.table({"user": ["ann"]}), 1, path, "user", app_id="a")
    assert DeltaTable(path).version() == 0
    assert merge_batch(wider, 1, path, "user", app_id="a", merge_schema=True)
    narrow = pa.table({"user": ["ann", "bob"], "region": ["us", "us"]})
    assert merge_batch(narrow, 2, path, "user", app_id="a", merge_schema=True)
    assert rows_by(DeltaTable(path).to_pyarrow_table(), "user") == [
        {"user": "ann", "total": 2, "region": "us"},  # total kept: the batch has none
        {"user": "bob", "total": None, "region": "us"},
    ]


def test_arguments_are_checked(tmp_path: Path) -> None:
    path = str(tmp_path / "totals")
    with pytest.raises(mb.ConfigurationError, match=r"needs app_id=.*not called inside a"):
        merge_batch(batch(("ann", 1)), 0, path, "user")
    with pytest.raises(mb.ConfigurationError, match="batch id >= 0, got -1"):
        merge_batch(batch(("ann", 1)), -1, path, "user", app_id="a")
    with pytest.raises(mb.ConfigurationError, match=r"keys=\.\.\.\) names 'User'.*'user'"):
        merge_batch(batch(("ann", 1)), 0, path, "User", app_id="a")
    with pytest.raises(mb.ConfigurationError, match=r"names 'usr', .* \(did you mean 'user'\?\)"):
        merge_batch(batch(("ann", 1)), 0, path, "usr", app_id="a")
    assert not (tmp_path / "totals").exists()


def test_merge_batch_passed_to_foreach_batch_as_it_is_says_how_to_bind_it() -> None:
    frame = keyed_values(mb.Session(), 5)
    with pytest.raises(mb.ConfigurationError) as caught:
        frame.write_stream.foreach_batch(merge_batch).start()  # type: ignore[arg-type]
    text = str(caught.value)
    assert "missing a required argument: 'path'" in text
    assert text.endswith(
        "Bind its other required arguments first: lambda batch, batch_id: merge_batch(batch, "
        "batch_id, path=..., keys=...), or functools.partial(merge_batch, path=..., keys=...)"
    )


# --- from real queries ------------------------------------------------------------------------


def run_once(frame: Any, function: Any, checkpoint: Path | None) -> mb.StreamingQuery:
    """One available-now run (one batch of rate-micro-batch) into ``function``, ended."""
    writer = frame.write_stream.foreach_batch(function).output_mode("update")
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", str(checkpoint))
    query = writer.trigger(available_now=True).start()
    with contextlib.suppress(mb.StreamingQueryException):  # the caller looks at exception()
        assert query.await_termination(timeout=60)
    return query


def test_foreach_batch_upserts_the_latest_value_of_each_key(tmp_path: Path) -> None:
    """Three runs of one checkpoint (one batch each): the table holds the latest value of each
    key; a batch whose function failed after its merge is replayed by the engine and skipped."""
    path = str(tmp_path / "latest")
    checkpoint = tmp_path / "checkpoint"
    failures = {1: "after the merge of batch 1"}
    applied: list[tuple[int, bool]] = []

    def upsert(rows: pa.Table, batch_id: int) -> None:
        applied.append((batch_id, merge_batch(rows, batch_id, path, "key")))
        if batch_id in failures:
            raise mb.RetriableError(failures.pop(batch_id))

    session = mb.Session(conf={"batchRetryBackoff": "10 milliseconds"})
    for _ in range(3):
        query = run_once(keyed_values(session, 20), upsert, checkpoint)
        assert query.exception() is None
    assert applied == [(0, True), (1, True), (1, False), (2, True)]
    expected = latest_per_key(range(60))
    assert pl.read_delta(path).sort("key").to_dicts() == expected
    assert rows_by(DeltaTable(path).to_pyarrow_table(), "key") == expected
    assert batch_commits(tmp_path / "latest", query.id) == [
        (0, "WRITE"),
        (1, "MERGE"),
        (2, "MERGE"),
    ]
    assert len(log_entries(tmp_path / "latest")) == 3


def test_foreach_batch_without_a_checkpoint(tmp_path: Path) -> None:
    """The query id is new on every start without a checkpoint: the default app id works, an
    explicit one is refused (its batch ids would restart at 0 and be skipped)."""
    path = str(tmp_path / "latest")
    session = mb.Session()
    for _ in range(2):
        query = run_once(
            keyed_values(session, 7), lambda rows, i: merge_batch(rows, i, path, "key"), None
        )
        assert query.exception() is None
    assert DeltaTable(path).version() == 1  # both runs' batch 0 applied, each under its own id
    assert pl.read_delta(path).sort("key")["value"].to_list() == list(range(7))

    def fixed(rows: pa.Table, batch_id: int) -> None:
        merge_batch(rows, batch_id, path, "key", app_id="nightly")

    query = run_once(keyed_values(session, 7), fixed, None)
    error = query.exception()
    assert error is not None
    assert isinstance(error.cause, mb.ConfigurationError)  # raised by merge_batch itself
    assert "has no checkpointLocation" in str(error.cause)
    assert DeltaTable(path).version() == 1
