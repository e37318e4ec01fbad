"""PostgreSQL column types for binary COPY: which Arrow type each one takes, and the casts.

:func:`table_columns` reads a table's columns from the server's catalogue (the exact types,
also of temporary tables and domains); :func:`column_fit` says how an Arrow column is cast to
the Arrow type whose pgpq encoding the column's receive function reads, or why it cannot be.
Casts are vectorised (pyarrow compute); a value that does not fit raises :class:`DoesNotFit`
with the first offending row, found by bisecting the failed cast.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from sqlalchemy import Connection, Table

__all__ = ["ColumnFit", "DoesNotFit", "PgColumn", "column_fit", "safe_cast", "table_columns"]

Cast = Callable[[pa.Array], pa.Array]

_COLUMNS_SQL = """
SELECT a.attname,
       COALESCE(bt.typname, t.typname) AS typname,
       CASE WHEN bt.oid IS NULL THEN a.atttypmod ELSE t.typtypmod END AS typmod,
       et.typname AS element,
       current_setting('TimeZone') AS zone
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype
LEFT JOIN pg_type et ON et.oid = COALESCE(bt.typelem, t.typelem)
     AND COALESCE(bt.typcategory, t.typcategory) = 'A'
WHERE a.attrelid = CAST(:relation AS regclass) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""

_TEXT = frozenset({"text", "varchar", "bpchar", "name", "citext"})
_ARRAY_ELEMENTS = frozenset(
    {"bool", "int2", "int4", "int8", "float4", "float8", "numeric", "text", "bytea", "date"}
    | {"time", "timestamp", "interval", "jsonb"}
)
"""Element types whose array OID pgpq writes as the server expects (it writes ``text`` for
every string element and ``timestamp`` for every timestamp element, so ``varchar[]`` and
``timestamptz[]`` are not among them)."""
_UTC = frozenset({"UTC", "Etc/UTC", "GMT", "Etc/GMT", "UCT", "Zulu", "Etc/Zulu", "Universal"})


class DoesNotFit(ValueError):
    """A value that cannot be converted to the column's type; ``row`` is its index (or None)."""

    def __init__(self, message: str, row: int | None = None) -> None:
        super().__init__(message)
        self.row = row


@dataclass(frozen=True)
class PgColumn:
    """A table column as the server declares it."""

    name: str
    type_name: str
    """``pg_type.typname`` (domains resolved to their base type): int4, timestamptz, _int8..."""
    typmod: int
    element: str | None
    """The element's ``typname`` for an array column."""
    zone: str
    """The session's ``TimeZone`` (naive and zoned timestamps convert through it)."""

    @property
    def shown(self) -> str:
        """The type as SQL writes it: int4, numeric(12,3), varchar(20), text[]..."""
        if self.element:
            return f"{self.element}[]"
        if self.type_name == "numeric" and self.typmod >= 4:
            return _numeric_name(self.typmod)
        if self.type_name in ("varchar", "bpchar") and self.typmod >= 4:
            return f"{self.type_name}({self.typmod - 4})"
        return self.type_name


@dataclass(frozen=True)
class ColumnFit:
    """How one Arrow column goes into one table column."""

    name: str
    pg_type: str
    arrow_type: pa.DataType
    cast: Cast
    encoder: Callable[[pa.Field], Any]
    problem: str | None = None


def table_columns(connection: Connection, table: Table) -> dict[str, PgColumn]:
    """The columns of ``table`` (which must exist) by name, from ``pg_attribute``."""
    from sqlalchemy import text

    relation = connection.dialect.identifier_preparer.format_table(table)
    rows = connection.execute(text(_COLUMNS_SQL), {"relation": relation}).all()
    return {row[0]: PgColumn(row[0], row[1], int(row[2]), row[3], row[4]) for row in rows}


def column_fit(column: PgColumn, source: pa.DataType) -> ColumnFit:
    """How an Arrow column of type ``source`` is written into ``column``; ``problem`` is set
    when binary COPY cannot write it."""
    if column.element is not None:
        return _array_fit(column, source)
    scalar = _scalar(column.type_name, column.typmod, column.zone, source)
    if isinstance(scalar, str):
        return _unsupported(column, scalar)
    arrow_type, cast, jsonb = scalar
    return ColumnFit(column.name, column.shown, arrow_type, cast, _encoder_for(jsonb))


