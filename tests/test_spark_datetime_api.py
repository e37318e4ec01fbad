"""DatetimeParser's options, argument checks, result types and nulls."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch.spark_datetime import DatetimeKind, DatetimeParser

sys.path.insert(0, str(Path(__file__).parent))
from _spark_datetime_testing import numbers, spark_value


@pytest.mark.parametrize("zone", ["UTC", "Z", "PST", "EST", "+01:00", "-1:30", "GMT+1", "UTC-08:00",
                                  "America/New_York", "Asia/Kolkata", "Etc/GMT-14"])  # fmt: skip
def test_time_zones_spark_accepts(zone: str) -> None:
    assert DatetimeParser("timestamp", time_zone=zone).parse_one("2020-01-02") is not None


@pytest.mark.parametrize("zone", ["", "Mars/Olympus", "america/new_york", "+19:00", "UTC0", "PDT"])
def test_an_unknown_time_zone_is_rejected(zone: str) -> None:
    with pytest.raises(ValueError, match="timeZone"):
        DatetimeParser("timestamp", time_zone=zone)


def test_an_unknown_kind_or_reader_is_rejected() -> None:
    wrong: Any = "xml"
    with pytest.raises(ValueError, match="kind"):
        DatetimeParser(wrong)
    with pytest.raises(ValueError, match="reader"):
        DatetimeParser("date", reader=wrong)


@pytest.mark.parametrize(
    ("kind", "arrow_type"),
    [("timestamp", pa.timestamp("us", tz="UTC")), ("timestamp_ntz", pa.timestamp("us")),
     ("date", pa.date32())],
)  # fmt: skip
def test_nulls_types_and_bad_rows(kind: DatetimeKind, arrow_type: pa.DataType) -> None:
    parser = DatetimeParser(kind)
    for values in (pa.array([None, "2020-01-02", "", "nope"]),
                   pa.array([None, "2020-01-02", "", "nope"], pa.large_string()),
                   pa.chunked_array([[None, "2020-01-02"], ["", "nope"]])):  # fmt: skip
        parsed, bad = parser.parse(values)
        assert parsed.type == arrow_type
        assert parsed.null_count == 3
        assert parsed[1].as_py() == parser.parse_one("2020-01-02")
        assert bad.to_pylist() == [False, False, True, True]
    empty, none_bad = parser.parse(pa.array([], pa.string()))
    assert len(empty) == 0 and len(none_bad) == 0
    with pytest.raises(TypeError, match="string array"):
        parser.parse(pa.array([1]))


def test_values_outside_pythons_years_come_back_from_parse() -> None:
    parser = DatetimeParser("timestamp")
    parsed, bad = parser.parse(pa.array(["+12020-01-02", "-0044-03-15T00:00:00Z"]))
    shown = ["+12020-01-02 00:00:00", "-0044-03-15 00:00:00"]
    assert numbers("timestamp", parsed) == [spark_value("timestamp", v) for v in shown]
    assert bad.true_count == 0
    with pytest.raises(OverflowError):
        parser.parse_one("+12020-01-02")
    assert DatetimeParser("date").parse_one("0001-01-01") == date(1, 1, 1)
