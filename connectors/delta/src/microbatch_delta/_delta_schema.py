"""Arrow types as a Delta table holds them, and Delta's text form of partition values.

:func:`delta_arrow_schema` turns the schema of a batch into the Arrow schema of the Delta table
that holds it, type by type as delta-rs maps them, with these choices where delta-rs's mapping
would lose values or refuse them:

- timestamps become microseconds: time-zone aware ones Delta's ``timestamp`` (UTC,
  ``pa.timestamp("us", "UTC")``), naive ones ``timestamp_ntz`` (``pa.timestamp("us")``);
- unsigned integers widen to the next signed type (``uint8`` -> ``short``, ``uint16`` ->
  ``integer``, ``uint32`` -> ``long``); ``uint64`` becomes ``long`` (a value above 2**63-1 is
  an error when it is written, never a wrapped number);
- ``float16`` widens to ``float``; ``date64`` becomes ``date``; ``decimal256`` of precision 38
  or less becomes ``decimal128``;
- large and view strings, binaries and lists become the plain ones, dictionaries their values,
  extension types their storage type; nested types are mapped field by field.

A type Delta cannot hold (times of day, durations, intervals, unions, decimals above 38 digits,
empty structs) is a :class:`~microbatch.errors.SchemaError` naming the field by its path, and so
are two columns (or struct fields) whose names differ only in case.

Partition values are kept in the log as text (the protocol's "Partition Value Serialization"):
:func:`partition_value_text` writes them exactly as the data files' folders and the ``add``
actions spell them, and :func:`parse_partition_value` reads any of the protocol's forms back.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import re
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = [
    "HIVE_DEFAULT_PARTITION",
    "delta_arrow_schema",
    "parse_partition_value",
    "partition_text_array",
    "partition_value_text",
    "table_arrow_schema",
]

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The folder name of a null partition value (``col=__HIVE_DEFAULT_PARTITION__``)."""

_TIMESTAMP = pa.timestamp("us", "UTC")
_TIMESTAMP_NTZ = pa.timestamp("us")
_LIST_ITEM = "element"  # the names delta-rs gives list items and map entries
_MAP_ENTRIES = ("key_value", "key", "value")


def delta_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema a batch of ``schema`` has once written to a Delta table.

    Field names, order and nullability are kept; schema and field metadata are dropped (Delta
    keeps its own field metadata in the log). Raises ``SchemaError`` naming the first field,
    by its path (``payload.items.element``), whose type Delta cannot hold.
    """
    _check_names(list(schema), "")
    fields = [_map_field(field, field.name) for field in schema]
    return pa.schema(fields)


def _check_names(fields: list[pa.Field], parent: str) -> None:
    """Delta's column names are case-insensitive: ``id`` and ``ID`` are the same column."""
    seen: dict[str, str] = {}
    for field in fields:
        key = field.name.lower()
        if key in seen:
            where = f" in '{parent}'" if parent else ""
            raise mb.SchemaError(
                f"Columns '{seen[key]}' and '{field.name}'{where} have the same name in a Delta "
                f"table, whose column names are case-insensitive: rename one of them"
            )
        seen[key] = field.name


def _map_field(field: pa.Field, path: str) -> pa.Field:
    return pa.field(field.name, _map_type(field.type, path), nullable=field.nullable)


def _map_type(type: pa.DataType, path: str) -> pa.DataType:
    if isinstance(type, pa.ExtensionType):
        return _map_type(type.storage_type, path)
    if pa.types.is_dictionary(type):
        return _map_type(type.value_type, path)
    if pa.types.is_boolean(type) or pa.types.is_null(type):
        return type
    if pa.types.is_signed_integer(type):
        return type
    if pa.types.is_unsigned_integer(type):
        return {8: pa.int16(), 16: pa.int32(), 32: pa.int64(), 64: pa.int64()}[type.bit_width]
    if pa.types.is_float16(type):
        return pa.float32()
    if pa.types.is_floating(type):
        return type
    if pa.types.is_decimal(type):
        if type.precision > 38:
            raise _unsupported(path, type, "Delta decimals hold at most 38 digits")
        if type.scale < 0:
            raise _unsupported(path, type, "Delta decimals need a scale of 0 or more")
        return pa.decimal128(type.precision, type.scale)
    if pa.types.is_string(type) or pa.types.is_large_string(type) or pa.types.is_string_view(type):
        return pa.string()
    if (
        pa.types.is_binary(type)
        or pa.types.is_large_binary(type)
        or pa.types.is_binary_view(type)
        or pa.types.is_fixed_size_binary(type)
    ):
        return pa.binary()
    if pa.types.is_date(type):
        return pa.date32()
    if pa.types.is_timestamp(type):
        return _TIMESTAMP if type.tz is not None else _TIMESTAMP_NTZ
    if pa.types.is_struct(type):
        if type.num_fields == 0:
            raise _unsupported(path, type, "Delta structs need at least one field")
        _check_names(list(type.fields), path)
        return pa.struct([_map_field(child, f"{path}.{child.name}") for child in type.fields])
    if pa.types.is_map(type):
        key = _map_type(type.key_type, f"{path}.key")
        item = _map_type(type.item_type, f"{path}.value")
        return pa.map_(
            pa.field(_MAP_ENTRIES[1], key, nullable=False),
            pa.field(_MAP_ENTRIES[2], item, nullable=type.item_field.nullable),
        )
    if (
        pa.types.is_list(type)
        or pa.types.is_large_list(type)
        or pa.types.is_fixed_size_list(type)
        or pa.types.is_list_view(type)
        or pa.types.is_large_list_view(type)
    ):
        item = _map_type(type.value_type, f"{path}.{_LIST_ITEM}")
        return pa.list_(pa.field(_LIST_ITEM, item, nullable=type.value_field.nullable))
    if pa.types.is_time(type):
        raise _unsupported(path, type, "Delta has no time-of-day type; cast it to a string")
    if pa.types.is_duration(type) or pa.types.is_interval(type):
        raise _unsupported(path, type, "Delta has no duration type; cast it to a long")
    raise _unsupported(path, type, "Delta has no such type")


