"""An independent client, ``psql``, and the ``jdbc`` connector read each other's tables.

- A table the sink wrote (a streaming query, available-now) is read by ``psql`` and compared
  as text, value by value: integers, doubles, numerics with their scale, timestamps with and
  without a time zone (``PGTZ=UTC``), dates, booleans, bytea, nulls and unicode text.
- A table ``psql`` created and filled (``CREATE TABLE`` + ``INSERT`` of many types) reads back
  through the batch source with the same values and the Arrow types the README documents.

``psql`` is found next to the server binaries the testkit uses (``find_postgres_bin``), or on
PATH.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch_testkit._engine import ROWS_FORMAT, RowsSource, ensure_registered
from microbatch_testkit.services._postgres_local import find_postgres_bin

NULL = "<NULL>"
FIELD, RECORD = "\x1f", "\x1e"


def psql_binary() -> str:
    folder = find_postgres_bin()
    if folder is not None and (folder / "psql").is_file():
        return str(folder / "psql")
    found = shutil.which("psql")
    if found is None:
        pytest.skip("psql is neither next to the PostgreSQL server binaries nor on PATH")
    return found


def psql(dsn: str, sql: str) -> list[list[str]]:
    """Run ``sql`` with psql (unaligned, tuples only, ``<NULL>`` for null, UTC) and return
    its rows as lists of text fields; a psql error fails the test with its message."""
    completed = subprocess.run(
        [
            psql_binary(),
            "--no-psqlrc",
            "--set=ON_ERROR_STOP=1",
            "--no-align",
            "--tuples-only",
            f"--field-separator={FIELD}",
            f"--record-separator={RECORD}",
            f"--pset=null={NULL}",
            f"--dbname={dsn}",
            "--command",
            sql,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PGTZ": "UTC", "PGCLIENTENCODING": "UTF8"},
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, f"psql failed: {completed.stderr}"
    out = completed.stdout.removesuffix("\n")
    return [record.split(FIELD) for record in out.split(RECORD) if record]


UTC = dt.UTC
SINK_ROWS = pa.table(
    {
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "small": pa.array([7, -32768, None, 32767], pa.int16()),
        "amount": pa.array([0.1, -2.5, 1e300, None], pa.float64()),
        "price": pa.array(
            [Decimal("12345.678"), Decimal("-0.500"), None, Decimal("0.001")], pa.decimal128(12, 3)
        ),
        "name": pa.array(["plain", "héllo ✓ 𝄞", "", None], pa.string()),
        "at": pa.array(
            [
                dt.datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC),
                dt.datetime(1970, 1, 1, tzinfo=UTC),
                None,
                dt.datetime(2038, 1, 19, 3, 14, 8, 1, tzinfo=UTC),
            ],
            pa.timestamp("us", tz="UTC"),
        ),
        "local": pa.array(
            [dt.datetime(2024, 2, 29, 12, 0, 0, 500000), None, dt.datetime(1999, 12, 31), None],
            pa.timestamp("us"),
        ),
        "day": pa.array([dt.date(2024, 2, 29), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)]),
        "flag": pa.array([True, False, None, True]),
        "blob": pa.array([b"\x00\xff", b"", None, b"abc"], pa.binary()),
    }
)
SINK_TEXT = [
    ["1", "7", "0.1", "12345.678", "plain", "2024-02-29 23:59:59.123456+00",
     "2024-02-29 12:00:00.5", "2024-02-29", "t", "\\x00ff"],
    ["2", "-32768", "-2.5", "-0.500", "héllo ✓ 𝄞", "1970-01-01 00:00:00+00", NULL,
     NULL, "f", "\\x"],
    ["3", NULL, "1e+300", NULL, "", NULL, "1999-12-31 00:00:00", "0001-01-01", NULL, NULL],
    ["4", "32767", NULL, "0.001", NULL, "2038-01-19 03:14:08.000001+00", NULL, "9999-12-31",
     "t", "\\x616263"],
]  # fmt: skip
"""What psql prints for SINK_ROWS, as PostgreSQL's own output functions write the values."""


