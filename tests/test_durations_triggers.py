from __future__ import annotations

from datetime import timedelta

import pytest

from microbatch._durations import parse_duration
from microbatch._triggers import AvailableNow, Default, Once, ProcessingTime, Trigger
from microbatch.errors import ConfigurationError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10 seconds", 10),
        ("1 second", 1),
        ("500ms", 0.5),
        ("2 minutes", 120),
        ("1 minute 30 seconds", 90),
        ("7d", 7 * 86400),
        ("interval 3 hours", 3 * 3600),
        ("2.5", 2.5),
        (timedelta(seconds=4), 4),
        (3, 3),
    ],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == pytest.approx(seconds)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", "ten seconds", "5 fortnights", "-1", True])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)  # type: ignore[arg-type]


def test_trigger_keywords() -> None:
    assert Trigger.of() == Default()
    assert Trigger.of(processing_time="2 seconds") == ProcessingTime(interval=2.0)
    assert Trigger.of(processing_time=timedelta(milliseconds=250)) == ProcessingTime(interval=0.25)
    assert Trigger.of(processing_time="0 seconds") == Default()
    assert Trigger.of(once=True) == Once()
    assert Trigger.of(available_now=True) == AvailableNow()
    assert Once().finite and AvailableNow().finite and not Default().finite


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"once": True, "available_now": True}, "Only a single trigger is allowed"),
        ({"once": False}, "must be True"),
        ({"processing_time": ""}, "non-empty"),
        ({"processing_time": "soon"}, "Invalid processing_time"),
        ({"continuous": "1 second"}, "Unknown trigger continuous"),
    ],
)
def test_trigger_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Trigger.of(**kwargs)  # type: ignore[arg-type]


def test_processing_time_aligns_to_interval_and_runs_overruns_at_once() -> None:
    trigger = ProcessingTime(interval=2.0)
    assert trigger.next_start(100.3, None) == 100.3
    assert trigger.next_start(100.5, last_start=100.3) == 102.0
    # the batch that started at 100.3 overran past the next boundary: start now, no catch-up
    assert trigger.next_start(104.7, last_start=100.3) == 104.7
