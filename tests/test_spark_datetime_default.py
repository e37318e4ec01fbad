"""DatetimeParser without a pattern against Apache Spark 4's JSON and CSV readers: text read
as by ``CAST``, the readers' fallbacks, and a time alone."""

from __future__ import annotations

import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from microbatch import spark_datetime
from microbatch._datetime_cast import _cast_timestamp
from microbatch.spark_datetime import DatetimeParser

sys.path.insert(0, str(Path(__file__).parent))
from _spark_datetime_default_cases import (
    DATE_DEFAULT,
    DATE_JSON_NUMBERS,
    NTZ_DEFAULT,
    TIMESTAMP_DEFAULT,
)
from _spark_datetime_testing import check


@pytest.mark.parametrize(("zone", "text", "shown"), TIMESTAMP_DEFAULT)
def test_timestamp_without_pattern(zone: str, text: str, shown: str | None) -> None:
    check("timestamp", None, zone, text, shown)


@pytest.mark.parametrize(("zone", "text", "shown"), NTZ_DEFAULT)
def test_timestamp_ntz_without_pattern(zone: str, text: str, shown: str | None) -> None:
    check("timestamp_ntz", None, zone, text, shown)


@pytest.mark.parametrize(("zone", "text", "shown"), DATE_DEFAULT)
def test_date_without_pattern(zone: str, text: str, shown: str | None) -> None:
    check("date", None, zone, text, shown, reader="csv")
    check("date", None, zone, text, shown, reader="json")


@pytest.mark.parametrize(("text", "shown"), DATE_JSON_NUMBERS)
def test_json_reads_a_whole_number_as_days_since_the_epoch(text: str, shown: str) -> None:
    check("date", None, "UTC", text, shown, reader="json")
    check("date", None, "UTC", text, None, reader="csv")


@pytest.mark.parametrize(
    ("text", "zone", "wall"),
    [("12:34:56", "America/Los_Angeles", "12:34:56"), ("T12:34", "Asia/Tokyo", "12:34:00"),
     ("12:34:56+01:00", "Asia/Tokyo", "12:34:56"), ("12:34:56 UTC", "Asia/Tokyo", "12:34:56")],
)  # fmt: skip
def test_a_time_alone_takes_todays_date_in_its_zone(text: str, zone: str, wall: str) -> None:
    """Spark uses LocalDate.now in the text's zone, else in timeZone."""
    parser = DatetimeParser("timestamp", None, zone)
    written = "+01:00" if "+01:00" in text else "UTC" if "UTC" in text else zone
    tz = ZoneInfo(written) if "/" in written else UTC if written == "UTC" else None
    expected = []
    for _ in range(2):  # today, before and after parsing: midnight may pass in between
        now = datetime.now(UTC)
        today = now.astimezone(tz).date() if tz else (now + timedelta(hours=1)).date()
        local = datetime.fromisoformat(f"{today.isoformat()}T{wall}")
        if tz:
            expected.append(local.replace(tzinfo=tz).astimezone(UTC))
        else:
            expected.append((local - timedelta(hours=1)).replace(tzinfo=UTC))
        if len(expected) == 1:
            got = parser.parse_one(text)
    assert got in expected
    assert DatetimeParser("timestamp_ntz", time_zone=zone).parse_one(text) is None


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_the_quick_utc_reading_agrees_with_the_reference(zone: str) -> None:
    rng = random.Random(5)
    parser_zone = DatetimeParser("timestamp", None, zone)._zone
    agreed = 0
    for _ in range(5000):
        text = (
            f"{rng.randrange(1000, 10000):04d}-{rng.randrange(0, 14):02d}-"
            f"{rng.randrange(0, 33):02d}T{rng.randrange(0, 26):02d}:{rng.randrange(0, 61):02d}:"
            f"{rng.randrange(0, 61):02d}{rng.choice(['', '.5', '.123', '.123456'])}Z"
        )
        quick = spark_datetime._utc_text_value(text)
        if quick is not None:
            agreed += 1
            assert quick == _cast_timestamp(text, parser_zone), text
    assert agreed > 1000


def test_the_quick_utc_reading_takes_ascii_digits_only() -> None:
    assert spark_datetime._utc_text_value("2024-03-01T12:00:00Z") is not None
    assert spark_datetime._utc_text_value("2024-03-0\u0661T12:00:00Z") is None