def test_psql_reads_the_table_the_sink_wrote(postgres_database: Any, tmp_path: Path) -> None:
    session = mb.Session()
    ensure_registered(session, "source", RowsSource)
    query = (
        session.read_stream.format(ROWS_FORMAT)
        .option(
            "batches", [[SINK_ROWS.slice(0, 2).to_batches()], [SINK_ROWS.slice(2).to_batches()]]
        )
        .option("rowsSchema", SINK_ROWS.schema)
        .load()
        .write_stream.format("jdbc")
        .option("url", postgres_database.url)
        .option("dbtable", "written")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(60)
    assert query.exception() is None
    columns = ", ".join(SINK_ROWS.schema.names)
    assert psql(postgres_database.dsn, f"SELECT {columns} FROM written ORDER BY id") == SINK_TEXT
    ledger = psql(postgres_database.dsn, "SELECT batch_id FROM microbatch_ledger ORDER BY 1")
    assert ledger == [["0"], ["1"]]


PSQL_TABLE = """
CREATE TABLE "Typed" (
  id integer PRIMARY KEY, tiny smallint, big bigint, real_ real, dbl double precision,
  num numeric(10, 4), txt text, vc varchar(20), ch char(3), flag boolean, day date,
  ts timestamp, tstz timestamptz, bytes bytea, doc jsonb, ident uuid
);
INSERT INTO "Typed" VALUES
  (1, 1, 9007199254740993, 1.5, 0.1, 3.1416, 'ünïcødé ✓ 𝄞', 'short', 'ab', true,
   '2024-02-29', '2024-02-29 12:34:56.789', '2024-02-29 12:34:56.789+02', '\\x00ff10',
   '{"a": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
  (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (3, -32768, -9223372036854775808, -0.25, -1e-300, -999999.9999, '', 'x', 'xyz', false,
   '0001-01-01', '1970-01-01 00:00:00', '1970-01-01 00:00:00+00', '\\x', 'null',
   '00000000-0000-0000-0000-000000000000');
"""
PSQL_TYPES = {
    "id": pa.int32(),
    "tiny": pa.int16(),
    "big": pa.int64(),
    "real_": pa.float32(),
    "dbl": pa.float64(),
    "num": pa.decimal128(10, 4),
    "txt": pa.string(),
    "vc": pa.string(),
    "ch": pa.string(),
    "flag": pa.bool_(),
    "day": pa.date32(),
    "ts": pa.timestamp("us"),
    "tstz": pa.timestamp("us", tz="UTC"),
    "bytes": pa.binary(),
    "doc": pa.string(),
    "ident": pa.string(),
}
PSQL_VALUES = [
    {
        "id": 1, "tiny": 1, "big": 9007199254740993, "real_": 1.5, "dbl": 0.1,
        "num": Decimal("3.1416"), "txt": "ünïcødé ✓ 𝄞", "vc": "short", "ch": "ab ",
        "flag": True, "day": dt.date(2024, 2, 29),
        "ts": dt.datetime(2024, 2, 29, 12, 34, 56, 789000),
        "tstz": dt.datetime(2024, 2, 29, 10, 34, 56, 789000, tzinfo=UTC),
        "bytes": b"\x00\xff\x10", "doc": '{"a": [1, 2]}',
        "ident": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    },
    {"id": 2, **{name: None for name in PSQL_TYPES if name != "id"}},
    {
        "id": 3, "tiny": -32768, "big": -9223372036854775808, "real_": -0.25, "dbl": -1e-300,
        "num": Decimal("-999999.9999"), "txt": "", "vc": "x", "ch": "xyz", "flag": False,
        "day": dt.date(1, 1, 1), "ts": dt.datetime(1970, 1, 1),
        "tstz": dt.datetime(1970, 1, 1, tzinfo=UTC), "bytes": b"", "doc": "null",
        "ident": "00000000-0000-0000-0000-000000000000",
    },
]  # fmt: skip


def _comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Timestamps with a time zone compared as instants (the zone object may differ)."""
    return [
        {
            k: v.astimezone(UTC) if isinstance(v, dt.datetime) and v.tzinfo else v
            for k, v in r.items()
        }
        for r in rows
    ]


@pytest.mark.parametrize("partitioned", [False, True], ids=["whole", "partitioned"])
def test_the_batch_source_reads_a_table_psql_wrote(
    postgres_database: Any, partitioned: bool
) -> None:
    psql(postgres_database.dsn, PSQL_TABLE)
    assert psql(postgres_database.dsn, 'SELECT count(*) FROM "Typed"') == [["3"]]
    reader = (
        mb.Session()
        .read.format("jdbc")
        .option("url", postgres_database.url)
        .option("dbtable", "Typed")
    )
    if partitioned:
        reader = (
            reader.option("partitionColumn", "id")
            .option("lowerBound", 1)
            .option("upperBound", 4)
            .option("numPartitions", 3)
        )
    table = reader.load()
    assert dict(zip(table.schema.names, table.schema.types, strict=True)) == PSQL_TYPES
    rows = sorted(table.to_pylist(), key=lambda row: row["id"])
    assert _comparable(rows) == _comparable(PSQL_VALUES)
