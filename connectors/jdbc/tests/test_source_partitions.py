"""Spark's stride arithmetic, case by case, against the WHERE clauses Spark writes.

The expected clauses are worked out by hand from ``JDBCRelation.columnPartition`` (stride in
decimals with 18 digits, half of the strides lost to truncation added to the lower bound,
``or col is null`` in the first range, open first and last ranges).
"""

from __future__ import annotations

import logging

import pytest

import microbatch as mb
from microbatch_jdbc._partitions import bound_text, column_partition, to_bound


@pytest.mark.parametrize(
    ("lower", "upper", "num", "expected"),
    [
        # stride 33.33.. -> 33; lost 0.0303 strides: no shift
        (0, 100, 3, ["id < 33 or id is null", "id >= 33 AND id < 66", "id >= 66"]),
        # stride 2.5 -> 2; lost 1 stride: half of it (1) added to the lower bound
        (
            0,
            10,
            4,
            ["id < 3 or id is null", "id >= 3 AND id < 5", "id >= 5 AND id < 7", "id >= 7"],
        ),
        # negative bounds: stride 6.67 -> 6, shift round(0.1667 * 6) = 1, start at -9
        (-10, 10, 3, ["id < -3 or id is null", "id >= -3 AND id < 3", "id >= 3"]),
        # 1..1000 in 4: stride 249.75 -> 249; lost 3 / 249 strides; half of them times 249 is
        # 1.4999.. (34 digits, as Scala's BigDecimal divides) -> shift 1, start at 2
        (
            1,
            1000,
            4,
            [
                "id < 251 or id is null",
                "id >= 251 AND id < 500",
                "id >= 500 AND id < 749",
                "id >= 749",
            ],
        ),
        # an exact stride: no shift
        (0, 20, 2, ["id < 10 or id is null", "id >= 10"]),
    ],
)
def test_numeric_strides(lower: int, upper: int, num: int, expected: list[str]) -> None:
    assert column_partition("id", "numeric", lower, upper, num) == expected


def test_one_partition_or_equal_bounds_read_everything_in_one_range() -> None:
    assert column_partition("id", "numeric", 0, 100, 1) == [None]
    assert column_partition("id", "numeric", 5, 5, 8) == [None]


def test_fewer_values_than_partitions_reduces_the_count(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        clauses = column_partition("id", "numeric", 1, 3, 10)
    assert clauses == ["id < 2 or id is null", "id >= 2"]
    assert (
        "The number of partitions is reduced because the specified number of partitions is "
        "less than the difference between upper bound and lower bound. Updated number of "
        "partitions: 2; Input number of partitions: 10; Lower bound: 1; Upper bound: 3."
    ) in caplog.text


def test_lower_above_upper_is_refused_with_sparks_text() -> None:
    with pytest.raises(mb.OptionError) as caught:
        column_partition("id", "numeric", 9, 1, 3)
    assert str(caught.value) == (
        "Operation not allowed: the lower bound of partitioning column is larger than the "
        "upper bound. Lower bound: 9; Upper bound: 1"
    )


def test_date_strides_are_days() -> None:
    lower = to_bound("2020-01-01", "date", "lowerBound")
    upper = to_bound("2020-01-31", "date", "upperBound")
    assert (lower, upper) == (18262, 18292)
    assert column_partition('"d"', "date", lower, upper, 3) == [
        '"d" < \'2020-01-11\' or "d" is null',
        "\"d\" >= '2020-01-11' AND \"d\" < '2020-01-21'",
        "\"d\" >= '2020-01-21'",
    ]


def test_timestamp_strides_are_microseconds() -> None:
    lower = to_bound("2020-01-01 00:00:00", "timestamp", "lowerBound")
    upper = to_bound("2020-01-01 00:00:01", "timestamp", "upperBound")
    assert upper - lower == 1_000_000
    assert column_partition("t", "timestamp", lower, upper, 4) == [
        "t < '2020-01-01 00:00:00.25' or t is null",
        "t >= '2020-01-01 00:00:00.25' AND t < '2020-01-01 00:00:00.5'",
        "t >= '2020-01-01 00:00:00.5' AND t < '2020-01-01 00:00:00.75'",
        "t >= '2020-01-01 00:00:00.75'",
    ]
    # a column with a time zone: bounds in UTC, written with their offset
    zoned = to_bound("2020-01-01T02:00:00+02:00", "timestamptz", "lowerBound")
    assert zoned == lower
    assert bound_text(zoned, "timestamptz") == "'2020-01-01 00:00:00+00:00'"


def test_bad_bounds_name_the_option() -> None:
    with pytest.raises(
        mb.OptionError, match=r"'lowerBound'.*Cannot parse the bound value x1 as bigint"
    ):
        to_bound("x1", "numeric", "lowerBound")
    with pytest.raises(mb.OptionError, match=r"'upperBound'.*as date"):
        to_bound("31/01/2020", "date", "upperBound")
