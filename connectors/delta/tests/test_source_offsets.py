"""The Delta source's offsets, limits and option values, without a query."""

from __future__ import annotations

import pytest

from microbatch import ReadAllAvailable, ReadMaxBytes, ReadMaxFiles
from microbatch.errors import CorruptCheckpointError, SourceError
from microbatch_delta._admission import Admission, default_read_limit
from microbatch_delta._offsets import DeltaOffset
from microbatch_delta._source_options import SOURCE_OPTIONS, parse_size, parse_timestamp_ms


def _options(**values: object) -> object:
    return SOURCE_OPTIONS.parse({"path": "/t", **values}, connector="delta")


def test_offsets_have_deltas_shape_and_round_trip() -> None:
    offset = DeltaOffset(7, 2, False, "id-1")
    shown = offset.to_json()
    assert shown == {
        "sourceVersion": 1,
        "reservoirId": "id-1",
        "reservoirVersion": 7,
        "index": 2,
        "isStartingVersion": False,
    }
    assert DeltaOffset.from_json(shown, "id-1") == offset
    assert offset.after_file(7, 3, is_last=True) == DeltaOffset(8, -1, False, "id-1")
    snapshot = DeltaOffset(4, -1, True, "id-1")
    assert snapshot.after_file(4, 0, is_last=False) == DeltaOffset(4, 0, True, "id-1")


def test_offsets_of_another_source_or_table_are_refused() -> None:
    with pytest.raises(CorruptCheckpointError, match="not a Delta source offset"):
        DeltaOffset.from_json({"topic": {"0": 3}}, "id-1")
    with pytest.raises(SourceError, match=r"unexpected Delta table \(id = 'id-2'\)"):
        DeltaOffset.from_json(DeltaOffset(1, -1, False, "id-1").to_json(), "id-2")


def test_sizes_are_spark_byte_strings() -> None:
    assert parse_size("10g") == 10 << 30
    assert parse_size("512m") == 512 << 20
    assert parse_size("100k") == 100 << 10
    assert parse_size("2048") == 2048
    assert parse_size("1kb") == 1024
    with pytest.raises(ValueError):
        parse_size("ten")


def test_timestamps_are_utc_unless_a_zone_is_given() -> None:
    assert parse_timestamp_ms("1970-01-02") == 86_400_000
    assert parse_timestamp_ms("1970-01-01 00:00:01.5") == 1500
    assert parse_timestamp_ms("1970-01-01T01:00:00+01:00") == 0
    assert parse_timestamp_ms("1970-01-01T00:00:00Z") == 0
    assert parse_timestamp_ms("1714521600000") == 1_714_521_600_000


def test_epoch_seconds_are_refused_rather_than_read_as_milliseconds() -> None:
    refused = "Invalid value '1714521600' for option 'startingTimestamp'"
    with pytest.raises(ValueError, match=refused):
        parse_timestamp_ms("1714521600", "startingTimestamp")


def test_the_default_limit_is_deltas() -> None:
    assert default_read_limit(_options()) == ReadMaxFiles(1000)
    assert default_read_limit(_options(maxBytesPerTrigger="1m")) == ReadMaxBytes(1 << 20)
    both = _options(maxBytesPerTrigger="100", maxFilesPerTrigger=5)
    assert default_read_limit(both) == ReadMaxFiles(5)
    admission = Admission.for_limit(ReadMaxFiles(5), both)
    assert [admission.admit(60) for _ in range(3)] == [True, True, False]  # bytes first
    everything = Admission.for_limit(ReadAllAvailable(), both)
    assert all(everything.admit(10**9) for _ in range(100))


def test_whole_versions_are_admitted_when_they_fit_or_come_first() -> None:
    admission = Admission(max_files=3, max_bytes=None)
    assert admission.admit_whole([1, 1, 1, 1])  # the first version of a batch: always
    assert not admission.admit_whole([1])
    fresh = Admission(max_files=3, max_bytes=None)
    assert fresh.admit_whole([1, 1]) and not fresh.admit_whole([1, 1])
