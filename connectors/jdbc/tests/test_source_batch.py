"""Batch reads of the jdbc source (Spark's JDBC source): options, ranges, NULLs, names."""

from __future__ import annotations

import datetime as dt
import decimal
import pickle
import sqlite3
from typing import Any

import psycopg
import pyarrow as pa
import pytest

import microbatch as mb
from microbatch_jdbc.source import JdbcSource


def make_source(**options: Any) -> JdbcSource:
    parsed = JdbcSource.options.parse(options, connector="jdbc")
    return JdbcSource(parsed, streaming=False)


def read_splits(source: JdbcSource) -> list[pa.Table]:
    """Each split's rows, in split order (through a pickled split reader)."""
    schema = source.schema()
    reader = source.stream_reader(mb.ReadContext(schema=schema, streaming=False))
    try:
        start = reader.initial_offset()
        end = reader.latest_offset(start, mb.ReadAllAvailable())
        splits = reader.partitions(start, end)
        split_reader = pickle.loads(pickle.dumps(reader.split_reader()))
        return [
            pa.Table.from_batches(
                list(split_reader.read(pickle.loads(pickle.dumps(s)))), schema=schema
            )
            for s in splits
        ]
    finally:
        reader.stop()


def sqlite_rows(url: str, sql: str, rows: list[tuple[Any, ...]]) -> None:
    connection = sqlite3.connect(url.removeprefix("sqlite:///"))
    with connection:
        connection.execute(sql)
        if rows:
            marks = ",".join("?" * len(rows[0]))
            table = sql.split("(")[0].split()[-1]
            connection.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    connection.close()


@pytest.mark.parametrize(
    ("options", "text"),
    [
        (
            {"dbtable": "t", "query": "select 1"},
            "Both 'dbtable' and 'query' can not be specified at the same time.",
        ),
        ({}, "Option 'dbtable' or 'query' is required."),
        (
            {"dbtable": "t", "partitionColumn": "id", "lowerBound": "0"},
            "users need to specify all or none for the following options: 'partitionColumn', "
            "'lowerBound', 'upperBound', and 'numPartitions'",
        ),
        (
            {
                "query": "select 1 as id",
                "partitionColumn": "id",
                "lowerBound": "0",
                "upperBound": "9",
                "numPartitions": "2",
            },
            "Options 'query' and 'partitionColumn' can not be specified together.",
        ),
        ({"dbtable": "a.b.c"}, "expected 'name' or 'schema.name'"),
    ],
)
def test_refused_combinations_use_sparks_texts(
    sqlite_url: str, options: dict[str, Any], text: str
) -> None:
    with pytest.raises(mb.OptionError) as caught:
        make_source(url=sqlite_url, **options)
    assert text in str(caught.value)


def test_streaming_needs_an_incremental_column(sqlite_url: str) -> None:
    parsed = JdbcSource.options.parse({"url": sqlite_url, "dbtable": "t"}, connector="jdbc")
    with pytest.raises(mb.OptionError, match="needs option 'incrementalColumn'"):
        JdbcSource(parsed, streaming=True)


def test_ranges_follow_the_strides_and_nulls_land_in_the_first(sqlite_url: str) -> None:
    rows = [(i, f"n{i}") for i in range(-5, 25)] + [(None, "nobody")]
    sqlite_rows(sqlite_url, "CREATE TABLE t (id INTEGER, name TEXT)", rows)
    source = make_source(
        url=sqlite_url,
        dbtable="t",
        partitionColumn="id",
        lowerBound=0,
        upperBound=20,
        numPartitions=4,
    )
    parts = read_splits(source)
    ids = [sorted(i for i in part.column("id").to_pylist() if i is not None) for part in parts]
    assert ids == [list(range(-5, 5)), list(range(5, 10)), list(range(10, 15)), list(range(15, 25))]
    assert parts[0].column("id").null_count == 1
    assert sum(part.column("id").null_count for part in parts) == 1
    assert source.schema() == pa.schema([("id", pa.int64()), ("name", pa.string())])


