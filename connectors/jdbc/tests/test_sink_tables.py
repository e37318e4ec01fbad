"""The sink's table handling: names that cannot inject SQL, created column types per dialect,
``createTableColumnTypes``, and the per-column diff of a table the batch does not fit."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

import microbatch as mb
from microbatch_jdbc._tables import parse_column_types, parse_table_name
from microbatch_jdbc.sink import JdbcSink

HOSTILE_COLUMNS = ['x"; DROP TABLE victim; --', "with space", "MiXeD", "naïve 列", "a.b"]


def writer(
    url: str,
    schema: pa.Schema,
    mode: mb.OutputMode = mb.OutputMode.APPEND,
    query_id: str = "query-1",
    **options: Any,
) -> mb.StreamWriter:
    opts = JdbcSink.options.parse({"url": url, **options}, connector="jdbc")
    context = mb.WriteContext(schema=schema, output_mode=mode, query_id=query_id)
    return JdbcSink(opts).stream_writer(context)


def commit(stream: mb.StreamWriter, table: pa.Table, batch_id: int) -> None:
    part = stream.part_writer().write(
        pa.RecordBatchReader.from_batches(table.schema, table.to_batches()),
        mb.PartContext(batch_id=batch_id, part_index=0, num_parts=1),
    )
    stream.commit([part], batch_id)


def execute(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            result = connection.execute(sa.text(sql))
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'names.db'}"
    database = request.getfixturevalue("postgres_database")
    return str(sa.make_url(str(database.url)).render_as_string(hide_password=False))


def test_hostile_table_and_column_names_are_quoted(url: str) -> None:
    execute(url, "CREATE TABLE victim (id INTEGER)")
    schema = pa.schema([(name, pa.int64()) for name in HOSTILE_COLUMNS])
    table = pa.table(
        {name: [index, index + 10] for index, name in enumerate(HOSTILE_COLUMNS)}, schema=schema
    )
    for dbtable, stored in [
        ('"t""; DROP TABLE victim; --"', 't"; DROP TABLE victim; --'),
        ("t; DROP TABLE victim; --", "t; DROP TABLE victim; --"),
        ("Mixed Case Ünïcode", "Mixed Case Ünïcode"),
    ]:
        stream = writer(url, schema, dbtable=dbtable, query_id=f"query of {stored}")
        commit(stream, table, 0)
        commit(stream, table, 0)  # a replay
        stream.stop()
        engine = sa.create_engine(url)
        with engine.connect() as connection:
            assert sa.inspect(connection).has_table("victim")
            reflected = sa.Table(stored, sa.MetaData(), autoload_with=connection)
            assert [column.name for column in reflected.columns] == HOSTILE_COLUMNS
            rows = connection.execute(sa.select(reflected).order_by(reflected.c["MiXeD"])).all()
        engine.dispose()
        assert [tuple(row) for row in rows] == [(0, 1, 2, 3, 4), (10, 11, 12, 13, 14)]


def test_a_bare_name_holding_a_quote_is_refused() -> None:
    with pytest.raises(mb.OptionError, match="dbtable"):
        parse_table_name('x"; DROP TABLE y; --')
    assert parse_table_name("etl.events") == ("etl", "events")
    assert parse_table_name('"my.schema"."odd ""name"""') == ("my.schema", 'odd "name"')
    assert parse_table_name(" spaced name ") == (None, "spaced name")
    for bad in ["", "a.b.c", "a.", '"open', "."]:
        with pytest.raises(mb.OptionError):
            parse_table_name(bad)


def test_a_schema_qualified_table_in_postgres(postgres_database: Any) -> None:
    url = str(postgres_database.url)
    execute(url, 'CREATE SCHEMA "Etl Zone"')
    schema = pa.schema([("id", pa.int64())])
    stream = writer(url, schema, dbtable='"Etl Zone".events')
    commit(stream, pa.table({"id": [1, 2]}, schema=schema), 0)
    stream.stop()
    assert execute(url, 'SELECT id FROM "Etl Zone".events ORDER BY id') == [(1,), (2,)]


