"""Hive-style partition directories (``key=value/``): escaping, value rendering, row splitting.

Names and values are escaped as Hive and Spark do (``%`` followed by two upper-case hex digits
for ``/``, ``\\``, ``=``, ``%``, ``:``, control characters and a few more), so no value can
name a folder outside the output folder. A null or empty value becomes
``__HIVE_DEFAULT_PARTITION__``.

Two rules keep every folder readable: a partition column's name may not start with ``_`` or
``.`` (readers skip such hidden folders, so its rows would vanish), refused at ``start()``; and
one folder name ``<name>=<value>`` may not exceed :data:`MAX_SEGMENT_BYTES` (255, the
``NAME_MAX`` of common filesystems) in UTF-8: a batch holding such a value fails with a
:class:`PartitionValueTooLongError` before its folder is made.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from microbatch.errors import ConfigurationError, SinkError

__all__ = [
    "DEFAULT_PARTITION",
    "MAX_SEGMENT_BYTES",
    "PartitionValueTooLongError",
    "check_partition_columns",
    "escape_path_name",
    "is_scalar_type",
    "partition_directory",
    "render_partition_value",
    "split_by_partition",
    "unescape_path_name",
]

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The directory value standing for a null (or empty string) partition value."""

MAX_SEGMENT_BYTES = 255
"""Most bytes (UTF-8) of one partition folder name ``<name>=<value>``, escaped."""

_HIDDEN_PREFIXES = ("_", ".")


class PartitionValueTooLongError(SinkError):
    """A partition value whose folder name would be longer than :data:`MAX_SEGMENT_BYTES`."""