def test_one_split_without_a_partition_column_and_through_the_session(sqlite_url: str) -> None:
    sqlite_rows(
        sqlite_url,
        "CREATE TABLE t (id INTEGER, v REAL, d DATE)",
        [(1, 0.5, "2024-05-01"), (2, None, None)],
    )
    parts = read_splits(make_source(url=sqlite_url, dbtable="t"))
    assert len(parts) == 1
    table = mb.Session().read.format("jdbc").option("url", sqlite_url).option("dbtable", "t").load()
    table = table.to_arrow() if hasattr(table, "to_arrow") else table
    assert table.to_pylist() == [
        {"id": 1, "v": 0.5, "d": dt.date(2024, 5, 1)},
        {"id": 2, "v": None, "d": None},
    ]


def test_query_is_read_as_sparks_subquery(sqlite_url: str) -> None:
    sqlite_rows(
        sqlite_url, "CREATE TABLE t (id INTEGER, name TEXT)", [(1, "a"), (2, "b"), (3, "c")]
    )
    source = make_source(url=sqlite_url, query="SELECT id * 10 AS tens FROM t WHERE id > 1")
    assert source.plan.from_text is not None
    assert source.plan.from_text.startswith(
        "(SELECT id * 10 AS tens FROM t WHERE id > 1) SPARK_GEN_SUBQ_"
    )
    (part,) = read_splits(source)
    assert part.to_pylist() == [{"tens": 20}, {"tens": 30}]


HOSTILE_TABLE = 'x"; DROP TABLE keep; --'
HOSTILE_COLUMN = 'id" < 0 OR 1=1; --'


def test_hostile_names_on_sqlite(sqlite_url: str) -> None:
    quoted_table = '"' + HOSTILE_TABLE.replace('"', '""') + '"'
    quoted_column = '"' + HOSTILE_COLUMN.replace('"', '""') + '"'
    sqlite_rows(sqlite_url, "CREATE TABLE keep (a INTEGER)", [(1,)])
    connection = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    with connection:
        connection.execute(f"CREATE TABLE {quoted_table} ({quoted_column} INTEGER)")
        connection.executemany(f"INSERT INTO {quoted_table} VALUES (?)", [(i,) for i in range(6)])
    connection.close()
    source = make_source(
        url=sqlite_url,
        dbtable=quoted_table,
        partitionColumn=HOSTILE_COLUMN,
        lowerBound=0,
        upperBound=6,
        numPartitions=2,
    )
    parts = read_splits(source)
    assert [p.column(HOSTILE_COLUMN).to_pylist() for p in parts] == [[0, 1, 2], [3, 4, 5]]
    check = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    assert check.execute("SELECT a FROM keep").fetchall() == [(1,)]
    check.close()


def test_a_missing_table_is_a_clear_error(sqlite_url: str) -> None:
    sqlite_rows(sqlite_url, "CREATE TABLE other (a INTEGER)", [])
    source = make_source(url=sqlite_url, query="SELECT * FROM nowhere")
    with pytest.raises(mb.MicrobatchError, match="could not read the schema of sqlite"):
        source.schema()


def test_a_password_never_shows(postgres_database: Any) -> None:
    url = postgres_database.url.replace("postgres@", "postgres:hunter2secret@")
    source = make_source(url=url, dbtable="missing_table")
    with pytest.raises(mb.MicrobatchError) as caught:
        source.schema()
    assert "hunter2secret" not in str(caught.value)
    assert "***" in str(caught.value) or "missing_table" in str(caught.value)


# -- PostgreSQL --------------------------------------------------------------------------


PG_TYPES = """
CREATE TABLE typed (
    i4 int4, i8 int8, i2 int2, n numeric(10, 2), nn numeric, f4 float4, f8 float8,
    tz timestamptz, ts timestamp, d date, b bool, raw bytea, j json, jb jsonb, u uuid,
    ai int4[], at text[], t text, vc varchar(5)
)
"""

PG_ROW = (
    2147483647,
    2**62,
    -3,
    decimal.Decimal("12345678.25"),
    decimal.Decimal("4.5"),
    1.5,
    2.25,
    dt.datetime(2024, 5, 1, 12, 30, 15, 250000, tzinfo=dt.UTC),
    dt.datetime(2024, 5, 1, 1, 2, 3, 500000),
    dt.date(2024, 2, 29),
    True,
    b"\x00\x01\xff",
    '{"a": 1}',
    '{"b": 2}',
    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    [1, None, 3],
    ["x", "y"],
    "héllo",
    "abc",
)

