"""The ``jdbc`` sink passes the testkit's sink suite in append and complete output mode, on
SQLite (the generic INSERT path) and on a real PostgreSQL (binary COPY).

Contents are read back with a fresh SQLAlchemy engine; timestamps with a zone come back in UTC
(the same instants), lists and structs as the JSON they are stored as.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from microbatch import OutputMode, StreamWriter
from microbatch_jdbc.sink import JdbcSink
from microbatch_testkit import SinkContract

sys.path.insert(0, str(Path(__file__).parent))
from _jdbc_sink_testing import (
    FewCommitKills,
    OnPostgres,
    OnSqlite,
    as_stored,
    read_table,
    sqlite_stored,
)

TABLE = "events"


class JdbcSinkSuite(FewCommitKills, SinkContract):
    """The sink over table ``events`` of a database given by :attr:`url`."""

    __test__ = False
    sink_class = JdbcSink

    @property
    def url(self) -> str:
        raise NotImplementedError

    def make_options(self) -> dict[str, Any]:
        return {"url": self.url, "dbtable": TABLE}

    def expected_contents(self, committed: pa.Table) -> pa.Table:
        return committed.cast(as_stored(committed.schema))

    def read_back(self, writer: StreamWriter) -> pa.Table:
        return read_table(self.url, TABLE, self.input_schema())

    def build(self, **kwargs: Any) -> StreamWriter:
        # update output mode is upsert's (mode=upsert with keys)
        if kwargs.get("output_mode") == OutputMode.UPDATE and kwargs.get("options") is None:
            kwargs["options"] = {**self.make_options(), "mode": "upsert", "keys": "id"}
        return super().build(**kwargs)

    def expected_update_contents(self, batches: list[pa.Table]) -> pa.Table:
        return pa.concat_tables(batches)  # the kit's update batches have distinct ids

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        base = {"url": self.url, "dbtable": TABLE}
        return [
            ({"url": self.url}, "dbtable"),
            ({"dbtable": TABLE}, "url"),
            ({**base, "mode": "upsert"}, "mode=upsert needs 'keys'"),
            ({**base, "keys": "id"}, "only applies with mode=upsert"),
            ({**base, "mode": "merge"}, "append, upsert"),
            ({**base, "batchsize": "0"}, "batchsize"),
            ({**base, "isolationLevel": "NONE"}, "isolationLevel"),
            ({**base, "truncat": "true"}, "truncate"),
        ]


class SqliteSuite(OnSqlite, JdbcSinkSuite):
    __test__ = False

    def expected_contents(self, committed: pa.Table) -> pa.Table:
        return sqlite_stored(super().expected_contents(committed))


class PostgresSuite(OnPostgres, JdbcSinkSuite):
    __test__ = False


class TestSqliteAppendContract(SqliteSuite):
    """Append mode on SQLite (INSERT executemany)."""


class TestSqliteCompleteContract(SqliteSuite):
    """Complete mode on SQLite: the table dropped and re-created in the batch's transaction."""

    output_mode = OutputMode.COMPLETE
    engine_check = False  # the kit runs its engine query in append mode: the append suite does


class TestPostgresAppendContract(PostgresSuite):
    """Append mode on PostgreSQL (binary COPY)."""


class TestPostgresCompleteContract(PostgresSuite):
    """Complete mode on PostgreSQL."""

    output_mode = OutputMode.COMPLETE
    engine_check = False
