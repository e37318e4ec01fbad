"""BatchLedger (microbatch.ledger) against real SQLite database files."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch import BatchLedger, ConfigurationError, WriteContext
from microbatch.ledger import _render, detect_paramstyle, query_scope, running_query


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    path = tmp_path / "target.db"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE orders (id INTEGER, amount INTEGER)")
        connection.commit()
    return path


@pytest.fixture
def connection(db_path: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(db_path)) as opened:
        yield opened


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


def test_creates_the_ledger_table(db_path: Path, connection: sqlite3.Connection) -> None:
    BatchLedger(connection, key="orders")
    with closing(sqlite3.connect(db_path)) as fresh:
        columns = [row[1] for row in fresh.execute("PRAGMA table_info(microbatch_ledger)")]
        keys = [row[1] for row in fresh.execute("PRAGMA table_info(microbatch_ledger)") if row[5]]
    assert columns == ["query_key", "batch_id", "applied_at"]
    assert keys == ["query_key", "batch_id"]


def test_apply_once_writes_rows_and_mark_together(
    db_path: Path, connection: sqlite3.Connection
) -> None:
    ledger = BatchLedger(connection, key="orders")
    assert ledger.last_applied() is None
    assert ledger.apply_once(0, insert([(1, 10), (2, 20)])) is True
    assert stored(db_path) == [(1, 10), (2, 20)]
    assert ledger_rows(db_path) == [("orders", 0)]
    assert ledger.is_applied(0)
    assert not ledger.is_applied(1)
    assert ledger.last_applied() == 0


def test_replayed_batch_is_applied_once(db_path: Path, connection: sqlite3.Connection) -> None:
    ledger = BatchLedger(connection, key="orders")
    calls: list[int] = []

    def write(conn: Any) -> None:
        calls.append(3)
        insert([(3, 30)])(conn)

    assert ledger.apply_once(3, write) is True
    assert ledger.apply_once(3, write) is False  # the replay
    assert calls == [3]
    assert stored(db_path) == [(3, 30)]


def test_replay_after_reconnecting_is_skipped(db_path: Path) -> None:
    with closing(sqlite3.connect(db_path)) as first:
        assert BatchLedger(first, key="orders").apply_once(3, insert([(3, 30)]))
    with closing(sqlite3.connect(db_path)) as second:
        ledger = BatchLedger(second, key="orders")
        assert ledger.apply_once(3, insert([(3, 30)])) is False
        assert ledger.last_applied() == 3
    assert stored(db_path) == [(3, 30)]


def test_failure_inside_the_batch_keeps_nothing(
    db_path: Path, connection: sqlite3.Connection
) -> None:
    ledger = BatchLedger(connection, key="orders")

    def half_then_fail(conn: Any) -> None:
        insert([(1, 10)])(conn)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        ledger.apply_once(0, half_then_fail)
    assert stored(db_path) == []
    assert not ledger.is_applied(0)
    assert ledger.apply_once(0, insert([(1, 10)])) is True  # the retry applies it
    assert stored(db_path) == [(1, 10)]


def test_a_crash_before_commit_loses_both_rows_and_mark(db_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, sqlite3
        from microbatch import BatchLedger
        connection = sqlite3.connect({str(db_path)!r})
        ledger = BatchLedger(connection, key="orders")
        connection.execute("INSERT INTO orders VALUES (1, 10)")
        ledger.mark_applied(0)
        os._exit(9)  # killed between the writes and the commit
        """
    )
    result = subprocess.run([sys.executable, "-c", script], check=False, timeout=60)
    assert result.returncode == 9
    assert stored(db_path) == []
    assert ledger_rows(db_path) == []
    with closing(sqlite3.connect(db_path)) as connection:
        assert BatchLedger(connection, key="orders").apply_once(0, insert([(1, 10)]))
    assert stored(db_path) == [(1, 10)]