TYPED = pa.schema(
    [
        pa.field("b", pa.bool_()),
        pa.field("i16", pa.int16()),
        pa.field("i32", pa.int32()),
        pa.field("i64", pa.int64(), nullable=False),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("dec", pa.decimal128(12, 3)),
        pa.field("s", pa.string()),
        pa.field("bin", pa.binary()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("tstz", pa.timestamp("us", tz="Europe/Paris")),
        pa.field("t", pa.time64("us")),
        pa.field("l", pa.list_(pa.int64())),
    ]
)
TYPED_ROW = {
    "b": True,
    "i16": 7,
    "i32": -8,
    "i64": 2**40,
    "f32": 1.5,
    "f64": 2.25,
    "dec": Decimal("12.345"),
    "s": "text",
    "bin": b"\x00\xff",
    "d": date(2024, 2, 29),
    "ts": datetime(2024, 1, 2, 3, 4, 5, 6),
    "tstz": datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
    "t": time(13, 14, 15),
    "l": [1, 2],
}


def test_created_column_types_on_postgres(postgres_database: Any) -> None:
    url = str(postgres_database.url)
    stream = writer(
        url, TYPED, dbtable="typed", createTableColumnTypes="s VARCHAR(64), dec NUMERIC(20, 5)"
    )
    commit(stream, pa.Table.from_pylist([TYPED_ROW], schema=TYPED), 0)
    stream.stop()
    types = dict(
        execute(
            url,
            "SELECT column_name, format_type(atttypid, atttypmod) FROM pg_attribute "
            "JOIN information_schema.columns ON column_name = attname "
            "WHERE attrelid = 'typed'::regclass AND table_name = 'typed' AND attnum > 0",
        )
    )
    assert types == {
        "b": "boolean",
        "i16": "smallint",
        "i32": "integer",
        "i64": "bigint",
        "f32": "real",
        "f64": "double precision",
        "dec": "numeric(20,5)",
        "s": "character varying(64)",
        "bin": "bytea",
        "d": "date",
        "ts": "timestamp without time zone",
        "tstz": "timestamp with time zone",
        "t": "time without time zone",
        "l": "jsonb",
    }
    assert execute(
        url,
        "SELECT is_nullable FROM information_schema.columns "
        "WHERE table_name = 'typed' AND column_name = 'i64'",
    ) == [("NO",)]
    row = execute(url, "SELECT i64, dec, s, tstz, l FROM typed")[0]
    assert row[:3] == (2**40, Decimal("12.34500"), "text")
    assert row[3] == TYPED_ROW["tstz"]
    assert row[4] == [1, 2]


def test_created_column_types_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'typed.db'}"
    stream = writer(url, TYPED, dbtable="typed", createTableColumnTypes='"s" VARCHAR(64)')
    commit(stream, pa.Table.from_pylist([TYPED_ROW], schema=TYPED), 0)
    stream.stop()
    types = {row[1]: (row[2], row[3]) for row in execute(url, "PRAGMA table_info(typed)")}
    assert {name: kind for name, (kind, _) in types.items()} == {
        "b": "BOOLEAN",
        "i16": "SMALLINT",
        "i32": "INTEGER",
        "i64": "BIGINT",
        "f32": "REAL",
        "f64": "DOUBLE",
        "dec": "NUMERIC(12, 3)",
        "s": "VARCHAR(64)",
        "bin": "BLOB",
        "d": "DATE",
        "ts": "DATETIME",
        "tstz": "DATETIME",
        "t": "TIME",
        "l": "JSON",
    }
    assert types["i64"][1] == 1  # NOT NULL
    # a timestamp with a zone is stored as its UTC time
    assert execute(url, "SELECT tstz, l FROM typed") == [("2024-01-02 03:04:05.000006", "[1, 2]")]


