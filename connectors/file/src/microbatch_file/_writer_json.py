"""Record batches to newline-delimited JSON, the way Spark's JSON writer shapes values.

Flat columns (numbers, booleans, strings, dates, timestamps, decimals) are encoded with Arrow
compute kernels, column at a time; a batch with nested, binary or other columns, or with
strings holding rare control characters, goes through Python's ``json`` row by row.

Conventions: timestamps are ISO 8601 with their offset (``2024-01-01T00:00:00.000Z`` for UTC,
as many fraction digits as the unit has), dates ``2024-01-01``, binary base64, maps objects,
NaN and infinities the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``; with
``ignore_null_fields`` null fields are left out.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .sink_partitions import is_scalar_type

__all__ = ["JsonEncoder", "timestamp_text"]

Converter = Callable[[Any], Any]
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'
_CONTROL = r"[\x00-\x1f]"
_SIMPLE_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))


class JsonEncoder:
    """Encodes record batches of one schema as JSON lines (UTF-8 bytes)."""

    def __init__(self, schema: pa.Schema, *, ignore_null_fields: bool, line_sep: str) -> None:
        self.schema = schema
        self.ignore_null_fields = ignore_null_fields
        self.line_sep = line_sep
        self.vectorized = all(_flat(field.type) for field in schema)
        self.keys = [json.dumps(field.name, ensure_ascii=False) + ":" for field in schema]
        self.converters = {
            field.name: converter
            for field in schema
            if (converter := _converter(field.type, ignore_null_fields)) is not None
        }
        self.encoder = json.JSONEncoder(
            ensure_ascii=False, separators=(",", ":"), default=_json_default
        )

    def encode(self, batch: pa.RecordBatch) -> bytes | pa.Buffer:
        """The JSON lines of ``batch``, each followed by the line separator."""
        if batch.num_rows == 0:
            return b""
        if self.vectorized:
            fast = self._encode_columns(batch)
            if fast is not None:
                return fast
        return self._encode_rows(batch)

    # -- column at a time -----------------------------------------------------------------
    def _encode_columns(self, batch: pa.RecordBatch) -> pa.Buffer | None:
        fragments: list[pa.Array] = []
        for key, column in zip(self.keys, batch.columns, strict=True):
            text = _json_text(column)
            if text is None:
                return None
            if not self.ignore_null_fields:
                text = pc.fill_null(text, "null")
            fragments.append(pc.binary_join_element_wise(key, text, ""))
        if not fragments:
            body: pa.Array = pa.array([""] * batch.num_rows, pa.string())
        elif len(fragments) == 1:
            body = pc.fill_null(fragments[0], "")
        else:
            body = pc.binary_join_element_wise(*fragments, ",", null_handling="skip")
        lines = pc.binary_join_element_wise("{", body, "}" + self.line_sep, "")
        # the lines are contiguous in the array's data buffer: write that span as it is
        _, offsets_buffer, data = lines.buffers()
        offsets = pa.Array.from_buffers(
            pa.int32(), len(lines) + 1, [None, offsets_buffer], offset=lines.offset
        )
        start, end = offsets[0].as_py(), offsets[len(lines)].as_py()
        return data.slice(start, end - start)

    # -- row at a time --------------------------------------------------------------------
    def _encode_rows(self, batch: pa.RecordBatch) -> bytes:
        converters = dict(self.converters)
        columns = {}
        for field, column in zip(self.schema, batch.columns, strict=True):
            if pa.types.is_floating(field.type) and not _all_finite(column):
                converters[field.name] = _float
            elif pa.types.is_timestamp(field.type):
                columns[field.name] = timestamp_text(column)
        if columns:
            batch = pa.RecordBatch.from_arrays(
                [columns.get(f.name, batch.column(f.name)) for f in self.schema],
                names=self.schema.names,
            )
        drop = self.ignore_null_fields
        encode = self.encoder.encode
        lines: list[str] = []
        for row in batch.to_pylist():
            for name, convert in converters.items():
                row[name] = convert(row[name])
            if drop:
                row = {key: value for key, value in row.items() if value is not None}
            lines.append(encode(row))
        sep = self.line_sep
        return (sep.join(lines) + sep).encode("utf-8")


def _flat(data_type: pa.DataType) -> bool:
    return pa.types.is_null(data_type) or is_scalar_type(data_type)


def _all_finite(column: pa.Array) -> bool:
    if column.null_count == len(column):
        return True
    return bool(pc.all(pc.is_finite(column)).as_py())


def _json_text(column: pa.Array) -> pa.Array | None:
    """The JSON text of each value of a flat column (null stays null), or None when the
    column needs the row-by-row path."""
    data_type = column.type
    if pa.types.is_dictionary(data_type):
        column = column.cast(data_type.value_type)
        data_type = column.type
    if pa.types.is_null(data_type):
        return pa.nulls(len(column), pa.string())
    if pa.types.is_integer(data_type) or pa.types.is_decimal(data_type):
        return column.cast(pa.string())
    if pa.types.is_boolean(data_type):
        return column.cast(pa.string())
    if pa.types.is_floating(data_type):
        text = column.cast(pa.string())
        if not _all_finite(column):
            text = pc.replace_substring_regex(text, "^nan$", '"NaN"')
            text = pc.replace_substring_regex(text, "^inf$", '"Infinity"')
            text = pc.replace_substring_regex(text, "^-inf$", '"-Infinity"')
        return text
    if pa.types.is_date(data_type):
        return _quoted(column.cast(pa.string()))
    if pa.types.is_timestamp(data_type):
        return _quoted(timestamp_text(column))
    text = column.cast(pa.string())
    if pc.any(pc.match_substring_regex(text, _NEEDS_ESCAPE)).as_py():
        for plain, escaped in _SIMPLE_ESCAPES:
            text = pc.replace_substring(text, plain, escaped)
        if pc.any(pc.match_substring_regex(text, _CONTROL)).as_py():
            return None
    return _quoted(text)


def _quoted(text: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', text, '"', "")


def timestamp_text(column: pa.Array) -> pa.Array:
    """ISO 8601 text of a timestamp column: ``...T...Z`` for UTC, ``+hh:mm`` for other zones,
    no offset for zone-less timestamps."""
    data_type = column.type
    zone = data_type.tz
    if zone is None or zone.upper() in ("UTC", "Z", "+00:00", "ETC/UTC"):
        naive = column.cast(pa.timestamp(data_type.unit))
        text = pc.replace_substring(naive.cast(pa.string()), " ", "T", max_replacements=1)
        return text if zone is None else pc.binary_join_element_wise(text, "Z", "")
    return pc.strftime(column, "%Y-%m-%dT%H:%M:%S%Ez")


def _float(value: Any) -> Any:
    if value is None or math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"cannot write a value of type {type(value).__name__} as JSON")


def _converter(data_type: pa.DataType, drop_nulls: bool) -> Converter | None:
    """A function fixing up one value of ``data_type`` for JSON, or None when none is needed."""
    if pa.types.is_dictionary(data_type):
        return _converter(data_type.value_type, drop_nulls)
    if pa.types.is_floating(data_type):
        return None  # top-level float columns are checked per batch in _encode_rows
    if pa.types.is_map(data_type):
        items = _nested(data_type.item_type, drop_nulls)
        keys = _converter(data_type.key_type, drop_nulls)

        def convert_map(value: Any) -> Any:
            if value is None:
                return None
            return {_key(keys(k) if keys else k): (items(v) if items else v) for k, v in value}

        return convert_map
    if pa.types.is_struct(data_type):
        fields = {field.name: _nested(field.type, drop_nulls) for field in data_type}
        active = {name: fn for name, fn in fields.items() if fn is not None}
        if not active and not drop_nulls:
            return None

        def convert_struct(value: Any) -> Any:
            if value is None:
                return None
            for name, fn in active.items():
                value[name] = fn(value[name])
            if drop_nulls:
                return {key: item for key, item in value.items() if item is not None}
            return value

        return convert_struct
    if (
        pa.types.is_list(data_type)
        or pa.types.is_large_list(data_type)
        or pa.types.is_fixed_size_list(data_type)
        or pa.types.is_list_view(data_type)
    ):
        element = _nested(data_type.value_type, drop_nulls)
        if element is None:
            return None
        fn = element

        def convert_list(value: Any) -> Any:
            return None if value is None else [fn(item) for item in value]

        return convert_list
    return None


def _nested(data_type: pa.DataType, drop_nulls: bool) -> Converter | None:
    """:func:`_converter` for a value inside a map, struct or list, where floats need one too."""
    if pa.types.is_floating(data_type):
        return _float
    return _converter(data_type, drop_nulls)


def _key(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    encoded = _json_default(value)
    return encoded if isinstance(encoded, str) else json.dumps(encoded)