def test_mark_applied_joins_the_callers_transaction(
    db_path: Path, connection: sqlite3.Connection
) -> None:
    ledger = BatchLedger(connection, key="orders")
    connection.execute("INSERT INTO orders VALUES (5, 50)")
    ledger.mark_applied(5)
    assert ledger.is_applied(5)  # visible inside the transaction
    assert ledger_rows(db_path) == []  # not to others before commit
    connection.rollback()
    assert not ledger.is_applied(5)
    connection.execute("INSERT INTO orders VALUES (5, 50)")
    ledger.mark_applied(5)
    connection.commit()
    assert ledger_rows(db_path) == [("orders", 5)]
    assert stored(db_path) == [(5, 50)]


def test_marking_twice_violates_the_primary_key(connection: sqlite3.Connection) -> None:
    ledger = BatchLedger(connection, key="orders")
    ledger.mark_applied(1)
    connection.commit()
    with pytest.raises(sqlite3.IntegrityError):
        ledger.mark_applied(1)


def test_a_concurrent_writer_that_applied_first_wins(
    db_path: Path, connection: sqlite3.Connection
) -> None:
    ours = BatchLedger(connection, key="orders")

    def other_writer_then_us(conn: Any) -> None:
        # another process applies batch 4 after our check and before our mark
        with closing(sqlite3.connect(db_path)) as theirs:
            assert BatchLedger(theirs, key="orders").apply_once(4, insert([(4, 40)]))
        insert([(4, 40)])(conn)

    assert ours.apply_once(4, other_writer_then_us) is False
    assert stored(db_path) == [(4, 40)]
    assert ledger_rows(db_path) == [("orders", 4)]


def test_keys_are_independent(db_path: Path, connection: sqlite3.Connection) -> None:
    orders = BatchLedger(connection, key="orders")
    refunds = BatchLedger(connection, key="refunds")
    assert orders.apply_once(0, insert([(1, 1)]))
    assert refunds.apply_once(0, insert([(2, 2)]))
    assert orders.last_applied() == 0
    assert refunds.last_applied() == 0
    assert ledger_rows(db_path) == [("orders", 0), ("refunds", 0)]


def test_last_applied_is_the_highest_batch_id(connection: sqlite3.Connection) -> None:
    ledger = BatchLedger(connection, key="orders")
    for batch_id in (0, 2, 11, 7):
        ledger.apply_once(batch_id, lambda conn: None)
    assert ledger.last_applied() == 11


def test_reset_forgets_only_its_key(db_path: Path, connection: sqlite3.Connection) -> None:
    orders = BatchLedger(connection, key="orders")
    other = BatchLedger(connection, key="other")
    orders.apply_once(0, lambda conn: None)
    other.apply_once(0, lambda conn: None)
    orders.reset()
    assert orders.last_applied() is None
    assert ledger_rows(db_path) == [("other", 0)]


def test_custom_schema_qualified_table(tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / "main.db")) as connection:
        connection.execute(f"ATTACH DATABASE '{tmp_path / 'etl.db'}' AS etl")
        ledger = BatchLedger(connection, key="k", table="etl.ledger")
        assert ledger.apply_once(1, lambda conn: None)
    with closing(sqlite3.connect(tmp_path / "etl.db")) as fresh:
        assert fresh.execute("SELECT query_key, batch_id FROM ledger").fetchall() == [("k", 1)]


@pytest.mark.parametrize("table", ["ledger; DROP TABLE orders", "a.b.c", "1abc", ""])
def test_table_names_must_be_identifiers(connection: sqlite3.Connection, table: str) -> None:
    with pytest.raises(ConfigurationError, match="not a plain SQL identifier"):
        BatchLedger(connection, key="k", table=table)


def test_key_must_be_a_non_empty_string(connection: sqlite3.Connection) -> None:
    with pytest.raises(ConfigurationError, match="non-empty string key"):
        BatchLedger(connection, key="")


