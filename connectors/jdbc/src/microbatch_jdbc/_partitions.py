"""Spark's JDBC stride arithmetic (``JDBCRelation.columnPartition``): the WHERE clause of each
range of a partitioned batch read.

Bounds become whole numbers first (a number as is, a date as days since 1970-01-01, a
timestamp as microseconds since the epoch); the stride is computed in fixed-point decimals
with 18 digits after the point, the first range is open below and also takes the NULLs, the
last is open above, and ``numPartitions`` shrinks to ``upperBound - lowerBound`` when that is
smaller. The column arrives already quoted for the database; the values are rendered by this
module (digits, or a date or timestamp formatted here), never taken from the options' text.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
from typing import Literal

import microbatch as mb

__all__ = ["BoundKind", "bound_text", "column_partition", "to_bound"]

_log = logging.getLogger(__name__)

BoundKind = Literal["numeric", "date", "timestamp", "timestamptz"]
"""How a partition column's bounds are read and written."""

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_SCALE = decimal.Decimal("1e-18")
_CONTEXT = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_EVEN)
_DIVISION = decimal.Context(prec=34, rounding=decimal.ROUND_HALF_EVEN)  # Scala's DECIMAL128


def to_bound(text: str, kind: BoundKind, name: str) -> int:
    """The whole number Spark computes from a bound option's text; ``OptionError`` naming
    the option when the text is not a value of the column's kind."""
    value = str(text).strip()
    try:
        if kind == "numeric":
            return int(value)
        if kind == "date":
            return (dt.date.fromisoformat(value[:10]) - _EPOCH_DATE).days
        moment = dt.datetime.fromisoformat(value.replace(" ", "T", 1))
        if moment.tzinfo is not None:
            moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
        delta = moment - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    except ValueError:
        catalog = {"numeric": "bigint", "date": "date"}.get(kind, "timestamp")
        raise mb.OptionError(
            f"invalid value for option '{name}': Cannot parse the bound value {value} as {catalog}"
        ) from None


def bound_text(value: int, kind: BoundKind) -> str:
    """A bound as it appears in a WHERE clause: digits, ``'2024-05-01'``, or
    ``'2024-05-01 12:00:00.5'`` (a fraction only when there is one; ``+00:00`` added for a
    column with a time zone, whose bounds are UTC)."""
    if kind == "numeric":
        return str(value)
    if kind == "date":
        return f"'{(_EPOCH_DATE + dt.timedelta(days=value)).isoformat()}'"
    moment = _EPOCH + dt.timedelta(microseconds=value)
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    if kind == "timestamptz":
        text += "+00:00"
    return f"'{text}'"


def column_partition(
    column: str, kind: BoundKind, lower: int, upper: int, num_partitions: int
) -> list[str | None]:
    """The WHERE clause of each range (``[None]``: one range reading everything), as Spark
    writes them: ``col < 33 or col is null``, ``col >= 33 AND col < 66``, ``col >= 66``.

    ``column`` is the quoted column; ``lower``/``upper`` come from :func:`to_bound`. A lower
    bound above the upper one is an ``OptionError`` with Spark's text.
    """
    if num_partitions <= 1 or lower == upper:
        return [None]
    if lower > upper:
        raise mb.OptionError(
            "Operation not allowed: the lower bound of partitioning column is larger than the "
            f"upper bound. Lower bound: {lower}; Upper bound: {upper}"
        )
    count = num_partitions
    if upper - lower < num_partitions:
        count = upper - lower
        _log.warning(
            "The number of partitions is reduced because the specified number of partitions "
            "is less than the difference between upper bound and lower bound. Updated number "
            "of partitions: %d; Input number of partitions: %d; Lower bound: %s; Upper bound: "
            "%s.",
            count,
            num_partitions,
            bound_text(lower, kind),
            bound_text(upper, kind),
        )
    parts = decimal.Decimal(count)
    upper_stride = _CONTEXT.divide(decimal.Decimal(upper), parts).quantize(_SCALE, context=_CONTEXT)
    lower_stride = _CONTEXT.divide(decimal.Decimal(lower), parts).quantize(_SCALE, context=_CONTEXT)
    precise = _CONTEXT.subtract(upper_stride, lower_stride)
    stride = int(precise)  # toward zero, as BigDecimal.toLong
    lost = _DIVISION.divide(_CONTEXT.multiply(precise - stride, parts), decimal.Decimal(stride))
    shift = _CONTEXT.multiply(_DIVISION.divide(lost, decimal.Decimal(2)), stride)
    current = lower + int(shift.quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))
    clauses: list[str | None] = []
    for index in range(count):
        low = f"{column} >= {bound_text(current, kind)}" if index != 0 else None
        current += stride
        high = f"{column} < {bound_text(current, kind)}" if index != count - 1 else None
        if high is None:
            clauses.append(low)
        elif low is None:
            clauses.append(f"{high} or {column} is null")
        else:
            clauses.append(f"{low} AND {high}")
    _log.info(
        "Number of partitions: %d, WHERE clauses of these partitions: %s",
        count,
        ", ".join(str(clause) for clause in clauses),
    )
    return clauses
