"""Rows that ``parse_json(mode="DROPMALFORMED")`` drops are counted in progress and logged."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch_memory import MemoryStream


def test_dropped_rows_are_counted_in_progress_and_logged(
    session: mb.Session, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stream = MemoryStream(pa.schema([("value", pa.string())]))
    query = (
        stream.to_frame(session)
        .parse_json("value", "id BIGINT", mode="DROPMALFORMED")
        .write_stream.format("memory")
        .query_name("parsed")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        with caplog.at_level(logging.WARNING, logger="microbatch.transforms"):
            stream.add_data(['{"id": 1}', "{broken", '{"id": 2}', '{"id": "x"}'])
            query.process_all_available()
            first = query.last_progress
            stream.add_data(['{"id": 3}', "nope"])
            query.process_all_available()
            second = query.last_progress
    finally:
        query.stop()
    assert session.table("parsed").column("id").to_pylist() == [1, 2, 3]
    assert first["transformMetrics"] == {"numRowsDroppedByParseMode": "2"}
    assert second["transformMetrics"] == {"numRowsDroppedByParseMode": "3"}  # since the start
    warnings = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(warnings) == 2
    assert "dropped 2 malformed row(s) of a batch of 4, the first at row 1" in warnings[0]


def test_no_transform_metrics_without_a_counting_transform(
    session: mb.Session, tmp_path: Path
) -> None:
    stream = MemoryStream(pa.schema([("value", pa.string())]))
    query = (
        stream.to_frame(session)
        .parse_json("value", "id BIGINT")
        .write_stream.format("memory")
        .query_name("permissive")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        stream.add_data(['{"id": 1}'])
        query.process_all_available()
    finally:
        query.stop()
    assert "transformMetrics" not in query.last_progress
