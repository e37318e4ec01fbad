"""DatetimeParser with a datetime pattern against Apache Spark 4's JSON and CSV readers, and
the patterns Spark cannot parse with."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from microbatch.spark_datetime import DatetimeKind, DatetimeParser

sys.path.insert(0, str(Path(__file__).parent))
from _spark_datetime_pattern_cases import DATE_PATTERN, NTZ_PATTERN, TIMESTAMP_PATTERN
from _spark_datetime_testing import check


@pytest.mark.parametrize(("pattern", "zone", "text", "shown"), TIMESTAMP_PATTERN)
def test_timestamp_pattern(pattern: str, zone: str, text: str, shown: str | None) -> None:
    check("timestamp", pattern, zone, text, shown)


@pytest.mark.parametrize(("pattern", "zone", "text", "shown"), NTZ_PATTERN)
def test_timestamp_ntz_pattern(pattern: str, zone: str, text: str, shown: str | None) -> None:
    check("timestamp_ntz", pattern, zone, text, shown)


@pytest.mark.parametrize(("pattern", "zone", "text", "shown"), DATE_PATTERN)
def test_date_pattern(pattern: str, zone: str, text: str, shown: str | None) -> None:
    check("date", pattern, zone, text, shown)


BAD_PATTERNS = [  # Spark fails the query on these, or reads every value as null
    ("YYYY-MM-dd", "week-based"),
    ("yyyy-ww", "week-based"),
    ("uuuu-MM-dd", "week-based"),
    ("e", "week-based"),
    ("c", "week-based"),
    ("yyyy-MM-dd E", "'E' cannot be used to parse"),
    ("EEE, dd MMM yyyy", "'E' cannot be used to parse"),
    ("F", "cannot be used to parse"),
    ("Q", "cannot be used to parse"),
    ("qqq", "cannot be used to parse"),
    ("A", "cannot be used to parse"),
    ("n", "cannot be used to parse"),
    ("N", "cannot be used to parse"),
    ("B", "cannot be used to parse"),
    ("p", "cannot be used to parse"),
    ("MMMMM", "too many"),
    ("LLLLL", "too many"),
    ("GGGGG", "too many"),
    ("yyyyyyy-MM-dd", "too many"),
    ("yyyy-MM-dd HH:mm:ss.SSSSSSSSSS", "at most 9 digits"),
    ("hhh", "too many or too few"),
    ("ddd", "too many or too few"),
    ("HHH", "too many or too few"),
    ("mmm", "too many or too few"),
    ("sss", "too many or too few"),
    ("KKK", "too many or too few"),
    ("kkk", "too many or too few"),
    ("DDDD", "too many or too few"),
    ("aa", "too many or too few"),
    ("V", "too many or too few"),
    ("VVV", "too many or too few"),
    ("OO", "too many or too few"),
    ("zzzzz", "too many or too few"),
    ("XXXXXX", "too many or too few"),
    ("xxxxxx", "too many or too few"),
    ("ZZZZZZ", "too many or too few"),
    ("'unclosed", "quoted literal"),
    ("yyyy-MM-dd'", "quoted literal"),
    ("HH:mm'abc", "quoted literal"),
    ("yyyy]", "']' without a '['"),
    ("yyyy-MM-dd{", "reserved character"),
    ("yyyy-MM-dd#", "reserved character"),
    ("t", "unknown pattern letter 't'"),
    ("f", "unknown pattern letter 'f'"),
    ("b", "unknown pattern letter 'b'"),
    ("yyyy-MM-dd g", "'g' is not supported"),
    ("v", "'v' is not supported"),
]


@pytest.mark.parametrize(("pattern", "message"), BAD_PATTERNS)
def test_a_pattern_spark_cannot_parse_with_is_rejected(pattern: str, message: str) -> None:
    options: list[tuple[DatetimeKind, str]] = [
        ("timestamp", "timestampFormat"),
        ("timestamp_ntz", "timestampNTZFormat"),
        ("date", "dateFormat"),
    ]
    for kind, option in options:
        with pytest.raises(ValueError, match=re.escape(message)) as error:
            DatetimeParser(kind, pattern)
        assert f"{option} {pattern!r}" in str(error.value)


@pytest.mark.parametrize(
    ("pattern", "text", "shown"),
    [  # quirks of Spark's own handling of S, checked with PySpark
        ("HH:mm:ss.SSS'abc", "03:04:05.123abc", "1970-01-01 03:04:05.123"),
        ("HH:mm:ss.SSS''", "03:04:05.123", "1970-01-01 03:04:05.123"),
        ("HH:mm:ss.SSS''", "03:04:05.123'", None),
        ("yyyy-MM-dd'S'", "2020-01-02s", "2020-01-02 00:00:00"),
    ],
)
def test_patterns_with_a_fraction_of_second(pattern: str, text: str, shown: str | None) -> None:
    check("timestamp", pattern, "UTC", text, shown)
