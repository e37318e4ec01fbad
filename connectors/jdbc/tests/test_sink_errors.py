"""The sink's failures: transient database errors are ``RetriableError``s and the retried batch
is applied once; other errors are ``SinkError``s naming the table and the database; secrets
never appear in errors, tracebacks, logs or reprs."""

from __future__ import annotations

import logging
import socket
import threading
import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

import microbatch as mb
from microbatch_jdbc.sink import JdbcSink

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
ROWS = pa.table({"id": [1, 2, 3], "name": ["a", "b", None]}, schema=SCHEMA)
SECRET = "s3cr3t-Pa55w0rd"


def writer(raw: dict[str, Any], query_id: str = "query-1") -> mb.StreamWriter:
    opts = JdbcSink.options.parse(raw, connector="jdbc")
    context = mb.WriteContext(schema=SCHEMA, query_id=query_id)
    return JdbcSink(opts).stream_writer(context)


def commit(stream: mb.StreamWriter, batch_id: int, table: pa.Table = ROWS) -> None:
    parts = [
        stream.part_writer().write(
            pa.RecordBatchReader.from_batches(SCHEMA, [batch]),
            mb.PartContext(batch_id=batch_id, part_index=index, num_parts=2),
        )
        for index, batch in enumerate(
            [table.slice(0, 1).to_batches()[0], table.slice(1).combine_chunks().to_batches()[0]]
        )
    ]
    stream.commit(parts, batch_id)


def rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sa.text(sql))]
    finally:
        engine.dispose()


def test_a_lock_timeout_is_retriable_and_the_retry_applies_once(postgres_database: Any) -> None:
    url = str(postgres_database.url)
    stream = writer(
        {"url": url, "dbtable": "events", "sessionInitStatement": "SET lock_timeout = '200ms'"}
    )
    commit(stream, 0)
    engine = sa.create_engine(url)
    holder = engine.connect()
    transaction = holder.begin()
    holder.execute(sa.text("LOCK TABLE events IN ACCESS EXCLUSIVE MODE"))
    try:
        with pytest.raises(mb.RetriableError) as raised:
            commit(stream, 1)
        assert "batch 1 into table events in postgresql+psycopg://" in str(raised.value)
        assert "lock" in str(raised.value)
    finally:
        transaction.rollback()
        holder.close()
        engine.dispose()
    commit(stream, 1)  # the engine's retry
    commit(stream, 1)  # and a replay after a restart
    stream.stop()
    assert rows(url, "SELECT count(*) FROM events") == [(6,)]
    assert rows(url, "SELECT batch_id FROM microbatch_ledger ORDER BY 1") == [(0,), (1,)]


def test_a_terminated_connection_is_retriable(postgres_database: Any) -> None:
    url = str(postgres_database.url)
    stream = writer({"url": url, "dbtable": "events"})
    commit(stream, 0)  # the writer keeps its pooled connection
    name = sa.make_url(url).database
    terminated = rows(
        url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE datname = '{name}' AND pid <> pg_backend_pid()",
    )
    assert terminated and all(row[0] for row in terminated)
    with pytest.raises(mb.RetriableError, match="batch 1 into table events"):
        commit(stream, 1)
    commit(stream, 1)  # retried on a new connection
    stream.stop()
    assert rows(url, "SELECT count(*) FROM events") == [(6,)]


def test_a_concurrent_writer_of_the_same_batch_leaves_it_once(postgres_database: Any) -> None:
    url = str(postgres_database.url)
    first = writer({"url": url, "dbtable": "events"})
    commit(first, 0)
    # two writers (a zombie and its replacement) commit batch 1 at once
    writers = [writer({"url": url, "dbtable": "events"}) for _ in range(2)]
    errors: list[BaseException] = []

    def run(stream: mb.StreamWriter) -> None:
        try:
            commit(stream, 1)
        except BaseException as error:  # collected for the assertion below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(stream,)) for stream in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert rows(url, "SELECT count(*) FROM events") == [(6,)]
    for stream in [first, *writers]:
        stream.stop()


def test_other_errors_are_sink_errors_naming_table_and_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE events (id BIGINT NOT NULL UNIQUE, name TEXT)"))
        connection.execute(sa.text("INSERT INTO events VALUES (2, 'taken')"))
    engine.dispose()
    stream = writer({"url": url, "dbtable": "events"})
    with pytest.raises(mb.SinkError) as raised:
        commit(stream, 0)
    assert not isinstance(raised.value, mb.RetriableError)
    text = str(raised.value)
    assert f"batch 0 into table events in {url} failed: " in text
    assert "UNIQUE" in text
    assert rows(url, "SELECT id FROM events") == [(2,)]  # nothing of the batch kept


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("where", ["url", "option"])
def test_the_password_is_never_shown(where: str, caplog: pytest.LogCaptureFixture) -> None:
    port = _closed_port()
    if where == "url":
        raw = {"url": f"postgresql+psycopg://etl:{SECRET}@127.0.0.1:{port}/db"}
    else:
        raw = {"url": f"postgresql+psycopg://etl@127.0.0.1:{port}/db", "password": SECRET}
    raw["dbtable"] = "events"
    opts = JdbcSink.options.parse(raw, connector="jdbc")
    sink = JdbcSink(opts)
    stream = sink.stream_writer(mb.WriteContext(schema=SCHEMA, query_id="q"))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(mb.RetriableError) as raised:
        commit(stream, 0)
    shown = [
        sink.describe(),
        repr(sink),
        repr(stream),
        repr(opts),
        str(raised.value),
        "".join(traceback.format_exception(raised.value)),
        caplog.text,
    ]
    assert "etl:***@127.0.0.1" in sink.describe()
    for text in shown:
        assert SECRET not in text


def test_a_value_the_column_cannot_take_names_column_table_and_database(
    postgres_database: Any,
) -> None:
    url = str(postgres_database.url)
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE events (id INTEGER NOT NULL, name TEXT)"))
    engine.dispose()
    stream = writer({"url": url, "dbtable": "events"})
    big = pa.table({"id": [1, 2**40], "name": ["a", "b"]}, schema=SCHEMA)
    with pytest.raises(mb.SinkError) as raised:
        commit(stream, 0, big)
    text = str(raised.value)
    assert "batch 0 into table events in postgresql+psycopg://" in text
    assert "'id'" in text
    stream.stop()
    assert rows(url, "SELECT count(*) FROM events") == [(0,)]
