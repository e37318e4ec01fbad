from __future__ import annotations

import itertools
import os
import pickle
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch import ReadAllAvailable, ReadContext, ReadMaxRows, StateStore
from microbatch.errors import (
    CorruptCheckpointError,
    OptionError,
    SourceError,
    UnsupportedOperationError,
)
from microbatch_rate import RateSource, RateStreamReader
from microbatch_rate.rate import value_at_second

START = 1_700_000_000.74  # epoch seconds; the first row is stamped here


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def rate_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    clock = FakeClock(START)
    monkeypatch.setattr(RateSource, "clock", clock)
    return clock


def make_source(**options: Any) -> RateSource:
    parsed = RateSource.options.parse(options, connector="rate")
    return RateSource(parsed)


def make_rate(state: StateStore | None = None, **options: Any) -> RateStreamReader:
    """The stream reader of one run of a rate source with these options."""
    source = make_source(**options)
    return source.stream_reader(ReadContext(schema=source.schema(), state=state))


def read_splits(source: RateStreamReader, splits: list[Any]) -> list[pa.RecordBatch]:
    split_reader = source.split_reader()
    return [batch for split in splits for batch in split_reader.read(split)]


def read_all(source: RateStreamReader, start: dict[str, Any], end: dict[str, Any]) -> pa.Table:
    batches = read_splits(source, source.partitions(start, end))
    table = pa.Table.from_batches(batches, schema=make_source().schema())
    return table.sort_by("value")


def stamps(table: pa.Table) -> list[datetime]:
    return table.column("timestamp").to_pylist()


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(round(seconds, 3), UTC)


def test_schema_and_defaults() -> None:
    source = make_source()
    assert source.schema() == pa.schema(
        [("timestamp", pa.timestamp("us", tz="UTC")), ("value", pa.int64())]
    )
    assert source.rows_per_second == 1
    assert source.ramp_up_seconds == 0
    assert source.num_partitions == (os.cpu_count() or 1)
    assert not RateSource.capabilities.available_now
    assert RateSource.capabilities.replayable


def test_describe_names_the_settings() -> None:
    source = make_source(rowsPerSecond=5, numPartitions=2)
    assert source.describe() == "RateSource[rowsPerSecond=5, rampUpTimeSeconds=0, numPartitions=2]"


@pytest.mark.parametrize("value", [0, -3, "abc"])
def test_rows_per_second_must_be_positive(value: object) -> None:
    with pytest.raises(OptionError, match="rowsPerSecond"):
        make_rate(rowsPerSecond=value)


def test_ramp_up_time_must_be_whole_seconds() -> None:
    assert make_source(rampUpTime="3 seconds").ramp_up_seconds == 3
    with pytest.raises(OptionError, match=r"rampUpTime.*whole number of seconds"):
        make_rate(rampUpTime="1500ms")


def test_unknown_option_suggests_the_right_name() -> None:
    with pytest.raises(OptionError, match="did you mean 'rowsPerSecond'"):
        make_rate(rowsPerSeconds=3)


def test_batch_read_is_refused() -> None:
    parsed = RateSource.options.parse({}, connector="rate")
    with pytest.raises(UnsupportedOperationError, match="rate-micro-batch"):
        RateSource(parsed, streaming=False)


def test_value_at_second_ramps_up_linearly() -> None:
    totals = [value_at_second(second, 10, 4) for second in range(8)]
    per_second = [b - a for a, b in itertools.pairwise(totals)]
    assert per_second == [2, 4, 6, 8, 10, 10, 10]
    assert [value_at_second(s, 7, 0) for s in range(4)] == [0, 7, 14, 21]


def test_latest_offset_follows_whole_elapsed_seconds(rate_clock: FakeClock) -> None:
    source = make_rate(rowsPerSecond=4)
    start = source.initial_offset()
    assert start == {"seconds": 0}
    rate_clock.now = START + 0.999
    assert source.latest_offset(start, ReadAllAvailable()) == start
    rate_clock.now = START + 1.0
    assert source.latest_offset(start, ReadAllAvailable()) == {"seconds": 1}
    rate_clock.now = START + 3.7
    assert source.latest_offset(start, ReadMaxRows(1)) == {"seconds": 3}  # not rate limited
    rate_clock.now = START + 2.0  # the clock steps back: offsets never do
    assert source.latest_offset({"seconds": 3}, ReadAllAvailable()) == {"seconds": 3}


