"""The ``jdbc`` sink with ``mode=upsert`` (``keys=id``) passes the testkit's sink suite in
update output mode, on SQLite (INSERT ... ON CONFLICT through the generic staging path) and on
a real PostgreSQL (staging by binary COPY, then INSERT ... ON CONFLICT DO UPDATE).

``id`` is the kit's non-null key column: its values are distinct within each batch the kit
writes, and the kit writes the same rows again in later batches, so the table holds the last
row of each id. An upsert of the same rows leaves the same table, so contents alone cannot
show a batch applied twice: ``read_back`` also reads the ledger table and requires that each
batch id of the kit's query is recorded there once.

The kit's crash-inside-commit check cannot run here: batches 0 and 1 carry the same rows, so
the table after batch 1 equals the table after batch 0 and the kit cannot see the child's
commit (it skips). Upserts killed mid-commit in real query processes, with keys repeating
across batches, are tested by test_crash_jdbc_sink.py.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

from microbatch import Guarantee, OutputMode, SinkCapabilities, StreamWriter
from microbatch.ledger import LEDGER_TABLE
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
KEYS = ("id",)


def last_per_key(rows: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """The last row of each distinct key of ``rows``, in the order those last rows had."""
    last: dict[tuple[Any, ...], int] = {}
    columns = [rows.column(key).to_pylist() for key in keys]
    for index, key in enumerate(zip(*columns, strict=True)):
        last[key] = index
    return rows.take(pa.array(sorted(last.values()), pa.int64()))


def ledger_batch_ids(url: str, query_id: str) -> list[int]:
    """The batch ids the ledger table records for ``query_id`` (empty without a table)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            if not sa.inspect(connection).has_table(LEDGER_TABLE):
                return []
            ledger = sa.Table(LEDGER_TABLE, sa.MetaData(), autoload_with=connection)
            rows = connection.execute(sa.select(ledger.c.query_key, ledger.c.batch_id)).all()
    finally:
        engine.dispose()
    return [int(batch_id) for key, batch_id in rows if query_id in str(key)]


class UpsertJdbcSink(JdbcSink):
    """The sink as ``mode=upsert`` makes it: append and update output mode (complete mode,
    which replaces the table, is refused with mode=upsert)."""

    capabilities = SinkCapabilities(
        output_modes=frozenset({OutputMode.APPEND, OutputMode.UPDATE}),
        guarantee=Guarantee.EXACTLY_ONCE,
    )


class UpsertSinkSuite(FewCommitKills, SinkContract):
    """The sink over table ``events`` of a database given by :attr:`url`, mode=upsert."""

    __test__ = False
    sink_class = UpsertJdbcSink
    output_mode = OutputMode.UPDATE
    commit_kills = "6"

    @property
    def url(self) -> str:
        raise NotImplementedError

    def make_options(self) -> dict[str, Any]:
        return {"url": self.url, "dbtable": TABLE, "mode": "upsert", "keys": ",".join(KEYS)}

    def expected_contents(self, committed: pa.Table) -> pa.Table:
        latest = last_per_key(committed, KEYS)
        return latest.cast(as_stored(latest.schema))

    def expected_update_contents(self, batches: list[pa.Table]) -> pa.Table:
        return last_per_key(pa.concat_tables(batches), KEYS)

    def read_back(self, writer: StreamWriter) -> pa.Table:
        table = read_table(self.url, TABLE, self.input_schema())
        batch_ids = ledger_batch_ids(self.url, self.query_id)
        twice = sorted(batch for batch, count in Counter(batch_ids).items() if count > 1)
        assert not twice, f"batch ids recorded more than once in {LEDGER_TABLE}: {twice}"
        return table

    def test_commit_is_atomic_when_killed(self) -> None:
        pytest.skip(
            "batches 0 and 1 of the kit carry the same rows: an upsert of batch 1 leaves the "
            "table as batch 0 did; test_crash_jdbc_sink.py kills upserting queries instead"
        )

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        base = {"url": self.url, "dbtable": TABLE}
        return [
            ({**base, "mode": "upsert"}, "mode=upsert needs 'keys'"),
            ({**base, "keys": "id"}, "only applies with mode=upsert"),
        ]


class TestSqliteUpsertContract(OnSqlite, UpsertSinkSuite):
    """mode=upsert on SQLite."""

    def expected_contents(self, committed: pa.Table) -> pa.Table:
        return sqlite_stored(super().expected_contents(committed))


class TestPostgresUpsertContract(OnPostgres, UpsertSinkSuite):
    """mode=upsert on PostgreSQL (COPY into a staging table, then ON CONFLICT DO UPDATE)."""
