"""One parser of table names for the source and the sink."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

import microbatch as mb
from microbatch_jdbc import _source_options, _tables


def test_the_source_and_the_sink_parse_table_names_alike(sqlite_url: str) -> None:
    assert _source_options.parse_table_name is _tables.parse_table_name
    engine = sa.create_engine(sqlite_url)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE events (id INTEGER)"))
        connection.execute(sa.text("INSERT INTO events VALUES (1), (2)"))
    engine.dispose()
    # spaces around a bare name are not part of it (as for the sink's dbtable)
    frame: Any = (
        mb.Session().read.format("jdbc").option("url", sqlite_url).option("dbtable", " events ")
    )
    assert sorted(frame.load().column("id").to_pylist()) == [1, 2]
