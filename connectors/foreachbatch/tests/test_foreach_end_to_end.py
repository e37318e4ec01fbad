"""foreachBatch, foreach and noop behind real queries reading rate-micro-batch."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch import BatchLedger, ConfigurationError
from microbatch.errors import StreamingQueryException
from microbatch_testkit.crash import FailAt

pytest.importorskip("microbatch_rate")


@pytest.fixture
def session() -> Iterator[mb.Session]:
    with mb.Session() as opened:
        yield opened


def rate(session: mb.Session, rows: int = 5, partitions: int = 2) -> mb.StreamFrame:
    return (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", partitions)
        .load()
    )


def run_available_now(writer: Any) -> Any:
    query = writer.trigger(available_now=True).start()
    with contextlib.suppress(StreamingQueryException):  # the caller reads query.exception()
        assert query.await_termination(60)
    return query


def test_foreach_batch_gets_each_batch_with_its_id(session: mb.Session, tmp_path: Path) -> None:
    calls: list[tuple[int, list[int]]] = []

    def record(batch: pa.Table, batch_id: int) -> None:
        assert isinstance(batch, pa.Table)
        calls.append((batch_id, sorted(batch.column("value").to_pylist())))

    writer = (
        rate(session)
        .filter(mb.col("value") >= 2)
        .write_stream.foreach_batch(record)
        .option("checkpointLocation", str(tmp_path / "cp"))
    )
    for _ in range(3):
        assert run_available_now(writer).exception() is None
    assert calls == [(0, [2, 3, 4]), (1, [5, 6, 7, 8, 9]), (2, [10, 11, 12, 13, 14])]


def test_foreach_batch_with_the_ledger_writes_sqlite_exactly_once(tmp_path: Path) -> None:
    database = tmp_path / "target.db"
    with closing(sqlite3.connect(database)) as connection:
        connection.execute("CREATE TABLE numbers (value INTEGER, batch INTEGER)")
        connection.commit()
    calls: list[int] = []

    def write_numbers(batch: pa.Table, batch_id: int) -> None:
        calls.append(batch_id)
        rows = [(value, batch_id) for value in batch.column("value").to_pylist()]
        with closing(sqlite3.connect(database)) as target:
            ledger = BatchLedger(target, key="numbers")
            ledger.apply_once(
                batch_id, lambda c: c.executemany("INSERT INTO numbers VALUES (?, ?)", rows)
            )

    crash = FailAt("sink_committed", batch_id=1)  # after the sink committed, before the log
    checkpoint = str(tmp_path / "cp")
    with mb.Session(plugins=[crash]) as session:
        writer = (
            rate(session)
            .write_stream.foreach_batch(write_numbers)
            .option("checkpointLocation", checkpoint)
        )
        assert run_available_now(writer).exception() is None
        failed = run_available_now(writer)
        error = failed.exception()
        assert error is not None
        assert "simulated crash" in str(error.cause)
        session.registry.plugin_manager.unregister(crash)
        assert run_available_now(writer).exception() is None  # replays batch 1 first
    last = max(calls)
    assert calls == [0, 1, 1, *range(2, last + 1)]  # the function saw batch 1 twice...
    with closing(sqlite3.connect(database)) as target:
        values = [row[0] for row in target.execute("SELECT value FROM numbers ORDER BY value")]
        ledger = BatchLedger(target, key="numbers")
        assert ledger.last_applied() == last
    assert values == list(range(5 * (last + 1)))  # ...and its rows are stored once


def test_foreach_batch_error_is_the_query_cause(session: mb.Session) -> None:
    class TargetUnavailable(Exception):
        pass

    failure = TargetUnavailable("warehouse is down")

    def fail(batch: pa.Table, batch_id: int) -> None:
        raise failure

    query = rate(session).write_stream.foreach_batch(fail).trigger(available_now=True).start()
    with pytest.raises(StreamingQueryException, match="warehouse is down"):
        query.await_termination(60)
    error = query.exception()
    assert error is not None
    assert error.cause is failure


def test_foreach_batch_validation_happens_at_start(session: mb.Session) -> None:
    def one_argument(batch: pa.Table) -> None:
        pass

    with pytest.raises(
        ConfigurationError, match="cannot be called as function\\(batch, batch_id\\)"
    ):
        rate(session).write_stream.foreach_batch(one_argument).start()  # type: ignore[arg-type]
    assert session.streams.active == []


class PartitionWriter:
    lock: ClassVar[threading.Lock] = threading.Lock()
    events: ClassVar[list[tuple[Any, ...]]] = []

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.partition = partition_id
        with self.lock:
            self.events.append(("open", partition_id, epoch_id))
        return True

    def process(self, row: dict[str, Any]) -> None:
        if row["value"] == 99:
            raise ValueError("value 99 is not allowed")
        with self.lock:
            self.events.append(("process", self.partition, row["value"]))

    def close(self, error: BaseException | None) -> None:
        with self.lock:
            self.events.append(("close", self.partition, error))


def test_foreach_runs_open_process_close_per_split(session: mb.Session, tmp_path: Path) -> None:
    PartitionWriter.events = []
    writer = (
        rate(session, rows=6, partitions=3)
        .write_stream.foreach(PartitionWriter())
        .option("checkpointLocation", str(tmp_path / "cp"))
    )
    run_available_now(writer)
    run_available_now(writer)
    events = PartitionWriter.events
    opens = sorted(event[1:] for event in events if event[0] == "open")
    assert opens == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    processed = sorted(event[2] for event in events if event[0] == "process")
    assert processed == list(range(12))
    closes = [event for event in events if event[0] == "close"]
    assert len(closes) == 6
    assert all(event[2] is None for event in closes)


def test_foreach_error_closes_the_partition_and_fails_the_query(session: mb.Session) -> None:
    PartitionWriter.events = []
    query = (
        rate(session, rows=100, partitions=1)
        .write_stream.foreach(PartitionWriter())
        .trigger(available_now=True)
        .start()
    )
    with pytest.raises(StreamingQueryException, match="value 99 is not allowed"):
        query.await_termination(60)
    error = query.exception()
    assert error is not None
    assert isinstance(error.cause, ValueError)
    close = PartitionWriter.events[-1]
    assert close[0] == "close"
    assert close[2] is error.cause


def test_foreach_with_a_function(session: mb.Session) -> None:
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    def keep(row: dict[str, Any]) -> None:
        with lock:
            seen.append(row)

    run_available_now(rate(session, rows=4).select("value").write_stream.foreach(keep))
    assert sorted(row["value"] for row in seen) == [0, 1, 2, 3]
    assert all(set(row) == {"value"} for row in seen)


def test_noop_consumes_the_batch(session: mb.Session) -> None:
    query = run_available_now(rate(session, rows=7).write_stream.format("noop"))
    assert query.exception() is None
    assert query.last_progress is not None
    assert query.last_progress["numInputRows"] == 7
    assert query.last_progress["sink"]["numOutputRows"] == 7
