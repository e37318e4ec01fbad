"""The sink's ledger and transaction settings: a replay is logged and writes nothing, the
ledger table can be named, the isolation level reaches the connection."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

import microbatch as mb
from microbatch_jdbc.sink import JdbcSink

SCHEMA = pa.schema([("id", pa.int64())])
ROWS = pa.table({"id": [1, 2]}, schema=SCHEMA)


def writer(raw: dict[str, Any]) -> Any:
    opts = JdbcSink.options.parse(raw, connector="jdbc")
    return JdbcSink(opts).stream_writer(mb.WriteContext(schema=SCHEMA, query_id="query-7"))


def commit(stream: Any, batch_id: int) -> None:
    part = stream.part_writer().write(
        pa.RecordBatchReader.from_batches(SCHEMA, ROWS.to_batches()),
        mb.PartContext(batch_id=batch_id, part_index=0, num_parts=1),
    )
    stream.commit([part], batch_id)


def fetch(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sa.text(sql))]
    finally:
        engine.dispose()


def test_a_replay_is_logged_and_writes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    commit(writer({"url": url, "dbtable": "t"}), 0)
    caplog.set_level(logging.INFO, logger="microbatch.jdbc")
    commit(writer({"url": url, "dbtable": "t"}), 0)
    assert fetch(url, "SELECT count(*) FROM t") == [(2,)]
    assert (
        f"batch 0 was already applied to t in {url} (found in ledger microbatch_ledger): "
        "nothing written"
    ) in caplog.text


def test_the_ledger_table_can_be_named(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    commit(writer({"url": url, "dbtable": "t", "ledgerTable": "applied_batches"}), 3)
    assert fetch(url, "SELECT query_key, batch_id FROM applied_batches") == [("query-7", 3)]
    assert not sa.inspect(sa.create_engine(url)).has_table("microbatch_ledger")
    with pytest.raises(mb.OptionError, match="ledgerTable"):
        JdbcSink.options.parse(
            {"url": url, "dbtable": "t", "ledgerTable": "x; DROP TABLE t"}, connector="jdbc"
        )


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "READ COMMITTED"),
        ("SERIALIZABLE", "SERIALIZABLE"),
        ("repeatable_read", "REPEATABLE READ"),
    ],
)
def test_the_isolation_level_reaches_the_connection(
    postgres_database: Any, given: str | None, expected: str
) -> None:
    raw = {"url": str(postgres_database.url), "dbtable": "t"}
    if given:
        raw["isolationLevel"] = given
    stream = writer(raw)
    commit(stream, 0)
    with stream._engine_now().connect() as connection:
        assert connection.get_isolation_level() == expected
    stream.stop()
