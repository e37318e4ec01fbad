"""The jdbc stream's offsets: JSON that keeps every kind of value exactly, and literals."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import socket
from typing import Any

import pytest

import microbatch as mb
from microbatch_jdbc._incremental import IncrementalColumn
from microbatch_jdbc.source import JdbcSource


@pytest.mark.parametrize(
    ("kind", "value", "as_json", "literal"),
    [
        ("integer", 2**62 + 1, 2**62 + 1, "4611686018427387905"),
        (
            "decimal",
            decimal.Decimal("12345678901234567890.123456"),
            "12345678901234567890.123456",
            "12345678901234567890.123456",
        ),
        ("float", 0.1, 0.1, "0.1"),
        ("date", dt.date(2024, 2, 29), "2024-02-29", "'2024-02-29'"),
        (
            "timestamp",
            dt.datetime(2024, 5, 1, 12, 0, 0, 7),
            "2024-05-01T12:00:00.000007",
            "'2024-05-01 12:00:00.000007'",
        ),
        ("timestamp", "2024-05-01 12:00:00", "2024-05-01T12:00:00", "'2024-05-01 12:00:00.000000'"),
        (
            "timestamptz",
            dt.datetime(2024, 5, 1, 14, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            "2024-05-01T12:00:00+00:00",
            "'2024-05-01 12:00:00.000000+00:00'",
        ),
    ],
)
def test_values_survive_json_and_become_literals(
    kind: Any, value: Any, as_json: Any, literal: str
) -> None:
    column = IncrementalColumn("c", '"c"', kind)
    stored = column.to_json(value)
    assert stored == as_json
    again = json.loads(json.dumps({"incrementalColumn": stored}))["incrementalColumn"]
    assert column.parse(again) == column.parse(value)
    assert column.literal(again) == literal


def test_the_next_end_is_the_largest_of_the_next_rows() -> None:
    column = IncrementalColumn("id", '"id"', "integer")
    assert column.end_query('"t"', 5, None, 3, None, "postgresql") == (
        'SELECT MAX(mb_value) FROM (SELECT "id" AS mb_value FROM "t" WHERE "id" IS NOT NULL '
        'AND "id" > 5 ORDER BY "id" LIMIT 3) mb_next'
    )
    assert "SELECT TOP 3 " in column.end_query('"t"', 5, None, 3, None, "mssql")
    assert column.range_query('"t"', None, 9) == (
        'SELECT * FROM "t" WHERE "id" IS NOT NULL AND "id" <= 9 ORDER BY "id"'
    )


def test_an_unreachable_database_is_retriable_and_hides_the_password() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = {"url": f"postgresql+psycopg://app:s3cretpw@127.0.0.1:{port}/db", "dbtable": "t"}
    source = JdbcSource(JdbcSource.options.parse(options, connector="jdbc"), streaming=False)
    with pytest.raises(mb.RetriableError) as caught:
        source.schema()
    assert "s3cretpw" not in str(caught.value)
    assert "app:***@127.0.0.1" in str(caught.value)