_ESCAPED = frozenset(
    [chr(code) for code in range(0x00, 0x20)]
    + ['"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[", "]", "^"]
)
_UNESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def escape_path_name(text: str) -> str:
    """``text`` made safe as (part of) one path segment, Hive style (``a/b`` -> ``a%2Fb``)."""
    if not any(char in _ESCAPED for char in text):
        return text
    return "".join(f"%{ord(char):02X}" if char in _ESCAPED else char for char in text)


def unescape_path_name(text: str) -> str:
    """The inverse of :func:`escape_path_name` (a ``%`` not followed by two hex digits stays)."""
    if "%" not in text:
        return text
    return _UNESCAPE.sub(lambda match: chr(int(match.group(1), 16)), text)


def render_partition_value(value: Any) -> str | None:
    """The text of a partition value as it appears (unescaped) in a directory name.

    ``None`` and ``""`` give ``None`` (the default partition). Booleans are ``true``/``false``,
    timestamps ``YYYY-MM-DD HH:MM:SS[.ffffff]`` in the column's time zone, dates ISO.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, datetime.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        return text
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    text = str(value)
    return text or None


def partition_directory(values: Sequence[tuple[str, str | None]]) -> str:
    """``k1=v1/k2=v2`` for rendered ``(name, value)`` pairs, names and values escaped."""
    return "/".join(
        f"{escape_path_name(name)}="
        + (DEFAULT_PARTITION if value is None else escape_path_name(value))
        for name, value in values
    )


def is_scalar_type(data_type: pa.DataType) -> bool:
    """True for the flat types a partition value (or a vectorised JSON column) may have."""
    if pa.types.is_dictionary(data_type):
        return is_scalar_type(data_type.value_type)
    return bool(
        pa.types.is_integer(data_type)
        or pa.types.is_floating(data_type)
        or pa.types.is_boolean(data_type)
        or pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_string_view(data_type)
        or pa.types.is_date(data_type)
        or pa.types.is_timestamp(data_type)
        or pa.types.is_decimal(data_type)
    )


def check_partition_columns(schema: pa.Schema, columns: Sequence[str], *, where: str) -> None:
    """Raise :class:`ConfigurationError` unless ``columns`` can partition rows of ``schema``."""
    duplicated = sorted({c for c in columns if list(columns).count(c) > 1})
    if duplicated:
        raise ConfigurationError(f"{where}: partition_by names {duplicated} more than once")
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise ConfigurationError(
            f"{where}: partition_by columns {missing} are not in the output columns {schema.names}"
        )
    if columns and len(set(columns)) == len(schema.names):
        raise ConfigurationError(
            f"{where}: cannot use all columns {schema.names} for partition columns; at least "
            "one column must remain to be stored in the files"
        )
    for name in columns:
        if name.startswith(_HIDDEN_PREFIXES):
            raise ConfigurationError(
                f"{where}: cannot use column {name!r} as a partition column: its folders "
                f"({escape_path_name(name)}=...) would start with {name[0]!r}, and readers "
                "(this connector, Spark, Hive, pyarrow) skip folders whose name starts with '_' "
                "or '.' as hidden, so its rows would never be read. Rename the column first "
                f"(e.g. with_column_renamed({name!r}, {name.lstrip('_./') or 'p'!r}))"
            )
        prefix = len(escape_path_name(name).encode()) + 1
        if prefix + len(DEFAULT_PARTITION) > MAX_SEGMENT_BYTES:
            raise ConfigurationError(
                f"{where}: cannot use column {name[:40]!r}... as a partition column: its name "
                f"takes {prefix} bytes of the {MAX_SEGMENT_BYTES} a folder name may have; "
                "rename the column first"
            )
        data_type = schema.field(name).type
        if not is_scalar_type(data_type):
            raise ConfigurationError(
                f"{where}: cannot use column {name!r} of type {data_type} as a partition column; "
                "use a string, number, boolean, date, timestamp or decimal column"
            )


def _rendered_keys(column: pa.Array) -> tuple[pa.Array, list[str | None]]:
    """Per row, an index into a list of rendered values (nulls map to a ``None`` entry)."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    encoded = column.dictionary_encode(null_encoding="encode")
    rendered = [render_partition_value(value) for value in encoded.dictionary.to_pylist()]
    return encoded.indices, rendered


@functools.lru_cache(maxsize=8192)
def _segment(name: str, value: str | None) -> str:
    segment = partition_directory([(name, value)])
    size = len(segment.encode())
    if size > MAX_SEGMENT_BYTES:
        assert value is not None  # the default partition always fits (checked at start)
        raise PartitionValueTooLongError(
            f"partition column {name!r} has a value too long for a folder name: the value "
            f"starting {value[:40]!r} ({len(value)} characters) makes a folder name of {size} "
            f"bytes, more than the {MAX_SEGMENT_BYTES} bytes filesystems allow. Nothing of the "
            "batch is kept, and it fails the same way on every retry: shorten the column "
            "before writing (for example with a transform that truncates or hashes it), or "
            "partition by another column"
        )
    return segment


def split_by_partition(
    batch: pa.RecordBatch, columns: Sequence[str]
) -> Iterator[tuple[str, dict[str, str | None], pa.RecordBatch]]:
    """Cut ``batch`` into groups of equal partition values, rows in their original order.

    Yields ``(directory, values, rows)``: the escaped relative directory, the rendered values
    by column name (``None`` for the default partition), and the rows without the partition
    columns. Each directory appears once per call.
    """
    if not columns:
        yield "", {}, batch
        return
    if batch.num_rows == 0:
        return
    keys = [(name, *_rendered_keys(batch.column(name))) for name in columns]
    segments = [
        pc.take(pa.array([_segment(name, value) for value in rendered], pa.string()), indices)
        for name, indices, rendered in keys
    ]
    directories = segments[0] if len(segments) == 1 else pc.binary_join_element_wise(*segments, "/")
    encoded = directories.dictionary_encode()
    names = encoded.dictionary.to_pylist()
    data = batch.select([name for name in batch.schema.names if name not in columns])

    def values_at(row: int) -> dict[str, str | None]:
        return {name: rendered[indices[row].as_py()] for name, indices, rendered in keys}

    if len(names) == 1:
        yield names[0], values_at(0), data
        return
    order = pc.sort_indices(encoded.indices)  # stable: rows keep their order within a group
    ordered_keys = pc.take(encoded.indices, order)
    changes = pc.not_equal(ordered_keys.slice(1), ordered_keys.slice(0, len(ordered_keys) - 1))
    starts = [0, *(index + 1 for index in pc.indices_nonzero(changes).to_pylist())]
    ends = [*starts[1:], len(ordered_keys)]
    first_rows = pc.take(order, pa.array(starts, pa.int64())).to_pylist()
    group_keys = pc.take(ordered_keys, pa.array(starts, pa.int64())).to_pylist()
    per_column = [
        (name, pc.take(indices, pa.array(first_rows, pa.int64())).to_pylist(), rendered)
        for name, indices, rendered in keys
    ]
    ordered = data.take(order)
    for group, (start, end) in enumerate(zip(starts, ends, strict=True)):
        values = {name: rendered[found[group]] for name, found, rendered in per_column}
        yield names[group_keys[group]], values, ordered.slice(start, end - start)