def _unsupported(column: PgColumn, problem: str) -> ColumnFit:
    return ColumnFit(
        column.name, column.shown, pa.null(), lambda array: array, lambda f: None, problem
    )


def _encoder_for(jsonb: bool) -> Callable[[pa.Field], Any]:
    def build(field: pa.Field) -> Any:
        import pgpq
        from pgpq import encoders, schema

        if jsonb:
            return encoders.StringEncoderBuilder.new_with_output(field, schema.Jsonb())
        return pgpq.ArrowToPostgresBinaryEncoder.infer_encoder(field)

    return build


def _array_fit(column: PgColumn, source: pa.DataType) -> ColumnFit:
    element = column.element or ""
    if element not in _ARRAY_ELEMENTS:
        return _unsupported(column, f"arrays of {element} are not supported by the encoder")
    if pa.types.is_null(source):  # a column of nulls only
        scalar = _scalar(element, -1, column.zone, source)
        if isinstance(scalar, str):
            return _unsupported(column, scalar)
        empty = pa.list_(scalar[0])
        return ColumnFit(
            column.name,
            column.shown,
            empty,
            lambda array: pa.nulls(len(array), empty),
            _list_encoder(scalar[0], scalar[2]),
        )
    if not (
        pa.types.is_list(source)
        or pa.types.is_large_list(source)
        or pa.types.is_fixed_size_list(source)
    ):
        return _unsupported(column, f"an array column takes Arrow lists, not {source}")
    value_type = source.value_type
    if pa.types.is_list(value_type) or pa.types.is_large_list(value_type):
        return _unsupported(column, "nested lists (multidimensional arrays) are not supported")
    scalar = _scalar(element, -1, column.zone, value_type)
    if isinstance(scalar, str):
        return _unsupported(column, scalar)
    item_type, item_cast, jsonb = scalar
    target = pa.list_(item_type)

    def cast(array: pa.Array) -> pa.Array:
        if not pa.types.is_list(array.type):
            array = pc.cast(array, pa.list_(array.type.value_type))
        offsets = array.offsets
        start, end = offsets[0].as_py(), offsets[-1].as_py()
        values = item_cast(array.values.slice(start, end - start))
        shifted = pc.subtract(offsets, start) if start else offsets
        return pa.ListArray.from_arrays(shifted, values, type=target, mask=array.is_null())

    return ColumnFit(column.name, column.shown, target, cast, _list_encoder(item_type, jsonb))


def _list_encoder(item_type: pa.DataType, jsonb: bool) -> Callable[[pa.Field], Any]:
    def encoder(field: pa.Field) -> Any:
        from pgpq import encoders

        inner = _encoder_for(jsonb)(pa.field("item", item_type))
        return encoders.ListEncoderBuilder.new_with_inner(field, inner)

    return encoder


def _scalar(
    type_name: str, typmod: int, zone: str, source: pa.DataType
) -> tuple[pa.DataType, Cast, bool] | str:
    """(Arrow target type, cast, jsonb?) for a scalar PostgreSQL type, or why there is none."""
    if pa.types.is_dictionary(source):
        source = source.value_type
    simple = {
        "bool": pa.bool_(),
        "int2": pa.int16(),
        "int4": pa.int32(),
        "int8": pa.int64(),
        "float4": pa.float32(),
        "float8": pa.float64(),
        "date": pa.date32(),
        "time": pa.time64("us"),
        "interval": pa.duration("us"),
    }
    if type_name in simple:
        target = simple[type_name]
        return target, safe_cast(target), False
    if type_name in _TEXT or type_name in ("json", "jsonb"):
        if pa.types.is_nested(source):
            return f"Arrow {source} must be converted to JSON text first"
        target = source if _is_string(source) else pa.string()
        return target, safe_cast(target), type_name == "jsonb"
    if type_name == "bytea":
        if pa.types.is_binary(source) or pa.types.is_large_binary(source):
            return source, safe_cast(source), False
        if pa.types.is_fixed_size_binary(source):
            return pa.binary(), safe_cast(pa.binary()), False
        return pa.binary(), safe_cast(pa.binary()), False
    if type_name == "uuid":
        return pa.binary(16), _uuid_cast, False
    if type_name == "timestamptz":
        return pa.timestamp("us", "UTC"), _zoned_cast(zone), False
    if type_name == "timestamp":
        return pa.timestamp("us"), _naive_cast(zone), False
    if type_name == "numeric":
        return _numeric(typmod, source)
    return f"type {type_name} is not supported by the encoder"


