"""Spark's rate limit, trigger delay and minPartitions arithmetic (no broker)."""

from __future__ import annotations

import pytest

from microbatch_kafka._limits import TriggerDelay, rate_limit, round_half_up, split_ranges

P0, P1, P2 = ("t", 0), ("t", 1), ("t", 2)


def ends(offsets):
    return (offsets[P0], offsets[P1], offsets[P2])


# --- maxOffsetsPerTrigger ------------------------------------------------------------------

# Design table: 3 partitions with backlogs 1000/100/3 and a limit of 100 take 12 batches.
WORKED_TABLE = [
    ((90, 9, 1), 100),
    ((180, 18, 2), 100),
    ((270, 27, 3), 100),
    *[((270 + 90 * k, 27 + 9 * k, 3), 99) for k in range(1, 9)],
    ((1000, 100, 3), 11),
]


def test_worked_table_twelve_batches():
    latest = {P0: 1000, P1: 100, P2: 3}
    start = {P0: 0, P1: 0, P2: 0}
    batches = []
    while start != latest:
        end = rate_limit(100, start, latest)
        batches.append((ends(end), sum(end[tp] - start[tp] for tp in end)))
        start = end
        assert len(batches) <= 20
    assert batches == WORKED_TABLE
    assert len(batches) == 12
    assert batches[3] == ((360, 36, 3), 99)  # sizes 730/73: 90.9 -> 90, 9.09 -> 9


def test_share_below_one_rounds_up_and_can_exceed_the_limit():
    end = rate_limit(10, {P0: 0, P1: 0, P2: 0}, {P0: 1, P1: 1, P2: 1000})
    assert ends(end) == (1, 1, 9)
    assert sum(ends(end)) == 11


def test_float_arithmetic_as_spark():
    # 22 * (15 / 22) == 14.999999999999998 in doubles: 14, where exact arithmetic gives 15.
    end = rate_limit(22, {P0: 0, P1: 0}, {P0: 15, P1: 7})
    assert end == {P0: 14, P1: 7}


def test_capped_at_latest():
    end = rate_limit(1000, {P0: 0, P1: 5}, {P0: 10, P1: 6})
    assert end == {P0: 10, P1: 6}


def test_partitions_without_new_data_keep_latest():
    # P1 has nothing new; P2's latest went below its start (planning reports that).
    end = rate_limit(10, {P0: 0, P1: 7, P2: 50}, {P0: 100, P1: 7, P2: 20})
    assert end == {P0: 10, P1: 7, P2: 20}


def test_nothing_new_returns_latest():
    latest = {P0: 4, P1: 9}
    assert rate_limit(10, dict(latest), latest) == latest
    assert rate_limit(10, {}, {}) == {}


def test_offsets_not_at_zero():
    end = rate_limit(100, {P0: 5000, P1: 200, P2: 7}, {P0: 6000, P1: 300, P2: 10})
    assert ends(end) == (5090, 209, 8)


def test_new_partition_counts_from_its_given_start():
    # A new partition is in start at its earliest offset (here 40), as the source passes it.
    end = rate_limit(10, {P0: 0, P1: 40}, {P0: 10, P1: 50})
    assert end == {P0: 5, P1: 45}


# --- minOffsetsPerTrigger / maxTriggerDelay ------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_first_check_of_a_run_fires_even_below_the_minimum():
    delay = TriggerDelay(100, 2.0, clock=FakeClock())
    assert delay.should_fire({P0: 0}, {P0: 1})


def test_small_backlog_waits_then_fires_after_the_delay():
    clock = FakeClock()
    delay = TriggerDelay(100, 2.0, clock=clock)
    assert delay.should_fire({P0: 0}, {P0: 0})  # first check: fires (nothing to read)
    clock.now += 0.5
    assert not delay.should_fire({P0: 0}, {P0: 10})
    clock.now += 1.4
    assert not delay.should_fire({P0: 0}, {P0: 10})
    clock.now += 0.1  # 2 s since the last fire
    assert delay.should_fire({P0: 0}, {P0: 10})
    clock.now += 0.1  # the delay counts again from this fire
    assert not delay.should_fire({P0: 10}, {P0: 20})


