"""BatchLedger used by foreach_batch functions: a replayed batch is applied once."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch import BatchLedger, ConfigurationError, PartContext, StreamWriter, WriteContext
from microbatch_foreachbatch import ForeachBatchSink

SCHEMA = pa.schema([("id", pa.int64())])


@pytest.fixture
def db_path(new_database: Callable[[str], Path]) -> Path:
    return new_database("orders (id INTEGER, amount INTEGER)")


@pytest.fixture
def stored(db_path: Path, select: Callable[[Path, str], list[Any]]) -> Callable[[], list[Any]]:
    """The rows of ``orders``."""
    return lambda: select(db_path, "SELECT id, amount FROM orders")


@pytest.fixture
def ledger_rows(db_path: Path, select: Callable[[Path, str], list[Any]]) -> Callable[[], list[Any]]:
    """The rows of the ledger."""
    return lambda: select(db_path, "SELECT query_key, batch_id FROM microbatch_ledger")


def insert(rows: list[tuple[int, int]]) -> Any:
    def run(connection: Any) -> None:
        connection.executemany("INSERT INTO orders (id, amount) VALUES (?, ?)", rows)

    return run


def commit_one_part(writer: StreamWriter, batch_id: int, ids: list[int]) -> None:
    """Batch ``batch_id`` of the rows ``id`` = ``ids``, written as one part and committed."""
    reader = pa.RecordBatchReader.from_batches(
        SCHEMA, [pa.RecordBatch.from_pydict({"id": ids}, schema=SCHEMA)]
    )
    writer.commit([writer.part_writer().write(reader, PartContext(batch_id, 0, 1))], batch_id)


def test_foreach_batch_with_the_ledger_applies_a_replayed_batch_once(
    db_path: Path, stored: Callable[[], list[Any]], ledger_rows: Callable[[], list[Any]]
) -> None:

    def write_orders(batch: pa.Table, batch_id: int) -> None:
        rows = [(row["id"], row["id"] * 10) for row in batch.to_pylist()]
        with closing(sqlite3.connect(db_path)) as connection:
            BatchLedger(connection, key="orders-to-db").apply_once(batch_id, insert(rows))

    options = ForeachBatchSink.options.parse({"function": write_orders}, connector="foreachBatch")
    sink = ForeachBatchSink(options).stream_writer(WriteContext(schema=SCHEMA))

    def run_batch(batch_id: int, ids: list[int]) -> None:
        commit_one_part(sink, batch_id, ids)

    run_batch(0, [1, 2])
    run_batch(1, [3])
    run_batch(1, [3])  # the engine replays batch 1 after a crash before its commit log entry
    run_batch(2, [4])
    assert stored() == [(1, 10), (2, 20), (3, 30), (4, 40)]
    assert ledger_rows() == [("orders-to-db", 0), ("orders-to-db", 1), ("orders-to-db", 2)]


def test_for_query_inside_the_function_keys_the_ledger_by_the_query_id(
    db_path: Path, stored: Callable[[], list[Any]], ledger_rows: Callable[[], list[Any]]
) -> None:
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
            WriteContext(schema=SCHEMA, query_id=query_id)
        )
        commit_one_part(writer, batch_id, ids)

    run("query-a", 0, [1])
    run("query-a", 0, [1])  # a restart of the same checkpoint replays batch 0: skipped
    run("query-b", 0, [2])  # another checkpoint (another query id) starts at batch 0 again
    assert keys == ["query-a", "query-a", "query-b"]
    assert stored() == [(1, 10), (2, 20)]
    assert ledger_rows() == [("query-a", 0), ("query-b", 0)]


def test_for_query_is_refused_under_a_temporary_checkpoint(
    db_path: Path, stored: Callable[[], list[Any]]
) -> None:

    def write_orders(batch: pa.Table, batch_id: int) -> None:
        with closing(sqlite3.connect(db_path)) as connection:
            BatchLedger.for_query(connection).apply_once(batch_id, insert([(1, 1)]))

    options = ForeachBatchSink.options.parse({"function": write_orders}, connector="foreachBatch")
    context = WriteContext(
        schema=SCHEMA, query_id="q", query_name="orders", checkpoint_is_temporary=True
    )
    writer = ForeachBatchSink(options).stream_writer(context)
    with pytest.raises(ConfigurationError, match="used by query 'orders', which has no checkpoint"):
        writer.commit([], 0)
    assert stored() == []
