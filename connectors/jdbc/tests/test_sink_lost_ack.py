"""A batch whose COMMIT reached the database but whose acknowledgement was lost (the
connection dropped at COMMIT): the retry finds the ledger row and writes nothing."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

import microbatch as mb
from microbatch_jdbc.sink import JdbcSink

from .test_sink_errors import SCHEMA, commit, rows


@pytest.mark.parametrize("mode", ["append", "complete"])
def test_a_commit_whose_answer_was_lost_is_not_applied_twice(
    postgres_database: Any, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    url = str(postgres_database.url)
    output_mode = mb.OutputMode.COMPLETE if mode == "complete" else mb.OutputMode.APPEND
    opts = JdbcSink.options.parse({"url": url, "dbtable": "events"}, connector="jdbc")
    context = mb.WriteContext(schema=SCHEMA, query_id="query-1", output_mode=output_mode)
    stream = JdbcSink(opts).stream_writer(context)
    commit(stream, 0)
    real_commit = PGDialect_psycopg.do_commit
    drops = []

    def commit_then_drop(self: Any, dbapi_connection: Any) -> None:
        real_commit(self, dbapi_connection)  # the server has the batch now
        getattr(dbapi_connection, "driver_connection", dbapi_connection).close()  # no answer
        drops.append(1)
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(PGDialect_psycopg, "do_commit", commit_then_drop)
    with pytest.raises(mb.RetriableError, match="batch 1 into table events"):
        commit(stream, 1)
    monkeypatch.setattr(PGDialect_psycopg, "do_commit", real_commit)
    assert drops == [1]
    commit(stream, 1)  # the engine's retry, on a new connection
    stream.stop()
    expected = 3 if mode == "complete" else 6
    assert rows(url, "SELECT count(*) FROM events") == [(expected,)]
    assert rows(url, "SELECT batch_id FROM microbatch_ledger ORDER BY 1") == [(0,), (1,)]