def test_big_backlog_fires_at_once_and_restarts_the_delay():
    clock = FakeClock()
    delay = TriggerDelay(100, 2.0, clock=clock)
    assert delay.should_fire({P0: 0}, {P0: 0})
    clock.now += 0.1
    assert delay.should_fire({P0: 0, P1: 0}, {P0: 60, P1: 40})  # 100 new: fires
    clock.now += 1.95  # 2.05 s after the first fire, 1.95 s after the last one
    assert not delay.should_fire({P0: 60, P1: 40}, {P0: 61, P1: 40})


def test_new_partition_counts_from_zero_as_in_spark():
    clock = FakeClock()
    delay = TriggerDelay(100, 60.0, clock=clock)
    assert delay.should_fire({}, {})
    clock.now += 1
    # P1 is new (absent from start) with offsets 90..95: Spark counts 95 - 0 = 95 new.
    assert not delay.should_fire({P0: 0}, {P0: 4, P1: 95})
    assert delay.should_fire({P0: 0}, {P0: 5, P1: 95})


def test_disabled_never_delays():
    clock = FakeClock()
    delay = TriggerDelay(100, 3600.0, clock=clock)
    assert delay.should_fire({P0: 0}, {P0: 1})
    clock.now += 1
    assert not delay.should_fire({P0: 0}, {P0: 1})
    delay.disable()
    assert delay.disabled
    assert delay.should_fire({P0: 0}, {P0: 1})


def test_default_clock_is_real_time():
    delay = TriggerDelay(10, 900.0)
    assert delay.should_fire({P0: 0}, {P0: 0})
    assert not delay.should_fire({P0: 0}, {P0: 9})


# --- minPartitions -------------------------------------------------------------------------

BACKLOGS = [(P0, 0, 1000), (P1, 0, 100), (P2, 0, 3)]


def test_min_partitions_five():
    assert split_ranges(BACKLOGS, 5) == [
        (P0, 0, 333),
        (P0, 333, 666),
        (P0, 666, 1000),
        (P1, 0, 100),
        (P2, 0, 3),
    ]


def test_min_partitions_ten():
    assert split_ranges(BACKLOGS, 10) == [
        *[(P0, 125 * k, 125 * (k + 1)) for k in range(8)],
        (P1, 0, 100),
        (P2, 0, 3),
    ]


def test_no_min_partitions_or_enough_ranges_one_split_each():
    assert split_ranges(BACKLOGS, None) == BACKLOGS
    assert split_ranges(BACKLOGS, 3) == BACKLOGS
    assert split_ranges(BACKLOGS, 1) == BACKLOGS


def test_empty_and_backwards_ranges_dropped():
    ranges = [(P0, 5, 5), (P1, 10, 4), (P2, 0, 6)]
    assert split_ranges(ranges, None) == [(P2, 0, 6)]
    assert split_ranges(ranges, 3) == [(P2, 0, 2), (P2, 2, 4), (P2, 4, 6)]


def test_last_piece_takes_the_remainder_and_offsets_are_kept():
    assert split_ranges([(P0, 100, 110)], 3) == [(P0, 100, 103), (P0, 103, 106), (P0, 106, 110)]


def test_more_pieces_than_offsets_drops_empty_pieces():
    assert split_ranges([(P0, 0, 2)], 5) == [(P0, 0, 1), (P0, 1, 2)]


def test_half_rounds_up_as_java():
    # 100 of 400 offsets with minPartitions 10: 2.5 pieces -> 3 (Python's round says 2).
    assert round(2.5) == 2 and round_half_up(2.5) == 3
    assert round_half_up(0.49999999999999994) == 0
    assert round_half_up(0.5) == 1
    pieces = split_ranges([(P0, 0, 100), (P1, 0, 300)], 10)
    assert [r for r in pieces if r[0] == P0] == [(P0, 0, 33), (P0, 33, 66), (P0, 66, 100)]
    assert len([r for r in pieces if r[0] == P1]) == 8  # 7.5 -> 8


@pytest.mark.parametrize("min_partitions", [1, 2, 4, 7, 16, 64])
def test_splits_cover_each_range_exactly(min_partitions):
    ranges = [(P0, 3, 1003), (P1, 0, 17), (P2, 50, 51)]
    splits = split_ranges(ranges, min_partitions)
    for tp, begin, end in ranges:
        mine = [(a, b) for t, a, b in splits if t == tp]
        assert mine[0][0] == begin and mine[-1][1] == end
        assert all(a < b for a, b in mine)
        assert all(mine[i][1] == mine[i + 1][0] for i in range(len(mine) - 1))
