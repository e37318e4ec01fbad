"""The sink's options and output modes: Spark's names and defaults, refused combinations."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch_jdbc.sink import JdbcSink

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
URL = "sqlite:///unused.db"


def build(output_mode: mb.OutputMode = mb.OutputMode.APPEND, **raw: Any) -> mb.StreamWriter:
    opts = JdbcSink.options.parse({"url": URL, "dbtable": "t", **raw}, connector="jdbc")
    return JdbcSink(opts).stream_writer(
        mb.WriteContext(schema=SCHEMA, output_mode=output_mode, query_id="q")
    )


def test_defaults_are_sparks() -> None:
    opts = JdbcSink.options.parse({"url": URL, "dbtable": "t"}, connector="jdbc")
    assert opts.mode == "append"
    assert opts.batchsize == 1000
    assert opts.truncate is False
    assert opts.create_table_if_missing is True
    assert opts.isolation_level == "READ_COMMITTED"
    assert opts.ledger_table == "microbatch_ledger"


def test_a_misspelt_option_gets_the_nearest_name() -> None:
    with pytest.raises(mb.OptionError, match="did you mean 'createTableColumnTypes'"):
        JdbcSink.options.parse(
            {"url": URL, "dbtable": "t", "createTableColumnType": "id INT"}, connector="jdbc"
        )


def test_update_mode_needs_upsert() -> None:
    with pytest.raises(mb.UnsupportedOperationError, match="only with mode=upsert"):
        build(mb.OutputMode.UPDATE)
    build(mb.OutputMode.UPDATE, mode="upsert", keys="id")


def test_upsert_does_not_apply_in_complete_mode() -> None:
    with pytest.raises(mb.UnsupportedOperationError, match="complete output mode"):
        build(mb.OutputMode.COMPLETE, mode="upsert", keys="id")


def test_upsert_keys_must_be_columns_of_the_stream() -> None:
    with pytest.raises(mb.ConfigurationError, match=r"'idd'.*its columns: id, name"):
        build(mode="upsert", keys="idd")


def test_a_bad_table_name_or_column_types_are_refused_when_the_query_starts() -> None:
    with pytest.raises(mb.OptionError, match="dbtable"):
        build(dbtable="a.b.c")
    with pytest.raises(mb.OptionError, match="createTableColumnTypes"):
        build(createTableColumnTypes="id INT; DROP TABLE t")


def test_the_description_names_table_database_and_keys() -> None:
    opts = JdbcSink.options.parse(
        {
            "url": "postgresql+psycopg://etl:pw@db.local/shop",
            "dbtable": "etl.events",
            "mode": "upsert",
            "keys": "id",
        },
        connector="jdbc",
    )
    assert JdbcSink(opts).describe() == (
        "JdbcSink[etl.events in postgresql+psycopg://etl:***@db.local/shop, upsert by id]"
    )