@pytest.mark.parametrize("batch_id", [-1, True, 1.0, "3"])
def test_batch_ids_must_be_non_negative_ints(connection: sqlite3.Connection, batch_id: Any) -> None:
    ledger = BatchLedger(connection, key="k")
    with pytest.raises(ValueError, match="batch_id must be a non-negative int"):
        ledger.apply_once(batch_id, lambda conn: None)


def test_autocommit_connections_are_refused(db_path: Path) -> None:
    with closing(sqlite3.connect(db_path, isolation_level=None)) as connection:
        ledger = BatchLedger(connection, key="orders")
        with pytest.raises(ConfigurationError, match="autocommit mode"):
            ledger.apply_once(0, insert([(1, 1)]))
        ledger.mark_applied(0)  # the caller may still manage transactions itself
    assert stored(db_path) == []


def test_paramstyle_comes_from_the_driver(connection: sqlite3.Connection) -> None:
    assert detect_paramstyle(connection) == "qmark"
    assert BatchLedger(connection, key="k").paramstyle == "qmark"
    with pytest.raises(ConfigurationError, match="Cannot tell the parameter style"):
        detect_paramstyle(object())
    with pytest.raises(ConfigurationError, match="Unknown DB-API paramstyle 'dollar'"):
        BatchLedger(connection, key="k", paramstyle="dollar")


@pytest.mark.parametrize(
    ("style", "sql", "values"),
    [
        ("qmark", "a = ? AND b = ?", ("x", 1)),
        ("numeric", "a = :1 AND b = :2", ("x", 1)),
        ("named", "a = :query_key AND b = :batch_id", {"query_key": "x", "batch_id": 1}),
        ("format", "a = %s AND b = %s", ("x", 1)),
        ("pyformat", "a = %(query_key)s AND b = %(batch_id)s", {"query_key": "x", "batch_id": 1}),
    ],
)
def test_placeholders_for_every_paramstyle(style: str, sql: str, values: Any) -> None:
    assert _render("a = {} AND b = {}", (("query_key", "x"), ("batch_id", 1)), style) == (
        sql,
        values,
    )


@pytest.mark.parametrize("style", ["qmark", "numeric", "named"])
def test_sqlite_runs_the_ledger_in_each_style_it_supports(
    db_path: Path, connection: sqlite3.Connection, style: str
) -> None:
    ledger = BatchLedger(connection, key=style, paramstyle=style)
    assert ledger.apply_once(2, insert([(2, 2)]))
    assert not ledger.apply_once(2, insert([(2, 2)]))
    assert ledger.last_applied() == 2
    assert stored(db_path) == [(2, 2)]


KILLED_AT_COMMIT = textwrap.dedent(
    """
    import sqlite3
    import sys

    from microbatch import BatchLedger
    from microbatch_testkit.crash import crash_point, crash_target


    class KilledAtCommit(sqlite3.Connection):
        '''Killed (SIGKILL) when the batch named by MICROBATCH_CRASH_AT is about to commit:
        its rows and its ledger row are written in the open transaction, neither committed.'''

        batch_id = -1

        def commit(self):
            if self.in_transaction and crash_target() == ("mid_sink", self.batch_id):
                rows = self.execute("SELECT COUNT(*) FROM orders").fetchone()[0]
                marks = [r[0] for r in self.execute("SELECT batch_id FROM microbatch_ledger")]
                print(f"in transaction: {rows} rows, ledger {sorted(marks)}", flush=True)
            crash_point("mid_sink", self.batch_id)
            super().commit()


    connection = sqlite3.connect(sys.argv[1], factory=KilledAtCommit)
    ledger = BatchLedger(connection, key="orders", paramstyle="qmark")
    for batch_id in range(3):
        connection.batch_id = batch_id
        rows = [(batch_id * 100 + i, i) for i in range(50)]
        insert = lambda c: c.executemany("INSERT INTO orders VALUES (?, ?)", rows)
        print(batch_id, ledger.apply_once(batch_id, insert), flush=True)
    """
)