PG_SCHEMA = pa.schema(
    [
        ("i4", pa.int32()),
        ("i8", pa.int64()),
        ("i2", pa.int16()),
        ("n", pa.decimal128(10, 2)),
        ("nn", pa.decimal128(38, 18)),
        ("f4", pa.float32()),
        ("f8", pa.float64()),
        ("tz", pa.timestamp("us", "UTC")),
        ("ts", pa.timestamp("us")),
        ("d", pa.date32()),
        ("b", pa.bool_()),
        ("raw", pa.binary()),
        ("j", pa.string()),
        ("jb", pa.string()),
        ("u", pa.string()),
        ("ai", pa.list_(pa.int32())),
        ("at", pa.list_(pa.string())),
        ("t", pa.string()),
        ("vc", pa.string()),
    ]
)


def test_postgresql_types_round_trip(postgres_database: Any) -> None:
    from psycopg.types.json import Json  # noqa: F401  (json text is sent as text)

    with psycopg.connect(postgres_database.dsn, autocommit=True) as connection:
        connection.execute(PG_TYPES)
        marks = ",".join(["%s"] * len(PG_ROW))
        connection.execute(f"INSERT INTO typed VALUES ({marks})", PG_ROW)
        connection.execute(f"INSERT INTO typed VALUES ({','.join(['NULL'] * len(PG_ROW))})")
    source = make_source(url=postgres_database.url, dbtable="typed")
    assert source.schema() == PG_SCHEMA
    (part,) = read_splits(source)
    assert part.schema == PG_SCHEMA
    first, second = part.to_pylist()
    assert second == dict.fromkeys(PG_SCHEMA.names)
    expected = dict(zip(PG_SCHEMA.names, PG_ROW, strict=True))
    expected["jb"] = '{"b": 2}'
    assert first == expected


def test_postgresql_partitioned_read_covers_every_row_once(postgres_database: Any) -> None:
    with psycopg.connect(postgres_database.dsn, autocommit=True) as connection:
        connection.execute("CREATE SCHEMA sales")
        connection.execute(
            'CREATE TABLE sales."Orders" (id int8, at timestamptz, amount numeric(8,2))'
        )
        connection.execute(
            'INSERT INTO sales."Orders" SELECT g, '
            "timestamptz '2024-01-01 00:00+00' + g * interval '1 hour', g / 4.0 "
            "FROM generate_series(1, 5000) g"
        )
        connection.execute('INSERT INTO sales."Orders" VALUES (NULL, NULL, NULL)')
    by_id = make_source(
        url=postgres_database.url,
        dbtable='sales."Orders"',
        partitionColumn="id",
        lowerBound=100,
        upperBound=4900,
        numPartitions=7,
    )
    parts = read_splits(by_id)
    assert len(parts) == 7
    assert parts[0].column("id").null_count == 1
    ids = [i for part in parts for i in part.column("id").to_pylist() if i is not None]
    assert sorted(ids) == list(range(1, 5001))
    by_time = make_source(
        url=postgres_database.url,
        dbtable='sales."Orders"',
        partitionColumn="at",
        lowerBound="2024-01-01",
        upperBound="2024-04-01",
        numPartitions=5,
    )
    parts = read_splits(by_time)
    assert len(parts) == 5
    assert sum(part.num_rows for part in parts) == 5001
    assert parts[0].column("at").null_count == 1
    session = mb.Session()
    whole = (
        session.read.format("jdbc")
        .option("url", postgres_database.url)
        .option("dbtable", 'sales."Orders"')
        .option("partitionColumn", "id")
        .option("lowerBound", 0)
        .option("upperBound", 5000)
        .option("numPartitions", 3)
        .option("fetchsize", 500)
        .load()
    )
    whole = whole.to_arrow() if hasattr(whole, "to_arrow") else whole
    assert whole.num_rows == 5001
    assert whole.schema.field("amount").type == pa.decimal128(8, 2)