def test_rows_of_the_first_second_are_spread_evenly(rate_clock: FakeClock) -> None:
    source = make_rate(rowsPerSecond=4, numPartitions=1)
    start = source.initial_offset()
    table = read_all(source, start, {"seconds": 1})
    assert table.column("value").to_pylist() == [0, 1, 2, 3]
    assert stamps(table) == [at(START), at(START + 0.25), at(START + 0.5), at(START + 0.75)]


def test_values_continue_across_batches(rate_clock: FakeClock) -> None:
    source = make_rate(rowsPerSecond=3, numPartitions=2)
    source.initial_offset()
    first = read_all(source, {"seconds": 0}, {"seconds": 1})
    second = read_all(source, {"seconds": 1}, {"seconds": 3})
    assert first.column("value").to_pylist() == [0, 1, 2]
    assert second.column("value").to_pylist() == list(range(3, 9))
    expected = [at(START + 1 + index / 3) for index in range(6)]
    assert stamps(second) == expected


def test_ramp_up_produces_growing_batches(rate_clock: FakeClock) -> None:
    source = make_rate(rowsPerSecond=10, rampUpTime="4 seconds", numPartitions=3)
    source.initial_offset()
    sizes = [
        read_all(source, {"seconds": second}, {"seconds": second + 1}).num_rows
        for second in range(6)
    ]
    assert sizes == [2, 4, 6, 8, 10, 10]
    values = read_all(source, {"seconds": 0}, {"seconds": 6}).column("value").to_pylist()
    assert values == list(range(40))


def test_partitions_take_every_nth_value_of_the_batch(rate_clock: FakeClock) -> None:
    source = make_rate(rowsPerSecond=5, numPartitions=3)
    source.initial_offset()
    splits = source.partitions({"seconds": 1}, {"seconds": 2})
    assert [split.partition for split in splits] == [0, 1, 2]
    per_split = [
        [value for batch in read_splits(source, [split]) for value in batch["value"].to_pylist()]
        for split in splits
    ]
    assert per_split == [[5, 8], [6, 9], [7]]


def test_splits_pickle_and_replay_the_same_rows(rate_clock: FakeClock) -> None:
    source = make_rate(rowsPerSecond=7, numPartitions=2)
    source.initial_offset()
    splits = source.partitions({"seconds": 2}, {"seconds": 5})
    copied = pickle.loads(pickle.dumps(splits))
    assert copied == splits
    rate_clock.now = START + 500  # reading later changes nothing
    again = pickle.loads(pickle.dumps(make_rate(rowsPerSecond=7).split_reader()))
    first = read_splits(source, splits)
    second = [batch for split in copied for batch in again.read(split)]
    assert pa.Table.from_batches(first).equals(pa.Table.from_batches(second))


def test_large_ranges_come_in_bounded_batches(rate_clock: FakeClock) -> None:
    source = make_rate(rowsPerSecond=200_000, numPartitions=1)
    source.initial_offset()
    (split,) = source.partitions({"seconds": 0}, {"seconds": 1})
    batches = read_splits(source, [split])
    assert [batch.num_rows for batch in batches] == [65_536, 65_536, 65_536, 3_392]
    assert all(batch.schema == make_source().schema() for batch in batches)
    values = pa.Table.from_batches(batches).column("value")
    assert values.to_pylist() == list(range(200_000))
    last = pa.Table.from_batches(batches).column("timestamp")[-1].as_py()
    assert last == at(START + 199_999 / 200_000)