def _numeric(typmod: int, source: pa.DataType) -> tuple[pa.DataType, Cast, bool] | str:
    if typmod >= 4:
        precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
        if precision > 38:
            return f"numeric({precision},{scale}) is wider than Arrow's decimal128"
        target: pa.DataType = pa.decimal128(precision, scale)
        if pa.types.is_floating(source):
            return f"Arrow {source} into {_numeric_name(typmod)} would be rounded by Arrow's rules"
        if pa.types.is_integer(source):
            if scale > 18:
                return f"Arrow integers into {_numeric_name(typmod)} need too many digits"
            wide = pa.decimal128(20 + scale, scale)  # what Arrow needs for any 64-bit integer
            to_wide, to_target = safe_cast(wide), safe_cast(target)
            return target, lambda array: to_target(to_wide(array)), False
        return target, safe_cast(target), False
    if pa.types.is_integer(source) or pa.types.is_null(source):
        return pa.decimal128(20, 0), safe_cast(pa.decimal128(20, 0)), False
    if pa.types.is_decimal(source):  # the widest precision: later batches may need it
        target = pa.decimal128(38, min(max(source.scale, 0), 38))
        return target, safe_cast(target), False
    return f"Arrow {source} into an unconstrained numeric has no exact conversion"


def _numeric_name(typmod: int) -> str:
    modifier = typmod - 4
    return f"numeric({(modifier >> 16) & 0xFFFF},{modifier & 0xFFFF})"


def _is_string(data_type: pa.DataType) -> bool:
    return (
        pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_string_view(data_type)
    )


def safe_cast(target: pa.DataType) -> Cast:
    """A cast to ``target`` that refuses overflow and lost precision (:class:`DoesNotFit`)."""

    def cast(array: pa.Array) -> pa.Array:
        if array.type == target:
            return array
        return _checked(array, lambda part: pc.cast(part, target, safe=True), target)

    return cast