def test_hostile_names_on_postgresql(postgres_database: Any) -> None:
    quoted_table = '"' + HOSTILE_TABLE.replace('"', '""') + '"'
    quoted_column = '"' + HOSTILE_COLUMN.replace('"', '""') + '"'
    with psycopg.connect(postgres_database.dsn, autocommit=True) as connection:
        connection.execute("CREATE TABLE keep (a int)")
        connection.execute(f"CREATE TABLE {quoted_table} ({quoted_column} int8)")
        connection.execute(f"INSERT INTO {quoted_table} SELECT generate_series(0, 5)")
    source = make_source(
        url=postgres_database.url,
        dbtable=quoted_table,
        partitionColumn=HOSTILE_COLUMN,
        lowerBound=0,
        upperBound=6,
        numPartitions=2,
    )
    parts = read_splits(source)
    assert [sorted(p.column(HOSTILE_COLUMN).to_pylist()) for p in parts] == [[0, 1, 2], [3, 4, 5]]
    with psycopg.connect(postgres_database.dsn) as connection:
        assert connection.execute("SELECT count(*) FROM keep").fetchone() == (0,)


def test_custom_schema_sets_some_columns_types(sqlite_url: str, postgres_database: Any) -> None:
    sqlite_rows(sqlite_url, "CREATE TABLE t (id INTEGER, name TEXT, v REAL)", [(7, "a", 1.5)])
    source = make_source(url=sqlite_url, dbtable="t", customSchema="ID DECIMAL(38, 0), v STRING")
    assert source.schema() == pa.schema(
        [("id", pa.decimal128(38, 0)), ("name", pa.string()), ("v", pa.string())]
    )
    (part,) = read_splits(source)
    assert part.to_pylist() == [{"id": decimal.Decimal(7), "name": "a", "v": "1.5"}]
    with psycopg.connect(postgres_database.dsn, autocommit=True) as connection:
        connection.execute("CREATE TABLE t (id int8, at timestamptz)")
        connection.execute("INSERT INTO t VALUES (7, '2024-05-01 00:00+00')")
    source = make_source(
        url=postgres_database.url, dbtable="t", customSchema="id DECIMAL(20,2), at TIMESTAMP"
    )
    (part,) = read_splits(source)
    assert part.schema.field("id").type == pa.decimal128(20, 2)
    assert part.to_pylist() == [
        {"id": decimal.Decimal("7.00"), "at": dt.datetime(2024, 5, 1, tzinfo=dt.UTC)}
    ]


@pytest.mark.parametrize(
    ("custom", "text"),
    [
        ("id WIDGET", "unknown type 'WIDGET' for column 'id'"),
        ("nope INT", "no column 'nope' in the result (id)"),
        ("id DECIMAL(40, 2)", "precision 1 to 38"),
        ("id INT name", "cannot read"),
    ],
)
def test_custom_schema_errors_name_the_problem(sqlite_url: str, custom: str, text: str) -> None:
    sqlite_rows(sqlite_url, "CREATE TABLE t (id INTEGER)", [])
    with pytest.raises(mb.OptionError) as caught:
        make_source(url=sqlite_url, dbtable="t", customSchema=custom).schema()
    assert text in str(caught.value)


def test_postgresql_types_adbc_only_knows_in_binary_are_read_as_text(
    postgres_database: Any,
) -> None:
    with psycopg.connect(postgres_database.dsn, autocommit=True) as connection:
        connection.execute("CREATE TYPE mood AS ENUM ('sad', 'ok')")
        connection.execute(
            "CREATE TABLE odd (id int8, m mood, p point, ip inet, iv interval, tm time)"
        )
        connection.execute(
            "INSERT INTO odd VALUES (1, 'ok', '(1,2)', '10.0.0.1', '1 day 2 hours', '01:02:03'),"
            " (2, NULL, NULL, NULL, NULL, NULL)"
        )
    source = make_source(
        url=postgres_database.url,
        dbtable="odd",
        partitionColumn="id",
        lowerBound=1,
        upperBound=3,
        numPartitions=2,
    )
    assert source.schema() == pa.schema(
        [
            ("id", pa.int64()),
            ("m", pa.string()),
            ("p", pa.string()),
            ("ip", pa.string()),
            ("iv", pa.month_day_nano_interval()),
            ("tm", pa.time64("us")),
        ]
    )
    first, second = read_splits(source)
    assert first.to_pylist() == [
        {
            "id": 1,
            "m": "ok",
            "p": "(1,2)",
            "ip": "10.0.0.1/32",
            "iv": pa.scalar((0, 1, 7_200_000_000_000), pa.month_day_nano_interval()).as_py(),
            "tm": dt.time(1, 2, 3),
        }
    ]
    assert second.to_pylist() == [dict.fromkeys(source.schema().names) | {"id": 2}]