def _unsupported(path: str, type: pa.DataType, why: str) -> mb.SchemaError:
    return mb.SchemaError(
        f"Column '{path}' has type {type}, which a Delta table cannot hold: {why}"
    )


def table_arrow_schema(table: DeltaTable) -> pa.Schema:
    """The Arrow schema of a delta-rs table (delta-rs hands an arro3 schema; this is pyarrow)."""
    return pa.schema(table.schema().to_arrow())


# --- partition values -------------------------------------------------------------------------

_PARTITION_KINDS = "strings, numbers, booleans, dates, timestamps and binaries"


def partition_text_array(values: pa.Array | pa.ChunkedArray, type: pa.DataType) -> pa.Array:
    """Delta's text of every value of a partition column (null where the value is null).

    ``values`` has the column's Delta type ``type`` (or one that casts to it). An empty string
    becomes null, as Delta's writers store it (readers see null either way). The work is done
    once per distinct value, so it is cheap for any column one would partition by. The text
    ``__HIVE_DEFAULT_PARTITION__`` becomes null too: it names the null folder.
    """
    if not _partitionable(type):
        raise mb.SchemaError(
            f"A Delta table cannot be partitioned by a column of type {type}: partition columns "
            f"must be {_PARTITION_KINDS}"
        )
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.type != type:
        values = values.cast(type)
    if pa.types.is_string(type) or pa.types.is_large_string(type):
        return _string_texts(values.cast(pa.string()))  # a string is its own text: no hashing
    encoded = values.dictionary_encode()
    text = _texts(encoded.dictionary, type)
    return text.take(encoded.indices)


def _partitionable(type: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(type)
        or pa.types.is_large_string(type)
        or pa.types.is_boolean(type)
        or pa.types.is_integer(type)
        or pa.types.is_decimal(type)
        or pa.types.is_date(type)
        or pa.types.is_floating(type)
        or pa.types.is_timestamp(type)
        or pa.types.is_binary(type)
        or pa.types.is_large_binary(type)
    )


def _string_texts(text: pa.Array) -> pa.Array:
    # both spell the null partition folder, and are null for every Delta reader
    as_null = pc.or_(pc.equal(text, ""), pc.equal(text, HIVE_DEFAULT_PARTITION))
    if pc.any(as_null).as_py():
        return pc.if_else(as_null, pa.scalar(None, pa.string()), text)
    return text


def _texts(values: pa.Array, type: pa.DataType) -> pa.Array:
    if pa.types.is_string(type) or pa.types.is_large_string(type):
        return _string_texts(values.cast(pa.string()))
    if pa.types.is_boolean(type) or pa.types.is_integer(type) or pa.types.is_decimal(type):
        return values.cast(pa.string())
    if pa.types.is_date(type):
        return values.cast(pa.date32()).cast(pa.string())
    if pa.types.is_floating(type):
        text = values.cast(pa.float64() if pa.types.is_float16(type) else type).cast(pa.string())
        for arrow, spark in (("nan", "NaN"), ("inf", "Infinity"), ("-inf", "-Infinity")):
            text = pc.if_else(pc.equal(text, arrow), pa.scalar(spark), text)
        return text
    if pa.types.is_timestamp(type):
        values = values.cast(_TIMESTAMP if type.tz is not None else _TIMESTAMP_NTZ)
        # %S carries the six fraction digits of a microsecond timestamp.
        return pc.strftime(values, "%Y-%m-%d %H:%M:%S")
    if pa.types.is_binary(type) or pa.types.is_large_binary(type):
        return pa.array(
            [None if v is None else "".join(f"\\u{b:04X}" for b in v) for v in values.to_pylist()],
            pa.string(),
        )
    raise mb.SchemaError(
        f"A Delta table cannot be partitioned by a column of type {type}: partition columns "
        f"must be {_PARTITION_KINDS}"
    )


