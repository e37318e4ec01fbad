"""Helpers for the DatetimeParser tests: Spark's shown values as numbers, and a check that
parse() and parse_one() both give what Spark gave."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

from microbatch._datetime_calendar import _days
from microbatch.spark_datetime import DatetimeKind, DatetimeParser

_SPARK_VALUE = re.compile(r"([+-]?\d+)-(\d\d)-(\d\d)(?: (\d\d):(\d\d):(\d\d)(?:\.(\d+))?)?")


def spark_value(kind: str, shown: str | None) -> int | None:
    """Days or microseconds since the epoch of a value as Spark shows it."""
    if shown is None:
        return None
    match = _SPARK_VALUE.fullmatch(shown)
    assert match, shown
    y, mo, d, h, mi, s, fraction = match.groups()
    days = _days(int(y), int(mo), int(d))
    if kind == "date":
        return days
    seconds = days * 86_400 + int(h) * 3600 + int(mi) * 60 + int(s)
    return seconds * 1_000_000 + int((fraction or "").ljust(6, "0"))


def as_python(kind: str, value: int) -> datetime | date:
    if kind == "date":
        return date(1970, 1, 1) + timedelta(days=value)
    moment = datetime(1970, 1, 1) + timedelta(microseconds=value)
    return moment.replace(tzinfo=UTC) if kind == "timestamp" else moment


def numbers(kind: str, values: pa.Array) -> list[int | None]:
    return values.cast(pa.int32() if kind == "date" else pa.int64()).to_pylist()


def check(
    kind: DatetimeKind, pattern: str | None, zone: str, text: str, shown: str | None, **kw: Any
) -> None:
    """parse() and parse_one() both give what Spark gave."""
    parser = DatetimeParser(kind, pattern, zone, **kw)
    values, bad = parser.parse(pa.array([text]))
    want = spark_value(kind, shown)
    assert numbers(kind, values) == [want], f"{text!r}: Spark read {shown}"
    assert bad.to_pylist() == [want is None]
    if want is None:
        assert parser.parse_one(text) is None
    elif -719_162 <= (want if kind == "date" else want // 86_400_000_000) <= 2_932_896:
        assert parser.parse_one(text) == as_python(kind, want)
    else:  # outside Python's years 1 to 9999
        with pytest.raises(OverflowError):
            parser.parse_one(text)
