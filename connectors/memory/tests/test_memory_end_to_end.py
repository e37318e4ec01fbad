"""MemoryStream -> transforms -> memory sink through real Sessions and queries."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch import ConfigurationError
from microbatch.errors import StreamingQueryException, UnsupportedOperationError
from microbatch_memory import MemoryStream, memory_table
from microbatch_testkit.crash import FailAt

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


@pytest.fixture
def session() -> Iterator[mb.Session]:
    with mb.Session() as opened:
        yield opened


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def rows(*values: int) -> list[dict[str, Any]]:
    return [{"id": value, "name": f"n{value}"} for value in values]


def test_filtered_stream_lands_in_the_session_table(session: mb.Session) -> None:
    stream = MemoryStream(SCHEMA)
    stream.add_data(rows(1, 20, 3))
    query = (
        stream.to_frame(session)
        .filter(mb.col("id") >= 10)
        .write_stream.format("memory")
        .query_name("big")
        .start()
    )
    try:
        query.process_all_available()
        assert ids(session.table("big")) == [20]
        stream.add_data(rows(40, 5))
        stream.add_data(rows(60))
        query.process_all_available()
        assert ids(session.table("big")) == [20, 40, 60]
        assert query.last_progress is not None
        assert query.last_progress["sink"]["description"] == "MemorySink[big]"
    finally:
        query.stop()
    assert query.exception() is None
    assert ids(session.table("big")) == [20, 40, 60]  # the table outlives the query


def test_the_table_exists_as_soon_as_the_query_starts(session: mb.Session) -> None:
    stream = MemoryStream(SCHEMA)
    query = stream.to_frame(session).write_stream.format("memory").query_name("early").start()
    try:
        table = session.table("early")
        assert table.num_rows == 0
        assert table.schema.names == ["id", "name"]
    finally:
        query.stop()


def test_missing_query_name_fails_at_start(session: mb.Session) -> None:
    frame = MemoryStream(SCHEMA).to_frame(session)
    with pytest.raises(ConfigurationError, match="queryName must be specified for memory sink"):
        frame.write_stream.format("memory").start()
    assert session.streams.active == []


def test_available_now_processes_what_was_added(session: mb.Session) -> None:
    stream = MemoryStream(SCHEMA)
    stream.add_data(rows(1, 2))
    stream.add_data(rows(3))
    query = (
        stream.to_frame(session)
        .write_stream.format("memory")
        .query_name("now")
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(30)
    assert ids(session.table("now")) == [1, 2, 3]


def test_restart_from_the_checkpoint_continues_the_table(
    session: mb.Session, tmp_path: Path
) -> None:
    stream = MemoryStream(SCHEMA)
    writer = (
        stream.to_frame(session)
        .write_stream.format("memory")
        .query_name("kept")
        .option("checkpointLocation", str(tmp_path / "cp"))
    )
    stream.add_data(rows(1))
    first = writer.start()
    first.process_all_available()
    first.stop()
    stream.add_data(rows(2))
    second = writer.start()
    try:
        second.process_all_available()
        assert second.id == first.id
        assert ids(session.table("kept")) == [1, 2]
        table = memory_table(session, "kept")
        assert table is not None
        assert table.batch_ids == [0, 1]
    finally:
        second.stop()


def test_a_new_query_with_the_same_name_starts_empty(session: mb.Session) -> None:
    stream = MemoryStream(SCHEMA)
    stream.add_data(rows(1))
    writer = stream.to_frame(session).write_stream.format("memory").query_name("fresh")
    first = writer.start()
    first.process_all_available()
    first.stop()
    other = MemoryStream(SCHEMA)
    other.add_data(rows(7))
    second = other.to_frame(session).write_stream.format("memory").query_name("fresh").start()
    try:
        second.process_all_available()
        assert ids(session.table("fresh")) == [7]
    finally:
        second.stop()


def test_a_batch_replayed_after_a_crash_is_applied_once(tmp_path: Path) -> None:
    checkpoint = str(tmp_path / "cp")
    stream = MemoryStream(SCHEMA)
    crash = FailAt("sink_committed", batch_id=1)  # after the sink committed, before the log
    with mb.Session(plugins=[crash]) as crashing:
        writer = (
            stream.to_frame(crashing)
            .write_stream.format("memory")
            .query_name("once")
            .option("checkpointLocation", checkpoint)
        )
        stream.add_data(rows(1))
        query = writer.start()
        query.process_all_available()
        stream.add_data(rows(2, 3))
        with pytest.raises(StreamingQueryException, match="simulated crash"):
            query.process_all_available()
            query.await_termination(30)
        assert ids(crashing.table("once")) == [1, 2, 3]  # batch 1 reached the sink

        # the same session restarts the query without the crash: batch 1 is re-run
        crashing.registry.plugin_manager.unregister(crash)
        restarted = writer.start()
        try:
            restarted.process_all_available()
            assert restarted.last_progress is not None
            assert ids(crashing.table("once")) == [1, 2, 3]
            table = memory_table(crashing, "once")
            assert table is not None
            assert table.batch_ids == [0, 1]
            stream.add_data(rows(4))
            restarted.process_all_available()
            assert ids(crashing.table("once")) == [1, 2, 3, 4]
        finally:
            restarted.stop()


def test_complete_mode_is_refused_without_an_aggregation(session: mb.Session) -> None:
    # The sink's complete mode (replace the table each batch) is tested on the sink itself:
    # as in Spark, a query reaches it only through an aggregation, which microbatch lacks.
    stream = MemoryStream(SCHEMA)
    writer = stream.to_frame(session).write_stream.format("memory").query_name("latest")
    with pytest.raises(UnsupportedOperationError, match="no streaming aggregations"):
        writer.output_mode("complete").start()
    assert session.streams.active == []


def test_batch_read_of_a_memory_stream(session: mb.Session) -> None:
    stream = MemoryStream(SCHEMA)
    stream.add_data(rows(1))
    stream.add_data(rows(2))
    table = session.read.format("memory").option("stream", stream).load()
    assert ids(table) == [1, 2]
