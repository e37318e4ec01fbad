"""PostgreSQL from the test kit's service fixtures, through SQLAlchemy and psycopg."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import psycopg
import pytest
import sqlalchemy as sa

from microbatch_testkit.services import PostgresDatabase, PostgresService

ROWS = [
    {"id": 1, "name": "ascii", "amount": Decimal("10.50"), "at": dt.datetime(2024, 1, 2, 3, 4, 5)},
    {"id": 2, "name": "ünïcödé ✓", "amount": Decimal("-0.01"), "at": dt.datetime(1999, 12, 31)},
    {"id": 3, "name": "", "amount": None, "at": None},
]


def _table(metadata: sa.MetaData) -> sa.Table:
    return sa.Table(
        "orders",
        metadata,
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("amount", sa.Numeric(12, 2)),
        sa.Column("at", sa.DateTime(timezone=True)),
    )


def test_sql_round_trip_with_a_rolled_back_transaction(postgres_database: PostgresDatabase) -> None:
    engine = sa.create_engine(postgres_database.url)
    metadata = sa.MetaData()
    orders = _table(metadata)
    utc = dt.UTC
    rows = [{**row, "at": row["at"] and row["at"].replace(tzinfo=utc)} for row in ROWS]
    try:
        metadata.create_all(engine)
        with engine.begin() as connection:
            connection.execute(sa.insert(orders), rows)

        with pytest.raises(RuntimeError, match="changed my mind"), engine.begin() as connection:
            connection.execute(sa.insert(orders), [{"id": 4, "name": "rolled back"}])
            connection.execute(sa.update(orders).where(orders.c.id == 1).values(name="gone"))
            raise RuntimeError("changed my mind")

        with engine.connect() as connection:
            connection.execute(sa.delete(orders))
            connection.rollback()  # an explicit rollback undoes the delete as well
            stored = connection.execute(sa.select(orders).order_by(orders.c.id)).mappings().all()
        assert [dict(row) for row in stored] == rows
        assert engine.dialect.driver == "psycopg"
    finally:
        engine.dispose()

    # The same database through psycopg directly.
    with psycopg.connect(postgres_database.dsn) as connection:
        count = connection.execute("SELECT count(*), current_database() FROM orders").fetchone()
    assert count == (3, postgres_database.name)


def test_each_database_is_separate(
    postgres_service: PostgresService, postgres_database: PostgresDatabase
) -> None:
    other = postgres_service.create_database(hint="other")
    try:
        for database, value in ((postgres_database, "mine"), (other, "theirs")):
            with psycopg.connect(database.dsn) as connection:
                connection.execute("CREATE TABLE marker (value text)")
                connection.execute("INSERT INTO marker VALUES (%s)", (value,))
        with psycopg.connect(postgres_database.dsn) as connection:
            assert connection.execute("SELECT value FROM marker").fetchall() == [("mine",)]
        held_open = psycopg.connect(other.dsn)  # dropping ends open sessions
    finally:
        postgres_service.drop_database(other.name)
    assert _is_dead(held_open)
    with psycopg.connect(postgres_service.dsn) as admin:
        names = {row[0] for row in admin.execute("SELECT datname FROM pg_database")}
    assert other.name not in names and postgres_database.name in names


def _is_dead(connection: psycopg.Connection) -> bool:
    try:
        connection.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    finally:
        connection.close()
    return False
