"""BatchLedger used by foreach_batch functions: a replayed batch is applied once."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch import BatchLedger, ConfigurationError, PartContext, WriteContext
from microbatch_foreachbatch import ForeachBatchSink


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    path = tmp_path / "target.db"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE orders (id INTEGER, amount INTEGER)")
        connection.commit()
    return path


def stored(db_path: Path) -> list[tuple[int, int]]:
    with closing(sqlite3.connect(db_path)) as fresh:
        return sorted(fresh.execute("SELECT id, amount FROM orders").fetchall())


def ledger_rows(db_path: Path) -> list[tuple[str, int]]:
    with closing(sqlite3.connect(db_path)) as fresh:
        return sorted(fresh.execute("SELECT query_key, batch_id FROM microbatch_ledger").fetchall())


def insert(rows: list[tuple[int, int]]) -> Any:
    def run(connection: Any) -> None:
        connection.executemany("INSERT INTO orders (id, amount) VALUES (?, ?)", rows)

    return run


def test_foreach_batch_with_the_ledger_applies_a_replayed_batch_once(db_path: Path) -> None:
    schema = pa.schema([("id", pa.int64())])

    def write_orders(batch: pa.Table, batch_id: int) -> None:
        rows = [(row["id"], row["id"] * 10) for row in batch.to_pylist()]
        with closing(sqlite3.connect(db_path)) as connection:
            BatchLedger(connection, key="orders-to-db").apply_once(batch_id, insert(rows))

    options = ForeachBatchSink.options.parse({"function": write_orders}, connector="foreachBatch")
    sink = ForeachBatchSink(options).stream_writer(WriteContext(schema=schema))

    def run_batch(batch_id: int, ids: list[int]) -> None:
        reader = pa.RecordBatchReader.from_batches(
            schema, [pa.RecordBatch.from_pydict({"id": ids}, schema=schema)]
        )
        sink.commit([sink.part_writer().write(reader, PartContext(batch_id, 0, 1))], batch_id)

    run_batch(0, [1, 2])
    run_batch(1, [3])
    run_batch(1, [3])  # the engine replays batch 1 after a crash before its commit log entry
    run_batch(2, [4])
    assert stored(db_path) == [(1, 10), (2, 20), (3, 30), (4, 40)]
    assert ledger_rows(db_path) == [("orders-to-db", 0), ("orders-to-db", 1), ("orders-to-db", 2)]


def test_for_query_inside_the_function_keys_the_ledger_by_the_query_id(db_path: Path) -> None:
    schema = pa.schema([("id", pa.int64())])
    keys: list[str] = []

    def write_orders(batch: pa.Table, batch_id: int) -> None:
        rows = [(row["id"], row["id"] * 10) for row in batch.to_pylist()]
        with closing(sqlite3.connect(db_path)) as connection:
            ledger = BatchLedger.for_query(connection)
            keys.append(ledger.key)
            ledger.apply_once(batch_id, insert(rows))

    options = ForeachBatchSink.options.parse({"function": write_orders}, connector="foreachBatch")

    def run(query_id: str, batch_id: int, ids: list[int]) -> None:
        writer = ForeachBatchSink(options).stream_writer(
            WriteContext(schema=schema, query_id=query_id)
        )
        reader = pa.RecordBatchReader.from_batches(
            schema, [pa.RecordBatch.from_pydict({"id": ids}, schema=schema)]
        )
        writer.commit([writer.part_writer().write(reader, PartContext(batch_id, 0, 1))], batch_id)

    run("query-a", 0, [1])
    run("query-a", 0, [1])  # a restart of the same checkpoint replays batch 0: skipped
    run("query-b", 0, [2])  # another checkpoint (another query id) starts at batch 0 again
    assert keys == ["query-a", "query-a", "query-b"]
    assert stored(db_path) == [(1, 10), (2, 20)]
    assert ledger_rows(db_path) == [("query-a", 0), ("query-b", 0)]


def test_for_query_is_refused_under_a_temporary_checkpoint(db_path: Path) -> None:
    schema = pa.schema([("id", pa.int64())])

    def write_orders(batch: pa.Table, batch_id: int) -> None:
        with closing(sqlite3.connect(db_path)) as connection:
            BatchLedger.for_query(connection).apply_once(batch_id, insert([(1, 1)]))

    options = ForeachBatchSink.options.parse({"function": write_orders}, connector="foreachBatch")
    context = WriteContext(
        schema=schema, query_id="q", query_name="orders", checkpoint_is_temporary=True
    )
    writer = ForeachBatchSink(options).stream_writer(context)
    with pytest.raises(ConfigurationError, match="used by query 'orders', which has no checkpoint"):
        writer.commit([], 0)
    assert stored(db_path) == []
