"""The test kit's source suite against the jdbc source's stream (incrementalColumn), on
PostgreSQL (ADBC reads, a timestamp column) and on SQLite (the generic path, integers)."""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import Any

import psycopg
import pytest

from microbatch import StreamReader
from microbatch_jdbc.source import JdbcSource
from microbatch_testkit import SourceContract

ROWS = 5  # per produce(): more than maxRowsPerTrigger


class TestJdbcSourceContractSqlite(SourceContract):
    source_class = JdbcSource

    @pytest.fixture(autouse=True)
    def _table(self, sqlite_url: str) -> None:
        self.url = sqlite_url
        self.next_id = 0
        with self._connect() as connection:
            connection.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, body TEXT)")
        self._insert()

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.url.removeprefix("sqlite:///"))

    def _insert(self) -> None:
        rows = [(self.next_id + i, f"event {self.next_id + i}") for i in range(ROWS)]
        connection = self._connect()
        with connection:
            connection.executemany("INSERT INTO events VALUES (?, ?)", rows)
        connection.close()
        self.next_id += ROWS

    def make_options(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "dbtable": "events",
            "incrementalColumn": "id",
            "maxRowsPerTrigger": 3,
        }

    def produce(self, reader: StreamReader) -> None:
        self._insert()

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        base = self.make_options()
        return [
            ({**base, "maxRowsPerTrigger": 0}, "must be at least 1"),
            ({**base, "incrementalColumn": "nope"}, "no column 'nope'"),
            ({**base, "incrementalColumn": "body"}, "must be a numeric, date or timestamp"),
            ({**base, "startingValue": "soon"}, "is not a value of column 'id'"),
            ({**base, "incrementalDelay": "5 seconds"}, "needs a timestamp incrementalColumn"),
            ({**base, "query": "SELECT 1"}, "Both 'dbtable' and 'query'"),
        ]


START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


class TestJdbcSourceContractPostgres(SourceContract):
    source_class = JdbcSource

    @pytest.fixture(autouse=True)
    def _table(self, postgres_database: Any) -> None:
        self.database = postgres_database
        self.next_id = 0
        with psycopg.connect(postgres_database.dsn, autocommit=True) as connection:
            connection.execute(
                "CREATE TABLE events (id int8, at timestamptz NOT NULL, amount numeric(9, 3))"
            )
            connection.execute("CREATE INDEX ON events (at)")
        self._insert()

    def _insert(self) -> None:
        rows = [
            (i, START + dt.timedelta(seconds=i, microseconds=i * 7), i / 8)
            for i in range(self.next_id, self.next_id + ROWS)
        ]
        with psycopg.connect(self.database.dsn, autocommit=True) as connection:
            connection.cursor().executemany("INSERT INTO events VALUES (%s, %s, %s)", rows)
        self.next_id += ROWS

    def make_options(self) -> dict[str, Any]:
        return {
            "url": self.database.url,
            "dbtable": "events",
            "incrementalColumn": "at",
            "maxRowsPerTrigger": 3,
        }

    def produce(self, reader: StreamReader) -> None:
        self._insert()

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        base = self.make_options()
        return [
            ({**base, "startingValue": "later"}, "is not a value of column 'at'"),
            ({**base, "dbtable": "", "query": ""}, "Option 'dbtable' can not be empty."),
        ]