def partition_value_text(value: Any, type: pa.DataType) -> str | None:
    """Delta's text for one partition value of Arrow type ``type`` (``None`` for null).

    Strings as they are (an empty string and ``__HIVE_DEFAULT_PARTITION__`` are null),
    integers and decimals in plain digits, booleans ``true``/``false``, floats in their
    shortest exact form (``NaN``, ``Infinity``),
    dates ``yyyy-MM-dd``, timestamps ``yyyy-MM-dd HH:mm:ss.SSSSSS`` (in UTC for a time-zone
    aware column), binaries one ``\\u00XX`` escape per byte. Raises ``SchemaError`` for a type
    that cannot be a partition column.
    """
    if isinstance(value, pa.Scalar):
        value = value.as_py()
    text = partition_text_array(pa.array([value], type), type)[0].as_py()
    return text if text is None else str(text)


_TIMESTAMP_TEXT = re.compile(
    r"(?P<date>[+-]?\d{4,}-\d{2}-\d{2})"
    r"(?:[ T](?P<h>\d{2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:\.(?P<frac>\d{1,9}))?)?)?"
    r"(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?"
)
_BINARY_TEXT = re.compile(r"(?:\\u[0-9A-Fa-f]{4})*")
_EPOCH = _dt.datetime(1970, 1, 1)


def parse_partition_value(text: str | None, type: pa.DataType) -> pa.Scalar:
    """The value of a partition column read from the log's text, as a scalar of ``type``.

    Reads what :func:`partition_value_text` writes and every other form the Delta protocol
    allows (timestamps with a ``T`` and a ``Z`` or an offset, fewer fraction digits, no seconds;
    ``__HIVE_DEFAULT_PARTITION__`` and the empty string as null). A timestamp without a zone is
    UTC for a ``timestamp`` column. Raises ``ValueError`` naming the text and the type when the
    text is not a value of that type.
    """
    if text is None or text == "" or text == HIVE_DEFAULT_PARTITION:
        return pa.scalar(None, type)
    try:
        return _parse(text, type)
    except (ValueError, ArithmeticError, pa.ArrowInvalid, OverflowError) as exc:
        raise ValueError(f"Partition value {text!r} is not a value of type {type}: {exc}") from None


def _parse(text: str, type: pa.DataType) -> pa.Scalar:
    if pa.types.is_string(type) or pa.types.is_large_string(type):
        return pa.scalar(text, type)
    if pa.types.is_boolean(type):
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise ValueError("expected true or false")
        return pa.scalar(lowered == "true", type)
    if pa.types.is_integer(type):
        return pa.scalar(int(text.strip()), type)
    if pa.types.is_floating(type):
        return pa.scalar(float(text.strip()), type)
    if pa.types.is_decimal(type):
        with decimal.localcontext(prec=80):
            number = decimal.Decimal(text.strip())
            if not number.is_finite():
                raise ValueError("a decimal must be finite")
            return pa.scalar(number.quantize(decimal.Decimal(1).scaleb(-type.scale)), type)
    if pa.types.is_date(type):
        return pa.scalar(_dt.date.fromisoformat(text.strip()[:10]), type)
    if pa.types.is_timestamp(type):
        return pa.scalar(_timestamp_micros(text.strip()), pa.int64()).cast(type)
    if pa.types.is_binary(type) or pa.types.is_large_binary(type):
        if _BINARY_TEXT.fullmatch(text):
            return pa.scalar(
                bytes(int(text[i + 2 : i + 6], 16) for i in range(0, len(text), 6)), type
            )
        return pa.scalar(text.encode(), type)
    raise ValueError(f"a partition column cannot have type {type}")


def _timestamp_micros(text: str) -> int:
    match = _TIMESTAMP_TEXT.fullmatch(text)
    if match is None:
        raise ValueError("expected yyyy-MM-dd HH:mm:ss[.SSSSSS]")
    day = _dt.date.fromisoformat(match["date"])
    frac = (match["frac"] or "").ljust(6, "0")[:6]
    moment = _dt.datetime(
        day.year,
        day.month,
        day.day,
        int(match["h"] or 0),
        int(match["m"] or 0),
        int(match["s"] or 0),
        int(frac),
    )
    micros = (moment - _EPOCH) // _dt.timedelta(microseconds=1)
    zone = match["zone"]
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = int(digits[:2]) * 60 + int(digits[2:4] or 0)
        micros -= sign * offset * 60_000_000
    return micros
