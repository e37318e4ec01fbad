"""Upsert into real PostgreSQL and SQLite: the latest value per key wins across batches and
within one, in the caller's transaction, with hostile names quoted, and no staging table
left behind. The MERGE and UPDATE-then-INSERT paths run on PostgreSQL 15 and SQLite too."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import psycopg
import pyarrow as pa
import pytest
import sqlalchemy as sa

import microbatch as mb
from microbatch_jdbc import _upsert
from microbatch_jdbc._pg_copy import CopyValueError
from microbatch_jdbc._upsert import UpsertKeyError, last_per_key, upsert_rows

HOSTILE_TABLE = "t'); DROP TABLE victim; --"
HOSTILE_KEY = 'k" int); DROP TABLE victim; --'
HOSTILE_VALUE = "v'; DELETE FROM victim; --"


@pytest.fixture(params=["postgresql", "sqlite"])
def engine(request: Any, tmp_path: Any) -> Any:
    if request.param == "postgresql":
        database = request.getfixturevalue("postgres_database")
        engine = sa.create_engine(database.url)
    else:
        engine = sa.create_engine(f"sqlite:///{tmp_path / 'up.db'}")
    yield engine
    engine.dispose()


def _create(engine: Any, name: str, *columns: sa.Column[Any]) -> sa.Table:
    metadata = sa.MetaData()
    table = sa.Table(name, metadata, *columns)
    metadata.create_all(engine)
    return table


def _people(engine: Any) -> sa.Table:
    return _create(
        engine,
        "people",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("name", sa.Text),
        sa.Column("score", sa.Float),
    )


def _upsert_into(engine: Any, table: sa.Table, keys: list[str], *batches: pa.RecordBatch) -> int:
    with engine.begin() as connection:
        return upsert_rows(connection, table, batches, keys)


def _all(engine: Any, table: sa.Table) -> list[tuple[Any, ...]]:
    with engine.connect() as connection:
        order = [column for column in table.c]
        return [tuple(row) for row in connection.execute(sa.select(table).order_by(*order))]


def _batch(ids: list[int], names: list[str], scores: list[float]) -> pa.RecordBatch:
    return pa.record_batch(
        {"id": pa.array(ids, pa.int64()), "name": names, "score": pa.array(scores)}
    )


def test_last_per_key_keeps_the_last_row_of_each_key_in_batch_order() -> None:
    data = pa.table({"k": [1, 2, 1, 3, 2, 1], "v": ["a", "b", "c", "d", "e", "f"]})
    assert last_per_key(data, ["k"]).to_pylist() == [
        {"k": 3, "v": "d"},
        {"k": 2, "v": "e"},
        {"k": 1, "v": "f"},
    ]
    pairs = pa.table({"a": [1, 1, 1], "b": ["x", "y", "x"], "v": [1, 2, 3]})
    assert last_per_key(pairs, ["a", "b"]).to_pylist() == [
        {"a": 1, "b": "y", "v": 2},
        {"a": 1, "b": "x", "v": 3},
    ]


def test_latest_value_per_key_across_batches_and_within_one(engine: Any) -> None:
    table = _people(engine)
    assert _upsert_into(engine, table, ["id"], _batch([1, 2], ["a", "b"], [1.0, 2.0])) == 2
    # within one call: key 2 three times over two record batches, key 3 twice
    written = _upsert_into(
        engine,
        table,
        ["id"],
        _batch([2, 3, 2], ["b1", "c1", "b2"], [2.1, 3.1, 2.2]),
        _batch([3, 2, 4], ["c2", "b3", "d"], [3.2, 2.3, 4.0]),
    )
    assert written == 3
    assert _all(engine, table) == [(1, "a", 1.0), (2, "b3", 2.3), (3, "c2", 3.2), (4, "d", 4.0)]


@pytest.mark.parametrize("strategy", ["_merge", "_update_then_insert"])
def test_merge_and_generic_paths_keep_the_latest_value(
    postgres_database: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, strategy: str
) -> None:
    monkeypatch.setattr(_upsert, "_strategy", lambda dialect: getattr(_upsert, strategy))
    urls = [postgres_database.url]  # PostgreSQL 15 has MERGE
    if strategy == "_update_then_insert":
        urls.append(f"sqlite:///{tmp_path / 'generic.db'}")
    for url in urls:
        engine = sa.create_engine(url)
        table = _people(engine)
        _upsert_into(engine, table, ["id"], _batch([1, 2], ["a", "b"], [1.0, 2.0]))
        _upsert_into(engine, table, ["id"], _batch([2, 3, 2], ["x", "c", "y"], [0.5, 3.0, 2.5]))
        assert _all(engine, table) == [(1, "a", 1.0), (2, "y", 2.5), (3, "c", 3.0)], url
        engine.dispose()


def test_composite_keys_and_tables_with_only_key_columns(engine: Any) -> None:
    pairs = _create(
        engine,
        "pairs",
        sa.Column("a", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("b", sa.Text, primary_key=True),
        sa.Column("v", sa.Integer),
    )
    batch = pa.record_batch({"a": [1, 1, 2, 1], "b": ["x", "y", "x", "x"], "v": [1, 2, 3, 4]})
    assert _upsert_into(engine, pairs, ["a", "b"], batch) == 3
    assert _all(engine, pairs) == [(1, "x", 4), (1, "y", 2), (2, "x", 3)]
    only = _create(engine, "only", sa.Column("k", sa.Integer, primary_key=True))
    _upsert_into(engine, only, ["k"], pa.record_batch({"k": [1, 2, 1]}))
    _upsert_into(engine, only, ["k"], pa.record_batch({"k": [2, 3]}))
    assert _all(engine, only) == [(1,), (2,), (3,)]


def test_upsert_rolls_back_with_the_callers_transaction(engine: Any) -> None:
    table = _people(engine)
    _upsert_into(engine, table, ["id"], _batch([1], ["a"], [1.0]))
    with pytest.raises(RuntimeError, match="crash"), engine.begin() as connection:
        upsert_rows(connection, table, [_batch([1, 2], ["changed", "new"], [9.0, 9.0])], ["id"])
        raise RuntimeError("crash before commit")
    assert _all(engine, table) == [(1, "a", 1.0)]


def test_a_table_without_a_unique_key_is_a_clear_error(engine: Any) -> None:
    loose = _create(engine, "loose", sa.Column("id", sa.Integer), sa.Column("v", sa.Text))
    with pytest.raises(mb.ConfigurationError, match="primary key or unique constraint"):
        _upsert_into(engine, loose, ["id"], pa.record_batch({"id": [1], "v": ["a"]}))
    assert _all(engine, loose) == []


def test_null_keys_are_refused_and_nothing_is_written(engine: Any) -> None:
    table = _people(engine)
    batch = _batch([1, 2], ["a", "b"], [1.0, 2.0])
    bad = pa.record_batch(
        {"id": pa.array([3, None], pa.int64()), "name": ["c", "d"], "score": [3.0, 4.0]}
    )
    with pytest.raises(UpsertKeyError, match=r"'id' is NULL at row 3"):
        _upsert_into(engine, table, ["id"], batch, bad)
    assert _all(engine, table) == []


def test_batches_with_different_columns_are_a_schema_mismatch(engine: Any) -> None:
    table = _people(engine)
    other = pa.record_batch({"id": [2], "name": ["b"], "score": ["2.0"]})
    with pytest.raises(mb.SchemaMismatchError, match="differ"):
        _upsert_into(engine, table, ["id"], _batch([1], ["a"], [1.0]), other)


def test_unknown_keys_are_configuration_errors(engine: Any) -> None:
    table = _people(engine)
    with pytest.raises(mb.ConfigurationError, match="'nope' is not a column"):
        _upsert_into(engine, table, ["nope"], _batch([1], ["a"], [1.0]))
    with pytest.raises(mb.ConfigurationError, match="at least one key"):
        _upsert_into(engine, table, [], _batch([1], ["a"], [1.0]))


def test_hostile_names_are_never_injected(engine: Any) -> None:
    victim = _create(engine, "victim", sa.Column("x", sa.Integer))
    with engine.begin() as connection:
        connection.execute(sa.insert(victim), [{"x": 1}])
    table = _create(
        engine,
        HOSTILE_TABLE,
        sa.Column(HOSTILE_KEY, sa.Integer, primary_key=True, autoincrement=False),
        sa.Column(HOSTILE_VALUE, sa.Text),
    )
    for values in (["a", "b"], ["c", "d"]):
        batch = pa.record_batch({HOSTILE_KEY: [1, 2], HOSTILE_VALUE: values})
        _upsert_into(engine, table, [HOSTILE_KEY], batch)
    assert _all(engine, table) == [(1, "c"), (2, "d")]
    assert _all(engine, victim) == [(1,)]


def test_the_staging_table_leaves_nothing_behind(postgres_database: Any) -> None:
    engine = sa.create_engine(postgres_database.url, pool_size=1)
    table = _people(engine)
    staging = "SELECT count(*) FROM pg_class WHERE starts_with(relname, 'microbatch_staging')"
    with engine.begin() as connection:
        upsert_rows(connection, table, [_batch([1], ["a"], [1.0])], ["id"])
        upsert_rows(connection, table, [_batch([1], ["b"], [2.0])], ["id"])
        assert connection.exec_driver_sql(staging).scalar() == 0  # dropped at once
    with pytest.raises(CopyValueError, match="'score'"), engine.begin() as connection:
        bad = pa.record_batch({"id": [5, 6], "name": ["x", "y"], "score": ["1.5", "oops"]})
        upsert_rows(connection, table, [bad], ["id"])  # fails inside COPY into the staging
    with engine.connect() as connection:  # the same pooled session
        assert connection.exec_driver_sql(staging).scalar() == 0
    with psycopg.connect(postgres_database.dsn) as other:
        assert other.execute(staging).fetchone() == (0,)
    assert _all(engine, table) == [(1, "b", 2.0)]
    engine.dispose()


def test_table_columns_the_batch_lacks_keep_their_defaults(engine: Any) -> None:
    table = _create(
        engine,
        "defaults",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("v", sa.Text),
        sa.Column("origin", sa.Text, nullable=False, server_default="sink"),
    )
    _upsert_into(engine, table, ["id"], pa.record_batch({"id": [1, 2], "v": ["a", "b"]}))
    _upsert_into(engine, table, ["id"], pa.record_batch({"id": [2], "v": ["c"]}))
    assert _all(engine, table) == [(1, "a", "sink"), (2, "c", "sink")]


def test_upsert_through_copy_round_trips_types(postgres_database: Any) -> None:
    engine = sa.create_engine(postgres_database.url)
    with psycopg.connect(postgres_database.dsn, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE typed (id uuid PRIMARY KEY, at timestamptz, amount numeric(10,2), "
            "doc jsonb, small int2)"
        )
    table = sa.Table("typed", sa.MetaData(), autoload_with=engine)
    ident = uuid.uuid4()
    when = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC)
    for amount in (Decimal("1.25"), Decimal("99999999.99")):
        batch = pa.record_batch(
            {
                "id": [str(ident)],
                "at": pa.array([when], pa.timestamp("us", "UTC")),
                "amount": pa.array([amount], pa.decimal128(10, 2)),
                "doc": ['{"n": 1}'],
                "small": pa.array([7], pa.int64()),
            }
        )
        _upsert_into(engine, table, ["id"], batch)
    with psycopg.connect(postgres_database.dsn) as connection:
        assert connection.execute("SELECT * FROM typed").fetchall() == [
            (ident, when, Decimal("99999999.99"), {"n": 1}, 7)
        ]
    engine.dispose()


def test_nested_columns_fall_back_to_insert_into_the_staging_table(
    postgres_database: Any,
) -> None:
    engine = sa.create_engine(postgres_database.url)
    table = _create(
        engine,
        "docs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("doc", sa.dialects.postgresql.JSONB),
    )
    for value in ({"a": 1, "b": [1, 2]}, {"a": 2, "b": []}):
        batch = pa.record_batch({"id": [1], "doc": pa.array([value])})
        _upsert_into(engine, table, ["id"], batch)
    assert _all(engine, table) == [(1, {"a": 2, "b": []})]
    engine.dispose()
