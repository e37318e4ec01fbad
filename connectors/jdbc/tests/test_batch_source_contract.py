"""The ``jdbc`` source's batch read (``streaming=False``: ``dbtable``/``query`` with
``partitionColumn`` ranges) passes the testkit's batch source suite on SQLite and PostgreSQL.

The table holds ids 1..40 and a NULL id (which Spark's stride puts in the first range);
``numPartitions=4`` over ``[1, 40]`` makes four splits; the unpartitioned read is the same
table without ``partitionColumn``.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from microbatch_jdbc.source import JdbcSource
from microbatch_testkit.batch_source import BatchSourceContract

ROWS = [{"id": i, "name": f"row {i}"} for i in range(1, 41)] + [{"id": None, "name": "null"}]


def fill(url: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("CREATE TABLE items (id BIGINT, name TEXT)"))
            connection.execute(sa.text("INSERT INTO items VALUES (:id, :name)"), ROWS)
    finally:
        engine.dispose()


class JdbcBatchSuite(BatchSourceContract):
    __test__ = False
    source_class = JdbcSource

    @property
    def url(self) -> str:
        raise NotImplementedError

    def unpartitioned_options(self) -> dict[str, Any]:
        return {"url": self.url, "dbtable": "items"}

    def make_options(self) -> dict[str, Any]:
        return {
            **self.unpartitioned_options(),
            "partitionColumn": "id",
            "lowerBound": "1",
            "upperBound": "40",
            "numPartitions": "4",
        }

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [({**self.unpartitioned_options(), "partitionColumn": "id"}, "lowerBound")]


class TestSqliteBatchSourceContract(JdbcBatchSuite):
    @pytest.fixture(autouse=True)
    def _table(self) -> None:
        fill(self.url)

    @property
    def url(self) -> str:
        return f"sqlite:///{self.tmp_path / 'source.db'}"


class TestPostgresBatchSourceContract(JdbcBatchSuite):
    @pytest.fixture(autouse=True)
    def _table(self, postgres_database: Any) -> None:
        self.database = postgres_database
        fill(self.url)

    @property
    def url(self) -> str:
        return str(self.database.url)


class TestSqliteQueryBatchSourceContract(TestSqliteBatchSourceContract):
    """A subquery: partitioned as ``dbtable='(SELECT ...) AS q'`` (Spark refuses ``query`` with
    ``partitionColumn``), compared with the unpartitioned ``query``."""

    def unpartitioned_options(self) -> dict[str, Any]:
        return {"url": self.url, "query": "SELECT id, name FROM items"}

    def make_options(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "dbtable": "(SELECT id, name FROM items) AS q",
            "partitionColumn": "id",
            "lowerBound": "1",
            "upperBound": "40",
            "numPartitions": "4",
        }
