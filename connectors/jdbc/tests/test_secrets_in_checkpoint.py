"""A password given as an option or in the URL never reaches the checkpoint files, the
progress, the logs or the query's repr."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

import microbatch as mb

SECRET = "Zz9-not-shown-9zZ"


@pytest.mark.parametrize("where", ["option", "url"])
def test_a_password_stays_out_of_checkpoint_progress_and_logs(
    postgres_database: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    with psycopg.connect(postgres_database.dsn, autocommit=True) as connection:
        connection.execute("CREATE TABLE events (id int8 PRIMARY KEY)")
        connection.execute("INSERT INTO events SELECT generate_series(1, 5)")
    url = sa.make_url(str(postgres_database.url))
    options: dict[str, str] = {}
    if where == "url":
        url_text = url.set(password=SECRET).render_as_string(hide_password=False)
    else:
        url_text, options = url.render_as_string(hide_password=False), {"password": SECRET}
    caplog.set_level(logging.DEBUG)
    session = mb.Session()
    reader = session.read_stream.format("jdbc").option("url", url_text)
    writer_options = {"url": url_text, "dbtable": "copied", **options}
    for key, value in {"dbtable": "events", "incrementalColumn": "id", **options}.items():
        reader = reader.option(key, value)
    stream = reader.load().write_stream.format("jdbc")
    for key, value in writer_options.items():
        stream = stream.option(key, value)
    query = (
        stream.option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(timeout=60)
    assert query.exception() is None, query.exception()
    with psycopg.connect(postgres_database.dsn) as connection:
        assert connection.execute("SELECT count(*) FROM copied").fetchone() == (5,)
    shown = [caplog.text, str(query.recent_progress), repr(query), str(query.last_progress)]
    for path in (tmp_path / "cp").rglob("*"):
        if path.is_file():
            shown.append(path.read_bytes().decode("utf-8", "replace"))
    assert all(SECRET not in text for text in shown)