def _checked(array: pa.Array, convert: Cast, target: Any) -> pa.Array:
    """``convert(array)``, or :class:`DoesNotFit` naming the first row that fails."""
    try:
        return convert(array)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        raise DoesNotFit(f"Arrow {array.type} cannot be converted to {target}") from None
    except (pa.ArrowInvalid, ValueError, OverflowError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        row = _first_failing_row(array, convert)
        if row is not None:
            value = _shown(array.slice(row, 1))
            raise DoesNotFit(f"{message} (value {value})", row) from None
        raise DoesNotFit(message) from None


def _first_failing_row(array: pa.Array, convert: Cast) -> int | None:
    start, length = 0, len(array)
    while length > 1:
        half = length // 2
        try:
            convert(array.slice(start, half))
        except Exception:
            length = half
            continue
        start, length = start + half, length - half
    try:
        convert(array.slice(start, 1))
    except Exception:
        return start
    return None


def _shown(one: pa.Array) -> str:
    try:
        text = repr(one[0].as_py())
    except (ValueError, OverflowError):  # e.g. nanoseconds that datetime cannot hold
        try:
            text = str(pc.cast(one, pa.string())[0].as_py())
        except pa.ArrowException:
            text = "?"
    return text if len(text) <= 60 else text[:57] + "..."


def _arrow_zone(zone: str) -> str:
    if zone in _UTC:
        return "UTC"
    try:
        pc.assume_timezone(pa.array([0], pa.timestamp("us")), zone)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise DoesNotFit(
            f"the session TimeZone {zone!r} is not a zone name Arrow knows, so timestamps "
            "cannot be converted through it; set a named zone, e.g. with "
            "sessionInitStatement \"SET TIME ZONE 'UTC'\""
        ) from None
    return zone


def _zoned_cast(zone: str) -> Cast:
    """To ``timestamp[us, UTC]``: zoned values keep their instant; naive ones (and dates) are
    wall times in the session's zone, as the server reads them in text."""
    target = pa.timestamp("us", "UTC")

    def convert(part: pa.Array) -> pa.Array:
        if pa.types.is_dictionary(part.type):
            part = part.dictionary_decode()
        if _is_string(part.type):
            try:
                return pc.cast(part, target, safe=True)
            except pa.ArrowInvalid:
                part = pc.cast(part, pa.timestamp("us"), safe=True)
        if pa.types.is_date(part.type):
            part = pc.cast(part, pa.timestamp("us"))
        if pa.types.is_timestamp(part.type) and part.type.tz is None:
            name = _arrow_zone(zone)
            part = pc.cast(part, pa.timestamp(part.type.unit, "UTC"))
            if name != "UTC":
                part = _as_server_reads(pc.cast(part, pa.timestamp(part.type.unit)), name)
        return pc.cast(part, target, safe=True)

    def cast(array: pa.Array) -> pa.Array:
        if array.type == target:
            return array
        return _checked(array, convert, "timestamptz")

    return cast


def _as_server_reads(naive: pa.Array, zone: str) -> pa.Array:
    """Wall times in ``zone`` as instants, the way PostgreSQL reads them: an ambiguous time
    (clocks going back) takes the offset after the transition, a time in a gap (clocks going
    forward) the offset before it."""
    instant = pc.assume_timezone(naive, zone, ambiguous="latest", nonexistent="earliest")
    # in a gap, "earliest" is the last instant before it: move on by what the wall clock lacks
    return pc.add(instant, pc.subtract(naive, pc.local_timestamp(instant)))


def _naive_cast(zone: str) -> Cast:
    """To ``timestamp[us]``: naive values keep their wall time; zoned ones become wall times
    in the session's zone, as the server converts timestamptz to timestamp."""
    target = pa.timestamp("us")

    def convert(part: pa.Array) -> pa.Array:
        if pa.types.is_dictionary(part.type):
            part = part.dictionary_decode()
        if pa.types.is_timestamp(part.type) and part.type.tz is not None:
            name = _arrow_zone(zone)
            part = pc.local_timestamp(pc.cast(part, pa.timestamp(part.type.unit, name)))
        return pc.cast(part, target, safe=True)

    def cast(array: pa.Array) -> pa.Array:
        if array.type == target:
            return array
        return _checked(array, convert, "timestamp")

    return cast


def _uuid_cast(array: pa.Array) -> pa.Array:
    """UUIDs as 16 bytes: from ``fixed_size_binary(16)`` (or the Arrow uuid extension type),
    16-byte binaries, or text (with or without hyphens and braces), vectorised."""
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    target = pa.binary(16)
    if array.type == target:
        return array
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), target)
    if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
        return _checked(array, _binary_uuid, "uuid")
    if _is_string(array.type):
        return _checked(array, _text_uuid, "uuid")
    raise DoesNotFit(f"Arrow {array.type} cannot be converted to uuid")


def _binary_uuid(array: pa.Array) -> pa.Array:
    lengths = pc.fill_null(pc.binary_length(array), 16)
    if pc.any(pc.not_equal(lengths, 16)).as_py():
        raise ValueError("a uuid is 16 bytes")
    filled = pc.fill_null(pc.cast(array, pa.binary()), b"\0" * 16)
    return _fixed16(filled, array)


def _text_uuid(array: pa.Array) -> pa.Array:
    stripped = pc.replace_substring_regex(pc.cast(array, pa.string()), r"[-{}]", "")
    lengths = pc.fill_null(pc.binary_length(stripped), 32)
    if pc.any(pc.not_equal(lengths, 32)).as_py():
        raise ValueError("a uuid is 32 hexadecimal digits")
    filled = pc.fill_null(stripped, "0" * 32)
    try:  # one C call for the whole column
        raw = bytes.fromhex(_contiguous_bytes(filled, 32).decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError("not a hexadecimal uuid") from None
    return _from_bytes(raw, array)


def _contiguous_bytes(array: pa.Array, width: int) -> bytes:
    """The bytes of a (32-bit offset) string or binary array whose values all have
    ``width`` bytes."""
    start = struct.unpack_from("<i", array.buffers()[1], 4 * array.offset)[0]
    return array.buffers()[2][start : start + width * len(array)].to_pybytes()


def _fixed16(filled: pa.Array, original: pa.Array) -> pa.Array:
    return _from_bytes(_contiguous_bytes(filled, 16), original)


def _from_bytes(raw: bytes, original: pa.Array) -> pa.Array:
    validity = pc.is_valid(original).buffers()[1] if original.null_count else None
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(16), len(original), [validity, pa.py_buffer(raw)]
    )
