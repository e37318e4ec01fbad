"""Delta's per-file statistics, read from the footer of the parquet file just written.

Readers (delta-rs, Polars, Spark) skip a whole file when its ``minValues``/``maxValues`` say no
row can match a filter, so a bound that is not a true bound loses rows without a word. These
statistics are therefore exact or looser, never tighter, and a bound that cannot be made safe is
left out (a reader then reads the file):

- ``numRecords``; ``nullCount`` for every column outside lists and maps (struct fields as
  nested objects, as Delta writes them);
- ``minValues``/``maxValues`` for integers, floats, decimals, dates, timestamps, strings and
  booleans, struct fields nested, nothing for lists, maps and binaries;
- timestamps as Delta's Spark writer writes them, at millisecond precision
  (``2024-01-01T00:00:00.123Z`` for ``timestamp``, ``2024-01-01T00:00:00.123`` for
  ``timestamp_ntz``): the minimum is rounded down and the maximum rounded *up* to the
  millisecond, so both stay bounds of the microsecond values (readers widen a maximum by a
  millisecond too, since Spark's and delta-rs's writers cut it);
- strings longer than 32 characters: the minimum is cut to its first 32 characters (a prefix
  is smaller), the maximum cut and its last character raised by one (larger than every string
  with that prefix);
- floats: no bound for a column where the part wrote a NaN (parquet's bounds leave NaN out,
  while Spark, Polars and DataFusion order NaN above every number, so ``f > 5`` matches it)
  and no bound that is infinite (JSON has no infinity);
- a bound is left out when any row group of the file has no statistics for the column;
- when a top-level column of those kinds (not all null) is left without both bounds, the file
  gets no ``minValues``/``maxValues`` at all: delta-rs's pyarrow dataset reader reads a missing
  bound as null and skips the file for every filter on that column.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["STRING_PREFIX_LENGTH", "file_stats"]

STRING_PREFIX_LENGTH = 32
"""Characters of a string kept in its bounds (Delta's ``dataSkippingStringPrefixLength``)."""

_EPOCH = _dt.datetime(1970, 1, 1)
_MAX_CHAR = 0x10FFFF


@dataclass
class _Leaf:
    path: tuple[str, ...]
    type: pa.DataType
    repeated: bool  # inside a list or a map: no Delta statistics
    nested_float: bool  # a float inside a struct, where NaNs are not tracked


def file_stats(
    metadata: pq.FileMetaData,
    schema: pa.Schema,
    nan_columns: Collection[str] = (),
    *,
    num_indexed_cols: int = -1,
) -> str:
    """The ``stats`` JSON of the ``add`` action of one data file.

    ``metadata`` is the file's parquet footer, ``schema`` the Arrow schema of the columns inside
    the file (partition columns are not), ``nan_columns`` the top-level float columns in which a
    NaN was written. ``num_indexed_cols`` keeps statistics for only the first that many leaf
    columns (Delta's ``delta.dataSkippingNumIndexedCols``; -1 for all).
    """
    leaves = list(_leaves(schema))
    num_columns = metadata.num_columns
    if len(leaves) != num_columns:  # a schema the footer does not match: say nothing
        return json.dumps({"numRecords": metadata.num_rows}, separators=(",", ":"))
    mins: dict[str, Any] = {}
    maxes: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for index, leaf in enumerate(leaves):
        if 0 <= num_indexed_cols <= index:
            break
        if leaf.repeated:
            continue
        raw = pa.types.is_timestamp(leaf.type) or pa.types.is_date(leaf.type)
        bounds = _column_bounds(metadata, index, raw=raw)
        if bounds is None:
            if pa.types.is_null(leaf.type):
                _put(nulls, leaf.path, metadata.num_rows)
            continue
        null_count, low, high = bounds
        _put(nulls, leaf.path, metadata.num_rows if pa.types.is_null(leaf.type) else null_count)
        if low is None or high is None:
            continue
        if leaf.nested_float or (len(leaf.path) == 1 and leaf.path[0] in nan_columns):
            continue
        low_json = _json_min(low, leaf.type)
        high_json = _json_max(high, leaf.type)
        if low_json is not None:
            _put(mins, leaf.path, low_json)
        if high_json is not None:
            _put(maxes, leaf.path, high_json)
    stats: dict[str, Any] = {"numRecords": metadata.num_rows}
    if _bounded_everywhere(schema, mins, maxes, nulls, metadata.num_rows):
        stats["minValues"] = mins
        stats["maxValues"] = maxes
    stats["nullCount"] = nulls
    return _dump(stats)


def _bounded_everywhere(
    schema: pa.Schema,
    mins: dict[str, Any],
    maxes: dict[str, Any],
    nulls: dict[str, Any],
    rows: int,
) -> bool:
    """False when a top-level column that readers bound has no bounds (and is not all null).

    delta-rs's pyarrow dataset (``to_pyarrow_dataset``, ``to_pyarrow_table(filters=...)``)
    turns a missing bound of such a column into ``column >= null``, which skips the file for
    any filter on that column; with no ``minValues``/``maxValues`` at all it reads the file.
    """
    for field in schema:
        if not _bounded_type(field.type):
            continue
        if field.name in mins and field.name in maxes:
            continue
        if nulls.get(field.name) == rows:
            continue
        return False
    return True


def _bounded_type(type: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(type)
        or pa.types.is_floating(type)
        or pa.types.is_decimal(type)
        or pa.types.is_date(type)
        or pa.types.is_timestamp(type)
        or pa.types.is_string(type)
        or pa.types.is_large_string(type)
        or pa.types.is_boolean(type)
    )


def _dump(value: Any) -> str:
    """Compact JSON, decimals written with every digit as JSON numbers."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_dump(str(k))}:{_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _leaves(schema: pa.Schema) -> Iterator[_Leaf]:
    for field in schema:
        yield from _field_leaves((field.name,), field.type, repeated=False, in_struct=False)


def _field_leaves(
    path: tuple[str, ...], type: pa.DataType, *, repeated: bool, in_struct: bool
) -> Iterator[_Leaf]:
    if pa.types.is_struct(type):
        for child in type.fields:
            yield from _field_leaves(
                (*path, child.name), child.type, repeated=repeated, in_struct=True
            )
    elif pa.types.is_map(type):
        yield from _field_leaves((*path, "key"), type.key_type, repeated=True, in_struct=in_struct)
        yield from _field_leaves(
            (*path, "value"), type.item_type, repeated=True, in_struct=in_struct
        )
    elif pa.types.is_list(type) or pa.types.is_large_list(type):
        yield from _field_leaves(
            (*path, "element"), type.value_type, repeated=True, in_struct=in_struct
        )
    else:
        yield _Leaf(path, type, repeated, in_struct and pa.types.is_floating(type))


def _column_bounds(
    metadata: pq.FileMetaData, index: int, *, raw: bool
) -> tuple[int, Any, Any] | None:
    """(null count, min or None, max or None) over the row groups; None when unknown.

    ``raw``: the stored integers (days, microseconds) rather than Python dates and datetimes,
    which cannot hold every value."""
    nulls = 0
    low: Any = None
    high: Any = None
    bounded = True
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        statistics = row_group.column(index).statistics
        if statistics is None or not statistics.has_null_count:
            return None
        nulls += statistics.null_count
        if statistics.has_min_max:
            group_low = statistics.min_raw if raw else statistics.min
            group_high = statistics.max_raw if raw else statistics.max
            low = group_low if low is None else min(low, group_low)
            high = group_high if high is None else max(high, group_high)
        elif statistics.null_count < row_group.num_rows:
            bounded = False  # values there, but no bounds written for them
    if not bounded:
        return nulls, None, None
    return nulls, low, high


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


def _json_min(value: Any, type: pa.DataType) -> Any:
    return _json_bound(value, type, upper=False)


def _json_max(value: Any, type: pa.DataType) -> Any:
    return _json_bound(value, type, upper=True)


def _json_bound(value: Any, type: pa.DataType, *, upper: bool) -> Any:
    """A JSON value that is <= (``upper=False``) or >= every value, or None when there is none."""
    if pa.types.is_boolean(type):
        return bool(value)
    if pa.types.is_integer(type):
        return int(value)
    if pa.types.is_floating(type):
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):
            return None
        return number
    if pa.types.is_decimal(type):
        return value if isinstance(value, decimal.Decimal) and value.is_finite() else None
    if pa.types.is_date(type):
        return _date_text(value) if isinstance(value, int) else None
    if pa.types.is_timestamp(type):
        return _timestamp_text(value, type, upper=upper) if isinstance(value, int) else None
    if pa.types.is_string(type) or pa.types.is_large_string(type):
        return _string_bound(value, upper=upper) if isinstance(value, str) else None
    return None  # binaries, nulls: no bounds


def _timestamp_text(stored: int, type: pa.DataType, *, upper: bool) -> str | None:
    per_milli = {"s": 1, "ms": 1, "us": 1000, "ns": 1_000_000}[type.unit]
    if type.unit == "s":
        stored *= 1000
    millis = -(-stored // per_milli) if upper else stored // per_milli
    try:
        m = _EPOCH + _dt.timedelta(milliseconds=millis)
    except OverflowError:
        return None  # a bound outside years 1..9999: leave it out
    date = f"{m.year:04d}-{m.month:02d}-{m.day:02d}"
    time = f"{m.hour:02d}:{m.minute:02d}:{m.second:02d}.{m.microsecond // 1000:03d}"
    return f"{date}T{time}Z" if type.tz is not None else f"{date}T{time}"


def _date_text(days: int) -> str | None:
    try:
        day = _dt.date(1970, 1, 1) + _dt.timedelta(days=days)
    except OverflowError:
        return None
    return f"{day.year:04d}-{day.month:02d}-{day.day:02d}"


def _string_bound(value: str, *, upper: bool) -> str | None:
    if len(value) <= STRING_PREFIX_LENGTH:
        return value
    prefix = value[:STRING_PREFIX_LENGTH]
    if not upper:
        return prefix
    # The smallest string above every string that starts with ``prefix``: raise its last
    # character that can be raised, dropping what follows.
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if 0xD800 <= code <= 0xDFFF:
            code = 0xE000
        if code <= _MAX_CHAR:
            return "".join(chars) + chr(code)
    return None