def test_empty_range_plans_splits_that_read_nothing(rate_clock: FakeClock) -> None:
    source = make_rate(rowsPerSecond=1, rampUpTime="3 seconds", numPartitions=2)
    source.initial_offset()
    splits = source.partitions({"seconds": 0}, {"seconds": 2})  # 1 row/s ramped over 3 s
    assert len(splits) == 2
    assert read_splits(source, splits) == []


def test_start_time_survives_a_restart(rate_clock: FakeClock, tmp_path: Path) -> None:
    state = StateStore(str(tmp_path / "sources" / "0"))
    first = make_rate(state, rowsPerSecond=2, numPartitions=1)
    assert first.initial_offset() == {"seconds": 0}
    rate_clock.now = START + 100.2
    restarted = make_rate(StateStore(str(tmp_path / "sources" / "0")), rowsPerSecond=2)
    assert restarted.latest_offset({"seconds": 5}, ReadAllAvailable()) == {"seconds": 100}
    table = read_all(restarted, {"seconds": 5}, {"seconds": 6})
    assert table.column("value").to_pylist() == [10, 11]
    assert stamps(table) == [at(START + 5), at(START + 5.5)]


def test_initial_offset_keeps_a_start_time_already_saved(
    rate_clock: FakeClock, tmp_path: Path
) -> None:
    state = StateStore(str(tmp_path))
    make_rate(state).initial_offset()
    rate_clock.now = START + 30
    again = make_rate(StateStore(str(tmp_path)))
    again.initial_offset()
    assert again.latest_offset({"seconds": 0}, ReadAllAvailable()) == {"seconds": 30}


def test_without_state_the_start_time_lives_in_memory(rate_clock: FakeClock) -> None:
    source = make_rate(rowsPerSecond=1)
    start = source.initial_offset()
    rate_clock.now = START + 12.5
    assert source.latest_offset(start, ReadAllAvailable()) == {"seconds": 12}
    other = make_rate(rowsPerSecond=1)  # a second query starts its own clock
    assert other.latest_offset(other.initial_offset(), ReadAllAvailable()) == {"seconds": 0}


def test_restart_never_reports_less_than_a_planned_batch(
    rate_clock: FakeClock, tmp_path: Path
) -> None:
    make_rate(StateStore(str(tmp_path))).initial_offset()
    restarted = make_rate(StateStore(str(tmp_path)), numPartitions=1)
    rate_clock.now = START + 4  # e.g. the clock of another machine lags behind
    restarted.partitions({"seconds": 7}, {"seconds": 9})
    assert restarted.latest_offset({"seconds": 7}, ReadAllAvailable()) == {"seconds": 9}


def test_corrupt_start_time_is_reported(tmp_path: Path) -> None:
    (tmp_path / "start.json").write_text('{"start": "yesterday"}')
    with pytest.raises(CorruptCheckpointError, match=r"start\.json"):
        make_rate(StateStore(str(tmp_path)))


@pytest.mark.parametrize("offset", [{}, {"offset": 3}, {"seconds": "3"}, {"seconds": -1}, None])
def test_foreign_offsets_are_refused(offset: Any, rate_clock: FakeClock) -> None:
    source = make_rate()
    with pytest.raises(SourceError, match="not made by this source"):
        source.latest_offset(offset, ReadAllAvailable())


def test_foreign_splits_are_refused() -> None:
    source = make_rate()
    with pytest.raises(SourceError, match="range_start"):
        list(source.split_reader().read({"partition": 0, "partitions": 1}))  # type: ignore[arg-type]


def test_batch_that_ends_before_it_starts_is_refused(rate_clock: FakeClock) -> None:
    source = make_rate()
    with pytest.raises(SourceError, match="ends before it starts"):
        source.partitions({"seconds": 4}, {"seconds": 2})


def test_values_beyond_int64_are_an_error(rate_clock: FakeClock) -> None:
    source = make_rate(rowsPerSecond=2**62)
    start = source.initial_offset()
    rate_clock.now = START + 1
    assert source.latest_offset(start, ReadAllAvailable()) == {"seconds": 1}
    rate_clock.now = START + 2
    with pytest.raises(SourceError, match="Integer overflow"):
        source.latest_offset(start, ReadAllAvailable())
