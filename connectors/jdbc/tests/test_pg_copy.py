"""Binary COPY into real PostgreSQL: every supported type round-trips exactly (read back with
psycopg), values that do not fit name their column and row, and COPY shares the caller's
transaction with a ledger row."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlalchemy as sa

import microbatch as mb
from microbatch_jdbc import _pg_copy
from microbatch_jdbc._pg_copy import CopyNotSupported, CopyValueError, can_copy, copy_rows

UTC = dt.UTC


@pytest.fixture
def engine(postgres_database: Any) -> Any:
    engine = sa.create_engine(postgres_database.url)
    yield engine
    engine.dispose()


def _ddl(dsn: str, statement: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(statement)


def _rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as connection:
        return connection.execute(query).fetchall()


def _table(engine: Any, name: str, schema: str | None = None) -> sa.Table:
    return sa.Table(name, sa.MetaData(), schema=schema, autoload_with=engine)


def _copy(engine: Any, table: sa.Table, *batches: pa.RecordBatch) -> int:
    with engine.begin() as connection:
        return copy_rows(connection, table, batches)


def test_can_copy_is_true_for_psycopg_and_false_for_sqlite(engine: Any, tmp_path: Any) -> None:
    with engine.connect() as connection:
        assert can_copy(connection)
    lite = sa.create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with lite.connect() as connection:
        assert not can_copy(connection)
    lite.dispose()


def test_every_supported_type_round_trips_exactly(postgres_database: Any, engine: Any) -> None:
    _ddl(
        postgres_database.dsn,
        """CREATE TABLE every (
            i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, n numeric(12,3), nu numeric,
            t text, v varchar(20), c char(3), b bytea, ok bool, j json, jb jsonb, u uuid,
            u2 uuid, d date, ts timestamp, tz timestamptz, tm time, iv interval,
            ai int4[], at text[], af float8[], an numeric[], ajb jsonb[], ats timestamp[])""",
    )
    when = dt.datetime(2024, 2, 29, 23, 59, 58, 123456)
    ident = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")
    batch = pa.record_batch(
        {
            "i2": pa.array([-32768, 32767, None], pa.int64()),
            "i4": pa.array([-(2**31), 2**31 - 1, None], pa.int64()),
            "i8": pa.array([-(2**63), 2**63 - 1, None], pa.int64()),
            "f4": pa.array([1.5, -0.25, None], pa.float64()),
            "f8": pa.array([1e300, -2.5e-300, None], pa.float64()),
            "n": pa.array([Decimal("123456789.123"), Decimal("-0.001"), None]),
            "nu": pa.array([Decimal("-12345678901234567.89012345678901"), Decimal(0), None]),
            "t": pa.array(["héllo", "", None]),
            "v": pa.array(["a" * 20, "b", None], pa.large_string()),
            "c": pa.array(["abc", "x", None]),
            "b": pa.array([b"\x00\xff", b"", None]),
            "ok": pa.array([True, False, None]),
            "j": pa.array(['{"a": [1, 2]}', "3", None]),
            "jb": pa.array(['{"b": {"c": null}}', "[]", None]),
            "u": pa.array([str(ident), "{" + ident.hex.upper() + "}", None]),
            "u2": pa.array([ident.bytes, uuid.UUID(int=0).bytes, None], pa.binary(16)),
            "d": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31), None]),
            "ts": pa.array([when, dt.datetime(1970, 1, 1), None], pa.timestamp("ns")),
            "tz": pa.array(
                [when.replace(tzinfo=UTC), dt.datetime(1999, 12, 31, tzinfo=UTC), None],
                pa.timestamp("us", "Asia/Tokyo"),
            ),
            "tm": pa.array([dt.time(23, 59, 59, 999999), dt.time(0), None]),
            "iv": pa.array([dt.timedelta(days=40, microseconds=7), dt.timedelta(0), None]),
            "ai": pa.array([[1, None, -3], [], None], pa.list_(pa.int64())),
            "at": pa.array([["x", None], ["y"], None]),
            "af": pa.array([[0.5], [], None], pa.large_list(pa.float64())),
            "an": pa.array([[Decimal("1.50")], [None], None]),
            "ajb": pa.array([['{"k": 1}'], [], None]),
            "ats": pa.array([[when], [], None], pa.list_(pa.timestamp("us"))),
        }
    )
    assert _copy(engine, _table(engine, "every"), batch) == 3
    nulls = pa.record_batch({name: pa.nulls(2) for name in batch.schema.names})
    assert _copy(engine, _table(engine, "every"), nulls) == 2  # columns of nulls only
    rows = _rows(postgres_database.dsn, "SELECT * FROM every ORDER BY i2 NULLS LAST")
    assert rows[2:] == [(None,) * 27] * 3
    assert rows[0] == (
        -32768, -(2**31), -(2**63), 1.5, 1e300, Decimal("123456789.123"),
        Decimal("-12345678901234567.89012345678901"), "héllo", "a" * 20, "abc", b"\x00\xff",
        True, {"a": [1, 2]}, {"b": {"c": None}}, ident, ident, dt.date(1, 1, 1), when,
        when.replace(tzinfo=UTC), dt.time(23, 59, 59, 999999),
        dt.timedelta(days=40, microseconds=7), [1, None, -3], ["x", None], [0.5],
        [Decimal("1.50")], [{"k": 1}], [when],
    )  # fmt: skip
    assert rows[1][:12] == (
        32767, 2**31 - 1, 2**63 - 1, -0.25, -2.5e-300, Decimal("-0.001"), Decimal(0), "", "b",
        "x  ", b"", False,
    )  # fmt: skip
    assert rows[1][12:] == (
        3, [], ident, uuid.UUID(int=0), dt.date(9999, 12, 31),
        dt.datetime(1970, 1, 1), dt.datetime(1999, 12, 31, tzinfo=UTC), dt.time(0),
        dt.timedelta(0), [], ["y"], [], [None], [], [],
    )  # fmt: skip


def test_loose_arrow_types_are_cast_to_the_columns(postgres_database: Any, engine: Any) -> None:
    _ddl(postgres_database.dsn, "CREATE TABLE loose (i int4, n numeric(6,2), d date, u uuid)")
    ident = uuid.uuid4()
    batch = pa.record_batch(
        {
            "i": pa.array(["12", "-7"]),
            "n": pa.array([1234, -5], pa.int64()),
            "d": pa.array([dt.datetime(2020, 1, 1, 5), dt.datetime(2020, 1, 2)]),
            "u": pa.array([ident.bytes, ident.bytes], pa.uuid()),
        }
    )
    _copy(engine, _table(engine, "loose"), batch)
    assert _rows(postgres_database.dsn, "SELECT * FROM loose ORDER BY i") == [
        (-7, Decimal("-5.00"), dt.date(2020, 1, 2), ident),
        (12, Decimal("1234.00"), dt.date(2020, 1, 1), ident),
    ]


def test_integer_overflow_names_the_column_and_the_row(postgres_database: Any, engine: Any) -> None:
    _ddl(postgres_database.dsn, "CREATE TABLE small (id int8, amount int4)")
    table = _table(engine, "small")
    good = pa.record_batch({"id": [1, 2], "amount": [1, 2]})
    bad = pa.record_batch({"id": [3, 4, 5], "amount": [3, 2**31, 5]})
    with pytest.raises(CopyValueError) as caught:
        _copy(engine, table, good, bad)
    assert caught.value.column == "amount"
    assert caught.value.row == 3  # counted across the batches of the call
    assert "'amount' (int4)" in str(caught.value) and "2147483648" in str(caught.value)
    assert _rows(postgres_database.dsn, "SELECT count(*) FROM small") == [(0,)]


@pytest.mark.parametrize(
    ("ddl", "values", "shown"),
    [
        ("int2", pa.array([1, 70000], pa.int32()), "70000"),
        ("uuid", pa.array(["0" * 32, "not-a-uuid"]), "uuid"),
        ("timestamp", pa.array([0, 1], pa.timestamp("ns")), "timestamp"),
        ("numeric(4,1)", pa.array([Decimal("1.0"), Decimal("12345.0")]), "numeric(4,1)"),
        ("int4", pa.array(["1", "x"]), "'x'"),
    ],
)
def test_values_that_do_not_fit_are_clear_errors(
    postgres_database: Any, engine: Any, ddl: str, values: pa.Array, shown: str
) -> None:
    _ddl(postgres_database.dsn, f"CREATE TABLE fit (x {ddl})")
    with pytest.raises(CopyValueError, match=r"column 'x'") as caught:
        _copy(engine, _table(engine, "fit"), pa.record_batch({"x": values}))
    assert shown in str(caught.value)
    assert caught.value.row == 1


def test_unsupported_column_types_are_refused_before_writing(
    postgres_database: Any, engine: Any
) -> None:
    _ddl(
        postgres_database.dsn,
        "CREATE TABLE odd (a timestamptz[], b varchar[], c numeric, d numeric(6,2), e money)",
    )
    batch = pa.record_batch(
        {
            "a": pa.array([[dt.datetime(2020, 1, 1, tzinfo=UTC)]]),
            "b": pa.array([["x"]]),
            "c": pa.array([1.5]),
            "d": pa.array([0.125]),
            "e": pa.array([1]),
        }
    )
    with pytest.raises(CopyNotSupported) as caught:
        _copy(engine, _table(engine, "odd"), batch)
    for column in ("'a'", "'b'", "'c'", "'d'", "'e'"):
        assert column in str(caught.value)


def test_a_batch_column_the_table_lacks_is_a_schema_mismatch(
    postgres_database: Any, engine: Any
) -> None:
    _ddl(postgres_database.dsn, "CREATE TABLE narrow (a int8)")
    with pytest.raises(mb.SchemaMismatchError, match="no column 'b'"):
        _copy(engine, _table(engine, "narrow"), pa.record_batch({"a": [1], "b": [2]}))


def test_naive_and_zoned_timestamps_convert_through_the_session_zone(
    postgres_database: Any,
) -> None:
    _ddl(postgres_database.dsn, "CREATE TABLE times (tz timestamptz, ts timestamp)")
    engine = sa.create_engine(
        postgres_database.url, connect_args={"options": "-c TimeZone=Europe/Paris"}
    )
    wall = dt.datetime(2024, 7, 1, 12, 0)
    batch = pa.record_batch(
        {
            "tz": pa.array([wall], pa.timestamp("us")),  # 12:00 in Paris = 10:00 UTC
            "ts": pa.array([wall.replace(tzinfo=UTC)], pa.timestamp("us", "UTC")),
        }
    )
    with engine.begin() as connection:
        copy_rows(connection, _table(engine, "times"), [batch])
        # the server's own conversions, for comparison
        expected = connection.exec_driver_sql(
            "SELECT timestamp '2024-07-01 12:00'::timestamptz, "
            "(timestamptz '2024-07-01 12:00+00')::timestamp"
        ).one()
    engine.dispose()
    got = _rows(postgres_database.dsn, "SELECT tz, ts FROM times")[0]
    assert got[0] == dt.datetime(2024, 7, 1, 10, 0, tzinfo=UTC) == expected[0]
    assert got[1] == dt.datetime(2024, 7, 1, 14, 0) == expected[1]


def test_wall_times_at_daylight_saving_transitions_read_as_the_server_reads_them(
    postgres_database: Any,
) -> None:
    _ddl(postgres_database.dsn, "CREATE TABLE dst (n int4, tz timestamptz)")
    engine = sa.create_engine(
        postgres_database.url, connect_args={"options": "-c TimeZone=America/New_York"}
    )
    walls = ["2024-03-10 02:30:00", "2024-11-03 01:30:00", "2024-11-03 00:59:59.5", "2024-06-01"]
    batch = pa.record_batch(
        {"n": list(range(len(walls))), "tz": pc.cast(pa.array(walls), pa.timestamp("us"))}
    )
    server = sa.text("SELECT CAST(CAST(:w AS timestamp) AS timestamptz)")
    with engine.begin() as connection:
        copy_rows(connection, _table(engine, "dst"), [batch])
        expected = [connection.execute(server, {"w": w}).scalar() for w in walls]
    engine.dispose()
    got = [row[0] for row in _rows(postgres_database.dsn, "SELECT tz FROM dst ORDER BY n")]
    # as instants: PEP 495 makes an ambiguous wall time unequal to any other zone's datetime
    assert [value.timestamp() for value in got] == [value.timestamp() for value in expected]


def test_copy_and_a_ledger_row_commit_and_roll_back_together(
    postgres_database: Any, engine: Any
) -> None:
    _ddl(postgres_database.dsn, "CREATE TABLE events (id int8, name text)")
    with psycopg.connect(postgres_database.dsn) as setup:
        mb.BatchLedger(setup, key="q")  # creates the ledger table and commits
    table = _table(engine, "events")
    batch = pa.record_batch({"id": [1, 2], "name": ["a", "b"]})

    with pytest.raises(RuntimeError, match="crash"), engine.begin() as connection:
        assert copy_rows(connection, table, [batch]) == 2
        ledger = mb.BatchLedger(
            connection.connection.driver_connection, key="q", create_table=False
        )
        ledger.mark_applied(0)
        raise RuntimeError("crash before commit")
    assert _rows(postgres_database.dsn, "SELECT count(*) FROM events") == [(0,)]
    assert _rows(postgres_database.dsn, "SELECT count(*) FROM microbatch_ledger") == [(0,)]

    with engine.begin() as connection:
        copy_rows(connection, table, [batch])
        mb.BatchLedger(
            connection.connection.driver_connection, key="q", create_table=False
        ).mark_applied(0)
    assert _rows(postgres_database.dsn, "SELECT id, name FROM events ORDER BY id") == [
        (1, "a"),
        (2, "b"),
    ]
    assert _rows(postgres_database.dsn, "SELECT batch_id FROM microbatch_ledger") == [(0,)]


def test_hostile_table_and_column_names_are_quoted(postgres_database: Any, engine: Any) -> None:
    schema = 'we"ird; DROP TABLE victim; --'
    name = "t'); DROP TABLE victim; --"
    column = 'c" int); DROP TABLE victim; --'
    _ddl(postgres_database.dsn, "CREATE TABLE victim (x int)")
    with psycopg.connect(postgres_database.dsn, autocommit=True) as connection:
        connection.execute(
            psycopg.sql.SQL("CREATE SCHEMA {}").format(psycopg.sql.Identifier(schema))
        )
        connection.execute(
            psycopg.sql.SQL('CREATE TABLE {} ({} int8, "Mixed Case" text)').format(
                psycopg.sql.Identifier(schema, name), psycopg.sql.Identifier(column)
            )
        )
    table = _table(engine, name, schema=schema)
    batch = pa.record_batch({column: [7], "Mixed Case": ["ok"]})
    assert _copy(engine, table, batch) == 1
    with psycopg.connect(postgres_database.dsn) as connection:
        query = psycopg.sql.SQL("SELECT * FROM {}").format(psycopg.sql.Identifier(schema, name))
        assert connection.execute(query).fetchall() == [(7, "ok")]
    assert _rows(postgres_database.dsn, "SELECT count(*) FROM victim") == [(0,)]


def test_many_batches_and_slices_keep_every_row_in_order(
    postgres_database: Any, engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_pg_copy, "_SLICE_ROWS", 1000)
    _ddl(postgres_database.dsn, "CREATE TABLE seq (n int4, label text, extra int8 DEFAULT 9)")
    batches = [
        pa.record_batch({"n": pa.array(range(start, start + 2500)), "label": ["x"] * 2500})
        for start in range(0, 10_000, 2500)
    ]
    empty = pa.record_batch({"n": pa.array([], pa.int64()), "label": pa.array([], pa.string())})
    assert _copy(engine, _table(engine, "seq"), empty, *batches, empty) == 10_000
    assert _rows(postgres_database.dsn, "SELECT count(*), sum(n), min(extra) FROM seq") == [
        (10_000, sum(range(10_000)), 9)
    ]
    assert _copy(engine, _table(engine, "seq"), empty) == 0


def test_later_batches_may_bring_other_arrow_types(postgres_database: Any, engine: Any) -> None:
    _ddl(postgres_database.dsn, "CREATE TABLE later (n int4, xs int8[], u uuid, amount numeric)")
    ident = uuid.uuid4()
    first = pa.record_batch(
        {
            "n": pa.array([1], pa.int64()),
            "xs": pa.nulls(1),
            "u": pa.nulls(1),
            "amount": pa.array([Decimal("1.5")], pa.decimal128(5, 1)),
        }
    )
    second = pa.record_batch(
        {
            "n": pa.array([2], pa.int16()),
            "xs": pa.array([[1, 2]]),
            "u": [str(ident)],
            "amount": pa.array([Decimal("2.25")], pa.decimal128(6, 2)),
        }
    )
    # an unconstrained numeric takes the first batch's scale for the whole COPY
    with pytest.raises(CopyValueError, match=r"'amount'.*Rescaling"):
        _copy(engine, _table(engine, "later"), first, second)
    third = second.set_column(3, "amount", pa.array([Decimal("2.5")], pa.decimal128(6, 2)))
    assert _copy(engine, _table(engine, "later"), first, third) == 2
    assert _rows(postgres_database.dsn, "SELECT * FROM later ORDER BY n") == [
        (1, None, None, Decimal("1.5")),
        (2, [1, 2], ident, Decimal("2.5")),
    ]


def test_a_server_error_rolls_back_and_names_the_column(
    postgres_database: Any, engine: Any
) -> None:
    _ddl(postgres_database.dsn, "CREATE TABLE strict (id int8 NOT NULL, code varchar(2))")
    table = _table(engine, "strict")
    with pytest.raises(sa.exc.DataError, match="column code") as caught:
        _copy(engine, table, pa.record_batch({"id": [1], "code": ["abc"]}))
    assert "too long" in str(caught.value)
    with pytest.raises(sa.exc.IntegrityError, match='"id"'):
        _copy(engine, table, pa.record_batch({"id": pa.array([None], pa.int64()), "code": ["a"]}))
    assert _rows(postgres_database.dsn, "SELECT count(*) FROM strict") == [(0,)]


def test_a_connection_lost_during_copy_is_retriable(postgres_database: Any, engine: Any) -> None:
    from microbatch_jdbc._connection import is_retriable

    _ddl(postgres_database.dsn, "CREATE TABLE lost (n int8)")
    table = _table(engine, "lost")

    def batches(pid: int) -> Any:
        yield pa.record_batch({"n": list(range(1000))})
        with psycopg.connect(postgres_database.dsn, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", [pid])
        yield pa.record_batch({"n": list(range(1000))})

    with pytest.raises(sa.exc.DBAPIError) as caught, engine.begin() as connection:
        pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        copy_rows(connection, table, batches(pid))
    assert caught.value.connection_invalidated
    assert is_retriable(caught.value)
    assert _rows(postgres_database.dsn, "SELECT count(*) FROM lost") == [(0,)]
