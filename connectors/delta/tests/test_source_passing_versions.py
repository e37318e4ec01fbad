"""Versions with nothing to read (skipped deletes, OPTIMIZE, property changes, an empty
snapshot) are passed over by the stream's offset, so a stream that reads nothing new does not
stay behind them, and the log clean-up of such versions does not stop it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent))
from _delta_source_testing import ids, run_available_now


@pytest.fixture(scope="module")
def session() -> mb.Session:
    return mb.Session()


def _end(query: mb.StreamingQuery) -> dict[str, Any]:
    return dict(query.last_progress["sources"][0]["endOffset"])


def _clean_up_log(path: str, up_to: int) -> None:
    """What log clean-up does: a checkpoint, then the entries before it are removed."""
    DeltaTable(path).create_checkpoint()
    for version in range(up_to + 1):
        (Path(path) / "_delta_log" / f"{version:020d}.json").unlink()


def test_a_skipped_delete_is_passed_and_its_log_clean_up_does_not_stop_the_stream(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 3))
    delta_table.append(make_numbers(3, 3))
    checkpoint = tmp_path / "cp"
    rows, _ = run_available_now(session, delta_table.uri, checkpoint, ignoreDeletes=True)
    assert ids(rows) == list(range(6))
    first = delta_table.delete("id < 3")  # removes whole files: skipped with ignoreDeletes
    deleted = delta_table.delete()
    rows, query = run_available_now(session, delta_table.uri, checkpoint, ignoreDeletes=True)
    assert ids(rows) == []
    assert _end(query)["reservoirVersion"] == deleted + 1
    assert _end(query)["isStartingVersion"] is False
    assert query.last_progress["sources"][0]["metrics"]["numSkippedDeleteCommits"] == "2"
    _clean_up_log(delta_table.uri, first)
    delta_table.append(make_numbers(10, 2))
    rows, _ = run_available_now(session, delta_table.uri, checkpoint, ignoreDeletes=True)
    assert ids(rows) == [10, 11]


def test_optimize_and_property_changes_move_the_offset_without_rows(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    for n in range(3):
        delta_table.append(make_numbers(10 * n, 2))
    checkpoint = tmp_path / "cp"
    run_available_now(session, delta_table.uri, checkpoint)
    delta_table.optimize()
    DeltaTable(delta_table.uri).alter.set_table_properties({"delta.appendOnly": "false"})
    latest = int(DeltaTable(delta_table.uri).version())
    rows, query = run_available_now(session, delta_table.uri, checkpoint)
    assert ids(rows) == []
    assert _end(query)["reservoirVersion"] == latest + 1
    delta_table.append(make_numbers(100, 1))
    rows, _ = run_available_now(session, delta_table.uri, checkpoint)
    assert ids(rows) == [100]


def test_a_stream_of_an_empty_table_passes_its_snapshot(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    DeltaTable.create(delta_table.uri, schema=make_numbers(0, 1).schema)
    checkpoint = tmp_path / "cp"
    rows, query = run_available_now(session, delta_table.uri, checkpoint)
    assert ids(rows) == []
    assert _end(query)["reservoirVersion"] == 1
    delta_table.append(make_numbers(0, 2))
    delta_table.append(make_numbers(2, 2))
    _clean_up_log(delta_table.uri, 0)
    rows, _ = run_available_now(session, delta_table.uri, checkpoint)
    assert ids(rows) == [0, 1, 2, 3]
