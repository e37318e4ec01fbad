"""``rate`` and ``rate-micro-batch`` pass the microbatch-testkit source suite."""

from __future__ import annotations

from typing import Any

import pytest

from microbatch import StreamReader
from microbatch_rate.rate import RateSource
from microbatch_rate.rate_micro_batch import RateMicroBatchSource
from microbatch_testkit import SourceContract


class FakeClock:
    """Wall-clock seconds that move only when told to."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class TestRateContract(SourceContract):
    source_class = RateSource

    @pytest.fixture(autouse=True)
    def _frozen_clock(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.clock = FakeClock(1_700_000_000.25)
        monkeypatch.setattr(RateSource, "clock", self.clock)

    def make_options(self) -> dict[str, Any]:
        # Three splits: split p of n reads every n-th value, so the rows interleave.
        return {"rowsPerSecond": 7, "numPartitions": 3}

    def produce(self, reader: StreamReader) -> None:
        self.clock.now += 3

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [
            ({"rowsPerSecond": 0}, "must be at least 1"),
            ({"rampUpTime": "1.5 seconds"}, "whole number of seconds"),
            ({"numPartitions": 0}, "must be at least 1"),
        ]


class TestRateMicroBatchContract(SourceContract):
    source_class = RateMicroBatchSource
    generates_data_on_its_own = True

    def make_options(self) -> dict[str, Any]:
        # No timestamp advance: every row of a batch is stamped with its batch's timestamp (as
        # in Spark), so a range read in one go is stamped otherwise than the same rows read in
        # several batches.
        return {
            "rowsPerBatch": 11,
            "numPartitions": 3,
            "startTimestamp": 1000,
            "advanceMillisPerBatch": 0,
        }

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [
            ({}, "missing required option 'rowsPerBatch'"),
            ({"rowsPerBatch": 0}, "must be at least 1"),
            ({"rowsPerBatch": 5, "advanceMillisPerBatch": -1}, "must be at least 0"),
        ]