def test_sigkill_inside_the_transaction_applies_nothing_of_the_batch(
    db_path: Path, tmp_path: Path
) -> None:
    from microbatch_testkit import crash

    script = tmp_path / "apply_batches.py"
    script.write_text(KILLED_AT_COMMIT)
    killed = crash.run_until_crash(script, "mid_sink", 1, args=[str(db_path)])
    # batch 1's rows and ledger row were in the transaction when the process was killed...
    assert killed.stdout.splitlines() == ["0 True", "in transaction: 100 rows, ledger [0, 1]"]
    # ...and neither survived it: only batch 0 is applied
    assert stored(db_path) == [(i, i) for i in range(50)]
    assert ledger_rows(db_path) == [("orders", 0)]
    restarted = crash.run_to_completion(script, args=[str(db_path)])
    assert restarted.stdout.splitlines() == ["0 False", "1 True", "2 True"]
    expected = sorted((batch * 100 + i, i) for batch in range(3) for i in range(50))
    assert stored(db_path) == expected  # every batch once
    assert ledger_rows(db_path) == [("orders", 0), ("orders", 1), ("orders", 2)]


def test_for_query_keys_by_the_query_id(db_path: Path, connection: sqlite3.Connection) -> None:
    context = WriteContext(schema=pa.schema([("id", pa.int64())]), query_id="3f2a-query")
    ledger = BatchLedger.for_query(connection, context)
    assert ledger.key == "3f2a-query"
    assert ledger.apply_once(0, insert([(1, 1)]))
    assert not BatchLedger.for_query(connection, context).apply_once(0, insert([(1, 1)]))
    assert ledger_rows(db_path) == [("3f2a-query", 0)]
    assert stored(db_path) == [(1, 1)]


def test_for_query_needs_a_query(connection: sqlite3.Connection) -> None:
    with pytest.raises(ConfigurationError, match="needs the query's WriteContext"):
        BatchLedger.for_query(connection)
    with pytest.raises(ConfigurationError, match="needs the query's WriteContext"):
        BatchLedger.for_query(connection, WriteContext(schema=pa.schema([])))


def test_for_query_refuses_a_temporary_checkpoint(
    db_path: Path, connection: sqlite3.Connection
) -> None:
    context = WriteContext(
        schema=pa.schema([]), query_id="q", query_name="orders", checkpoint_is_temporary=True
    )
    with pytest.raises(ConfigurationError, match="query 'orders', which has no checkpointLocation"):
        BatchLedger.for_query(connection, context)
    assert ledger_rows_or_none(db_path) is None  # not even the table was made


def test_a_ledger_used_inside_a_query_scope_of_a_temporary_checkpoint_is_refused(
    connection: sqlite3.Connection,
) -> None:
    ledger = BatchLedger(connection, key="orders")  # outside any query: accepted
    context = WriteContext(schema=pa.schema([]), query_id="q", checkpoint_is_temporary=True)
    with query_scope(context), pytest.raises(ConfigurationError, match="no checkpointLocation"):
        ledger.apply_once(0, insert([(1, 1)]))
    with query_scope(WriteContext(schema=pa.schema([]), query_id="q")):
        assert ledger.apply_once(0, insert([(1, 1)]))
        assert BatchLedger.for_query(connection).key == "q"


def test_running_query_is_the_context_of_the_enclosing_scope() -> None:
    assert running_query() is None
    context = WriteContext(schema=pa.schema([]), query_id="q")
    with query_scope(context):
        assert running_query() is context
    assert running_query() is None


def ledger_rows_or_none(db_path: Path) -> list[Any] | None:
    with closing(sqlite3.connect(db_path)) as fresh:
        found = fresh.execute(
            "SELECT name FROM sqlite_master WHERE name = 'microbatch_ledger'"
        ).fetchall()
        return ledger_rows(db_path) if found else None
