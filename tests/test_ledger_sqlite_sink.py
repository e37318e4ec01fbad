"""A database sink of a user's own, built on ``mb.BatchLedger`` as its docstring shows, passes
the test kit's sink suite: among its checks, a SIGKILL at every line of ``commit`` (no crash
point placed by hand) never leaves a batch half applied, and a replay applies it once."""

from __future__ import annotations

import pickle
import sqlite3
from contextlib import closing
from typing import Any

import pyarrow as pa

import microbatch as mb
from microbatch_testkit import SinkContract


class SqliteSink(mb.Sink):
    """Appends each batch's rows to the table ``rows`` of a SQLite file, exactly once."""

    format_name = "test-sqlite-ledger"
    description = "Rows into a SQLite table, exactly once with BatchLedger (test sink)."
    options = mb.OptionSpec(
        mb.Option(name="path", type="string", required=True, doc="The SQLite database file."),
    )
    capabilities = mb.SinkCapabilities(guarantee=mb.Guarantee.EXACTLY_ONCE)

    def stream_writer(self, context: mb.WriteContext) -> SqliteWriter:
        return SqliteWriter(self.opts.path, context)


class SqliteWriter(mb.BatchWriter):
    def __init__(self, path: str, context: mb.WriteContext) -> None:
        super().__init__(context)
        self.path = path
        with closing(sqlite3.connect(path)) as connection:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS rows (batch_id INTEGER, seq INTEGER, data BLOB)"
            )
            connection.commit()

    def add_batch(self, table: pa.Table, batch_id: int) -> None:
        rows = [(batch_id, seq, pickle.dumps(row)) for seq, row in enumerate(table.to_pylist())]
        with closing(sqlite3.connect(self.path)) as connection:
            ledger = mb.BatchLedger.for_query(connection, self.context)
            ledger.apply_once(
                batch_id, lambda c: c.executemany("INSERT INTO rows VALUES (?, ?, ?)", rows)
            )


class TestSqliteLedgerSinkContract(SinkContract):
    sink_class = SqliteSink
    ordered = True

    def make_options(self) -> dict[str, Any]:
        return {"path": str(self.tmp_path / "target.db")}

    def read_back(self, writer: mb.StreamWriter) -> pa.Table:
        with closing(sqlite3.connect(self.tmp_path / "target.db")) as connection:
            found = connection.execute("SELECT data FROM rows ORDER BY batch_id, seq").fetchall()
        return pa.Table.from_pylist(
            [pickle.loads(data) for (data,) in found], schema=self.input_schema()
        )
