"""SQLite's driver opens no transaction before DDL by itself: the sink's complete output mode
(drop and re-create, or empty) and table creation must still be one transaction with the
rows and the ledger row."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

import microbatch as mb
from microbatch_jdbc.sink import JdbcSink

from .test_sink_errors import ROWS, SCHEMA, commit, rows


def complete_writer(url: str, truncate: bool) -> mb.StreamWriter:
    raw = {"url": url, "dbtable": "events", "truncate": str(truncate).lower()}
    opts = JdbcSink.options.parse(raw, connector="jdbc")
    context = mb.WriteContext(schema=SCHEMA, query_id="query-1", output_mode=mb.OutputMode.COMPLETE)
    return JdbcSink(opts).stream_writer(context)


@pytest.mark.parametrize("truncate", [False, True])
def test_a_failed_complete_batch_keeps_the_previous_rows(tmp_path: Path, truncate: bool) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    stream = complete_writer(url, truncate)
    commit(stream, 0)
    # the batch fails at its last statement, the ledger row
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "CREATE TRIGGER refuse BEFORE INSERT ON microbatch_ledger WHEN NEW.batch_id = 1 "
                "BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        )
    engine.dispose()
    with pytest.raises(mb.SinkError, match="refused"):
        commit(stream, 1, ROWS.slice(0, 2))
    stream.stop()
    assert rows(url, "SELECT id FROM events ORDER BY id") == [(1,), (2,), (3,)]
    assert rows(url, "SELECT batch_id FROM microbatch_ledger") == [(0,)]
