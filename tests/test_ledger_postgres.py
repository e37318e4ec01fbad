"""BatchLedger (microbatch.ledger) against a real PostgreSQL server through psycopg.

The server comes from the test kit's ``postgres_database`` fixture (a new database per test,
from the provider ``MICROBATCH_SERVICES`` selects); without one the tests are skipped, or fail
under ``MICROBATCH_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from microbatch import BatchLedger, ConfigurationError
from microbatch_testkit.services import PostgresDatabase

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def dsn(postgres_database: PostgresDatabase) -> str:
    return postgres_database.dsn


@pytest.fixture
def names(dsn: str) -> Iterator[tuple[str, str]]:
    ledger, orders = "ledger", "orders"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE {orders} (id BIGINT PRIMARY KEY, amount BIGINT)")
    yield ledger, orders


def stored(dsn: str, orders: str) -> list[tuple[int, int]]:
    with psycopg.connect(dsn) as fresh:
        return sorted(fresh.execute(f"SELECT id, amount FROM {orders}").fetchall())


def insert(orders: str, rows: list[tuple[int, int]]) -> Any:
    def run(connection: Any) -> None:
        with connection.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {orders} (id, amount) VALUES (%s, %s)", rows)

    return run


def test_replayed_batch_is_applied_once(names: tuple[str, str], dsn: str) -> None:
    ledger_table, orders = names
    with psycopg.connect(dsn) as connection:
        ledger = BatchLedger(connection, key="orders", table=ledger_table)
        assert ledger.paramstyle == "pyformat"
        assert ledger.apply_once(3, insert(orders, [(1, 10), (2, 20)])) is True
        assert ledger.apply_once(3, insert(orders, [(1, 10), (2, 20)])) is False
        assert ledger.last_applied() == 3
    with psycopg.connect(dsn) as other:
        assert BatchLedger(other, key="orders", table=ledger_table).is_applied(3)
    assert stored(dsn, orders) == [(1, 10), (2, 20)]


def test_failure_rolls_back_rows_and_mark(names: tuple[str, str], dsn: str) -> None:
    ledger_table, orders = names
    with psycopg.connect(dsn) as connection:
        ledger = BatchLedger(connection, key="orders", table=ledger_table)

        def half_then_fail(conn: Any) -> None:
            insert(orders, [(1, 10)])(conn)
            raise RuntimeError("lost the network")

        with pytest.raises(RuntimeError, match="lost the network"):
            ledger.apply_once(0, half_then_fail)
        assert not ledger.is_applied(0)
        assert ledger.apply_once(0, insert(orders, [(1, 10)]))
    assert stored(dsn, orders) == [(1, 10)]


def test_a_concurrent_writer_that_applied_first_wins(names: tuple[str, str], dsn: str) -> None:
    ledger_table, orders = names
    with psycopg.connect(dsn) as ours, psycopg.connect(dsn) as theirs:
        our_ledger = BatchLedger(ours, key="orders", table=ledger_table)
        their_ledger = BatchLedger(theirs, key="orders", table=ledger_table)

        def they_apply_first(conn: Any) -> None:
            assert their_ledger.apply_once(4, insert(orders, [(4, 40)]))
            with conn.cursor() as cursor:
                cursor.execute(f"INSERT INTO {orders} (id, amount) VALUES (5, 50)")

        assert our_ledger.apply_once(4, they_apply_first) is False
    assert stored(dsn, orders) == [(4, 40)]


def test_mark_applied_commits_with_the_callers_transaction(
    names: tuple[str, str], dsn: str
) -> None:
    ledger_table, orders = names
    with psycopg.connect(dsn) as connection:
        ledger = BatchLedger(connection, key="orders", table=ledger_table)
        insert(orders, [(7, 70)])(connection)
        ledger.mark_applied(7)
        connection.rollback()
        assert not ledger.is_applied(7)
        insert(orders, [(7, 70)])(connection)
        ledger.mark_applied(7)
        connection.commit()
    assert stored(dsn, orders) == [(7, 70)]


def test_autocommit_connections_are_refused(names: tuple[str, str], dsn: str) -> None:
    ledger_table, orders = names
    with psycopg.connect(dsn, autocommit=True) as connection:
        ledger = BatchLedger(connection, key="orders", table=ledger_table)
        with pytest.raises(ConfigurationError, match="autocommit mode"):
            ledger.apply_once(0, insert(orders, [(1, 1)]))
    assert stored(dsn, orders) == []
