"""The incremental stream at batch boundaries: ties of the followed column cut by
``maxRowsPerTrigger`` and whole-second timestamps, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

import microbatch as mb
from microbatch_jdbc._incremental import IncrementalColumn

_names = itertools.count()
BASE = dt.datetime(2024, 1, 1)


@pytest.fixture(scope="module")
def session() -> mb.Session:
    return mb.Session()


def fill(url: str, rows: list[dict[str, Any]]) -> None:
    engine = sa.create_engine(url)
    metadata = sa.MetaData()
    table = sa.Table("events", metadata, sa.Column("id", sa.Integer), sa.Column("ts", sa.DateTime))
    metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(table.insert(), rows)
    engine.dispose()


def run(session: mb.Session, url: str, checkpoint: Path) -> tuple[pa.Table, mb.StreamingQuery]:
    name = f"jdbc_ties_{next(_names)}"
    query = (
        session.read_stream.format("jdbc")
        .option("url", url)
        .option("dbtable", "events")
        .option("incrementalColumn", "ts")
        .option("maxRowsPerTrigger", 3)
        .load()
        .write_stream.format("memory")
        .query_name(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(timeout=60)
    assert query.exception() is None, query.exception()
    return session.table(name), query


def check_every_row_once(session: mb.Session, url: str, tmp_path: Path) -> None:
    # two rows per whole second: a limit of 3 cuts through every other tie
    fill(url, [{"id": i, "ts": BASE + dt.timedelta(seconds=i // 2)} for i in range(10)])
    first, query = run(session, url, tmp_path / "cp")
    assert sorted(first.column("id").to_pylist()) == list(range(10))
    assert query.recent_progress[-1]["sources"][0]["endOffset"] == {
        "incrementalColumn": "2024-01-01T00:00:04"
    }
    # a restart after more rows, one of them tied with the last value read
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            sa.text("INSERT INTO events VALUES (10, :ts)"),
            {"ts": BASE + dt.timedelta(seconds=5)},
        )
    engine.dispose()
    second, _ = run(session, url, tmp_path / "cp")
    assert second.column("id").to_pylist() == [10]


def test_whole_second_timestamps_with_ties_on_sqlite(
    session: mb.Session, sqlite_url: str, tmp_path: Path
) -> None:
    check_every_row_once(session, sqlite_url, tmp_path)


def test_whole_second_timestamps_with_ties_on_postgres(
    session: mb.Session, postgres_database: Any, tmp_path: Path
) -> None:
    check_every_row_once(session, postgres_database.url, tmp_path)


def test_a_decimal_offset_is_an_exact_numeric_literal() -> None:
    column = IncrementalColumn("amount", '"amount"', "decimal")
    assert column.literal("1E+2") == "100"
    assert column.literal(column.to_json("12345678901234567890.125")) == (
        "12345678901234567890.125"
    )
