"""The jdbc source's stream through real queries: following inserts, restarts, limits,
available-now, the delay window."""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest

import microbatch as mb

_names = itertools.count()


@pytest.fixture(scope="module")
def session() -> mb.Session:
    return mb.Session()


def create(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("CREATE TABLE events (id int8 PRIMARY KEY, body text)")


def insert(dsn: str, ids: range) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.cursor().executemany(
            "INSERT INTO events VALUES (%s, %s)", [(i, f"event {i}") for i in ids]
        )


def frame(session: mb.Session, url: str, **options: Any) -> mb.StreamFrame:
    reader = session.read_stream.format("jdbc").option("url", url).option("dbtable", "events")
    reader = reader.option("incrementalColumn", "id")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(
    session: mb.Session, url: str, checkpoint: Path, **options: Any
) -> tuple[pa.Table, mb.StreamingQuery]:
    name = f"jdbc_source_run_{next(_names)}"
    query = (
        frame(session, url, **options)
        .write_stream.format("memory")
        .query_name(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(timeout=60)
    assert query.exception() is None, query.exception()
    return session.table(name), query


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def test_a_query_follows_inserts(
    session: mb.Session, postgres_database: Any, tmp_path: Path
) -> None:
    dsn = postgres_database.dsn
    create(dsn)
    insert(dsn, range(10))
    query = (
        frame(session, postgres_database.url, maxRowsPerTrigger=7)
        .write_stream.format("memory")
        .query_name("followed_inserts")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processing_time="0 seconds")
        .start()
    )

    def writer() -> None:
        for n in range(10):
            insert(dsn, range(10 + 5 * n, 15 + 5 * n))
            time.sleep(0.02)

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and session.table("followed_inserts").num_rows < 60:
        assert query.exception() is None
        time.sleep(0.05)
    query.stop()
    assert query.exception() is None
    assert ids(session.table("followed_inserts")) == list(range(60))
    sizes = [p["numInputRows"] for p in query.recent_progress if p["numInputRows"]]
    assert max(sizes) <= 7 and len(sizes) >= 9
    assert query.recent_progress[-1]["sources"][0]["endOffset"] == {"incrementalColumn": 59}


def test_a_restart_does_not_read_again(
    session: mb.Session, postgres_database: Any, tmp_path: Path
) -> None:
    create(postgres_database.dsn)
    insert(postgres_database.dsn, range(6))
    checkpoint = tmp_path / "cp"
    first, _ = run_available_now(session, postgres_database.url, checkpoint, maxRowsPerTrigger=4)
    assert ids(first) == list(range(6))
    insert(postgres_database.dsn, range(6, 9))
    second, query = run_available_now(session, postgres_database.url, checkpoint)
    assert ids(second) == [6, 7, 8]
    assert query.recent_progress[0]["sources"][0]["startOffset"] == {"incrementalColumn": 5}
    third, _ = run_available_now(session, postgres_database.url, checkpoint)
    assert third.num_rows == 0


def test_available_now_stops_at_the_rows_present_at_its_start(
    session: mb.Session, sqlite_url: str, tmp_path: Path
) -> None:
    import sqlite3

    connection = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    with connection:
        connection.execute("CREATE TABLE events (id INTEGER, body TEXT)")
        connection.executemany("INSERT INTO events VALUES (?, ?)", [(i, "x") for i in range(20)])
    connection.close()
    table, query = run_available_now(
        session, sqlite_url, tmp_path / "cp", maxRowsPerTrigger=6, startingValue=4
    )
    assert ids(table) == list(range(5, 20))
    assert [p["numInputRows"] for p in query.recent_progress if p["numInputRows"]] == [6, 6, 3]


def test_the_delay_window_holds_back_recent_rows(
    session: mb.Session, postgres_database: Any, tmp_path: Path
) -> None:
    with psycopg.connect(postgres_database.dsn, autocommit=True) as connection:
        connection.execute("CREATE TABLE events (id int8, at timestamptz)")
        now = dt.datetime.now(dt.UTC)
        connection.cursor().executemany(
            "INSERT INTO events VALUES (%s, %s)",
            [(1, now - dt.timedelta(hours=2)), (2, now - dt.timedelta(minutes=30)), (3, now)],
        )
    name = f"jdbc_delay_{next(_names)}"
    query = (
        session.read_stream.format("jdbc")
        .option("url", postgres_database.url)
        .option("dbtable", "events")
        .option("incrementalColumn", "at")
        .option("incrementalDelay", "1 hour")
        .load()
        .write_stream.format("memory")
        .query_name(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(timeout=60)
    assert query.exception() is None
    assert session.table(name).column("id").to_pylist() == [1]


HOSTILE = 'at%s :x "; DROP TABLE keep; --'


def test_hostile_incremental_column_and_a_query_with_percent_signs(
    session: mb.Session, postgres_database: Any, tmp_path: Path
) -> None:
    quoted = '"' + HOSTILE.replace('"', '""') + '"'
    with psycopg.connect(postgres_database.dsn, autocommit=True) as connection:
        connection.execute("CREATE TABLE keep (a int)")
        connection.execute(f"CREATE TABLE events (id int8, {quoted} int8, body text)")
        connection.execute(
            "INSERT INTO events SELECT g, g * 10, 'row ' || g || ' 100%' "
            "FROM generate_series(1, 9) g"
        )
    name = f"jdbc_hostile_{next(_names)}"
    query = (
        session.read_stream.format("jdbc")
        .option("url", postgres_database.url)
        .option("query", "SELECT * FROM events WHERE body LIKE '%100%%' AND id::int8 > 2")
        .option("incrementalColumn", HOSTILE)
        .option("maxRowsPerTrigger", 4)
        .load()
        .write_stream.format("memory")
        .query_name(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(timeout=60)
    assert query.exception() is None, query.exception()
    assert sorted(session.table(name).column(HOSTILE).to_pylist()) == [i * 10 for i in range(3, 10)]
    with psycopg.connect(postgres_database.dsn) as connection:
        assert connection.execute("SELECT count(*) FROM keep").fetchone() == (0,)


def test_rows_without_a_value_are_counted_and_logged(
    session: mb.Session, sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    connection = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    with connection:
        connection.execute("CREATE TABLE events (id INTEGER, body TEXT)")
        connection.executemany(
            "INSERT INTO events VALUES (?, ?)", [(1, "a"), (None, "lost"), (2, "b"), (None, "x")]
        )
    connection.close()
    table, query = run_available_now(session, sqlite_url, tmp_path / "cp")
    assert ids(table) == [1, 2]
    assert query.last_progress["sources"][0]["metrics"]["rowsWithoutIncrementalValue"] == 2
    assert "2 rows of" in caplog.text and "the stream never reads them" in caplog.text