def test_column_types_option_syntax() -> None:
    assert parse_column_types('a VARCHAR(10), `b c` NUMERIC(10, 2), "d" double precision') == {
        "a": "VARCHAR(10)",
        "b c": "NUMERIC(10, 2)",
        "d": "double precision",
    }
    for bad in ["a", "a VARCHAR(10); DROP TABLE x", "a INT, ", "a TEXT DEFAULT 'x'"]:
        with pytest.raises(mb.OptionError, match="createTableColumnTypes"):
            parse_column_types(bad)


def test_column_types_naming_an_unknown_column_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    schema = pa.schema([("id", pa.int64())])
    stream = writer(url, schema, dbtable="t", createTableColumnTypes="idd TEXT")
    with pytest.raises(mb.OptionError, match=r"'idd'.*its columns: id"):
        commit(stream, pa.table({"id": [1]}, schema=schema), 0)


def test_a_table_that_does_not_fit_fails_with_a_per_column_diff(url: str) -> None:
    execute(
        url,
        "CREATE TABLE target (id BIGINT NOT NULL, name TEXT, extra TEXT NOT NULL, "
        "flag BOOLEAN, spare TEXT)",
    )
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("name", pa.string()),
            ("flag", pa.timestamp("us")),
            ("missing", pa.string()),
        ]
    )
    stream = writer(url, schema, dbtable="target")
    table = pa.table(
        {"id": [1], "name": ["a"], "flag": [datetime(2024, 1, 1)], "missing": ["m"]}, schema=schema
    )
    with pytest.raises(mb.SchemaError) as raised:
        commit(stream, table, 0)
    text = str(raised.value)
    assert "the batch does not fit table target in " in text
    assert "column 'missing' (string) is not in the table" in text
    assert "column 'flag': the table's type BOOLEAN does not take the batch's timestamp[us]" in text
    assert "column 'extra' (TEXT NOT NULL, no default) is not in the batch" in text
    assert "spare" not in text and "'name'" not in text
    assert execute(url, "SELECT count(*) FROM target") == [(0,)]
    assert execute(url, "SELECT count(*) FROM microbatch_ledger") == [(0,)]


def test_nulls_into_a_not_null_column_are_refused_before_writing(url: str) -> None:
    execute(url, "CREATE TABLE target (id BIGINT NOT NULL, name TEXT)")
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    stream = writer(url, schema, dbtable="target")
    with pytest.raises(mb.SchemaError, match=r"column 'id' is NOT NULL in the table, but 2 row"):
        commit(stream, pa.table({"id": [1, None, None], "name": ["a", "b", "c"]}, schema=schema), 0)
    assert execute(url, "SELECT count(*) FROM target") == [(0,)]


def test_a_missing_table_without_create_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    schema = pa.schema([("id", pa.int64())])
    stream = writer(url, schema, dbtable="absent", createTableIfMissing="false")
    with pytest.raises(
        mb.ConfigurationError, match=r"absent .*does not exist and createTableIfMissing is false"
    ):
        commit(stream, pa.table({"id": [1]}, schema=schema), 0)


def test_complete_mode_with_truncate_keeps_the_table(url: str) -> None:
    execute(url, "CREATE TABLE kept (id BIGINT, note VARCHAR(20) DEFAULT 'kept')")
    schema = pa.schema([("id", pa.int64())])
    stream = writer(url, schema, mb.OutputMode.COMPLETE, dbtable="kept", truncate="true")
    commit(stream, pa.table({"id": [1, 2]}, schema=schema), 0)
    commit(stream, pa.table({"id": [3]}, schema=schema), 1)
    assert execute(url, "SELECT id, note FROM kept") == [(3, "kept")]
    # without truncate the table is dropped and re-created from the batch (Spark's overwrite)
    stream = writer(url, schema, mb.OutputMode.COMPLETE, dbtable="kept")
    commit(stream, pa.table({"id": [4]}, schema=schema), 2)
    assert execute(url, "SELECT * FROM kept") == [(4,)]
