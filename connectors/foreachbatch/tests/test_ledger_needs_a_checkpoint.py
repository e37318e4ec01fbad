"""A BatchLedger inside a query without a checkpointLocation is refused: batch ids restart at 0
on every start there, so the ledger would skip the rows of a new run's batches."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch import BatchLedger, ConfigurationError

pytest.importorskip("microbatch_rate")

INSERT = "INSERT INTO numbers VALUES (?)"


@pytest.fixture
def database(new_database: Callable[[str], Path]) -> Path:
    return new_database("numbers (value INTEGER)")


def writer_into(database: Path, shared: BatchLedger | None = None) -> Any:
    def write(batch: pa.Table, batch_id: int) -> None:
        rows = [(value,) for value in batch.column("value").to_pylist()]
        if shared is not None:
            shared.apply_once(batch_id, lambda c: c.executemany(INSERT, rows))
            return
        with closing(sqlite3.connect(database)) as target:
            BatchLedger(target, key="numbers").apply_once(
                batch_id, lambda c: c.executemany(INSERT, rows)
            )

    return write


@pytest.fixture
def stored(database: Path, select: Callable[[Path, str], list[Any]]) -> Callable[[], list[int]]:
    """The values in ``numbers``, sorted."""
    return lambda: [value for (value,) in select(database, "SELECT value FROM numbers")]


def start(session: mb.Session, function: Any, checkpoint: Path | None) -> mb.StreamingQuery:
    writer = (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", 3)
        .load()
        .write_stream.foreach_batch(function)
        .query_name("numbers")
        .trigger(available_now=True)
    )
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", str(checkpoint))
    return writer.start()


@pytest.fixture
def session() -> Iterator[mb.Session]:
    with mb.Session() as opened:
        yield opened


def test_a_ledger_in_a_query_without_checkpoint_fails_the_query(
    session: mb.Session, database: Path, stored: Callable[[], list[int]]
) -> None:
    query = start(session, writer_into(database), checkpoint=None)
    with pytest.raises(mb.StreamingQueryException) as caught:
        query.await_termination(30)
    cause = caught.value.cause
    assert isinstance(cause, ConfigurationError)
    assert "BatchLedger(key='numbers') is used by query 'numbers'" in str(cause)
    assert "checkpointLocation" in str(cause)
    assert stored() == []  # nothing applied, nothing marked


def test_a_ledger_built_outside_the_function_is_checked_when_used(
    session: mb.Session, database: Path, stored: Callable[[], list[int]]
) -> None:
    with closing(sqlite3.connect(database, check_same_thread=False)) as connection:
        ledger = BatchLedger(connection, key="numbers")  # outside any query: accepted
        query = start(session, writer_into(database, shared=ledger), checkpoint=None)
        with pytest.raises(mb.StreamingQueryException, match="no checkpointLocation"):
            query.await_termination(30)
    assert stored() == []


def test_a_ledger_in_a_query_with_a_checkpoint_applies_each_batch(
    session: mb.Session, database: Path, stored: Callable[[], list[int]], tmp_path: Path
) -> None:
    query = start(session, writer_into(database), checkpoint=tmp_path / "cp")
    assert query.await_termination(30)
    assert query.exception() is None
    assert stored() == list(range(len(stored())))
    assert stored()
