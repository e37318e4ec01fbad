"""Real queries through ``mb.Session()`` into ``format("jdbc")``: SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
import sqlalchemy as sa

import microbatch as mb


@pytest.fixture(scope="module")
def session() -> mb.Session:
    return mb.Session()


def rate(session: mb.Session, rows: int = 10) -> mb.StreamFrame:
    return (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", 2)
        .load()
    )


def run(session: mb.Session, url: str, checkpoint: Path, **options: Any) -> mb.StreamingQuery:
    writer = rate(session).write_stream.format("jdbc").option("url", url)
    for key, value in {"dbtable": "numbers", **options}.items():
        writer = writer.option(key, value)
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(available_now=True).start()
    assert query.await_termination(timeout=60)
    assert query.exception() is None, query.exception()
    return query


def values(url: str, table: str = "numbers") -> list[int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(sa.text(f'SELECT value FROM "{table}" ORDER BY value'))
            return [row[0] for row in rows]
    finally:
        engine.dispose()


def ledger(url: str) -> list[tuple[str, int]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text("SELECT query_key, batch_id FROM microbatch_ledger ORDER BY batch_id")
            )
            return [(row[0], row[1]) for row in rows]
    finally:
        engine.dispose()


def test_a_query_appends_into_sqlite_and_restarts_exactly_once(
    session: mb.Session, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'out.db'}"
    for _ in range(3):  # each available-now run of rate-micro-batch is one batch
        query = run(session, url, tmp_path / "checkpoint")
    assert values(url) == list(range(30))
    assert ledger(url) == [(query.id, 0), (query.id, 1), (query.id, 2)]
    assert query.last_progress is not None
    assert query.last_progress["sink"]["description"] == f"JdbcSink[numbers in {url}]"


def test_a_query_appends_into_postgres_and_hides_the_password(
    session: mb.Session, tmp_path: Path, postgres_database: Any
) -> None:
    url = sa.make_url(str(postgres_database.url))
    for _ in range(2):
        query = run(session, url.render_as_string(hide_password=False), tmp_path / "cp")
    assert values(url.render_as_string(hide_password=False)) == list(range(20))
    description = query.last_progress["sink"]["description"]
    assert "numbers in postgresql+psycopg://" in description
    if url.password:
        assert str(url.password) not in description


def test_an_update_mode_query_upserts_the_latest_row_per_key(
    session: mb.Session, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'out.db'}"
    for _ in range(2):
        frame = rate(session).with_column("key", pc.modulo(pc.field("value"), 4))
        query = (
            frame.write_stream.format("jdbc")
            .option("url", url)
            .option("dbtable", "latest")
            .option("mode", "upsert")
            .option("keys", "key")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .output_mode("update")
            .trigger(available_now=True)
            .start()
        )
        assert query.await_termination(timeout=60)
        assert query.exception() is None, query.exception()
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT key, value FROM latest ORDER BY key")).all()
    engine.dispose()
    assert [tuple(row) for row in rows] == [(0, 16), (1, 17), (2, 18), (3, 19)]
