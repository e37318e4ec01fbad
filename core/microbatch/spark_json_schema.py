"""The schema Spark 4's JSON reader infers, record by record, with Spark's JSON options.

Schema inference reads each record (a line, or a whole ``multiLine`` document) with the grammar
of :class:`~microbatch.spark_json.SparkJsonOptions` and gives its type
(:func:`infer_record_type`); the types of all records are merged with Spark's rules
(:func:`compatible_type`) and the result is cleaned up as Spark cleans it
(:func:`canonical_type`)::

    options = SparkJsonOptions(prefers_decimal=True)
    merged = pa.null()
    for record in records:
        found = infer_record_type(record, options)   # None: the record is malformed
        if found is not None:
            merged = compatible_type(merged, found)
    schema = canonical_type(merged, drop_field_if_all_null=False)

Types are pyarrow types standing for Spark's: ``null`` (Spark's NullType, a value that is
always null so far), BOOLEAN, BIGINT (every integer that fits 64 bits), DOUBLE, DECIMAL,
STRING, ARRAY (``list``) and STRUCT, whose fields are sorted by name as Spark sorts them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

import pyarrow as pa

from microbatch._spark_json_tokens import (
    BAD_VALUE,
    BIG_DECIMAL,
    END_ARRAY,
    END_OBJECT,
    START_ARRAY,
    START_OBJECT,
    VALUE_FALSE,
    VALUE_FLOAT,
    VALUE_INT,
    VALUE_NULL,
    VALUE_STRING,
    VALUE_TRUE,
    Bad,
    Lexer,
)

if TYPE_CHECKING:
    from microbatch.spark_json import SparkJsonOptions

__all__ = ["canonical_type", "compatible_type", "infer_record_type", "root_struct"]

MAX_PRECISION = 38
"""The largest DECIMAL precision; a wider number is inferred as DOUBLE."""

_LONG = pa.int64()
_DOUBLE = pa.float64()
_STRING = pa.string()
_NULL = pa.null()
_NUMERIC_ORDER = {pa.int8(): 0, pa.int16(): 1, pa.int32(): 2, pa.int64(): 3}
_NUMERIC_ORDER |= {pa.float32(): 4, pa.float64(): 5}
_INTEGER_DIGITS = {pa.int8(): 3, pa.int16(): 5, pa.int32(): 10, pa.int64(): 20}
"""The precision of Spark's ``DecimalType.forType`` of each integer type."""


def infer_record_type(record: bytes, options: SparkJsonOptions) -> pa.DataType | None:
    """The type Spark infers for one record, or None when Spark finds it malformed.

    Only the first JSON value of the record counts (as when reading). A blank record, ``null``
    and ``""`` are ``null``; an object is a STRUCT of its fields sorted by name (a repeated
    name once, of the merged type); an array is an ARRAY of its elements' merged type
    (``null`` when empty); integers are BIGINT, or DECIMAL(digits, 0) beyond 64 bits (DOUBLE
    beyond 38 digits); other numbers DOUBLE. With ``prefers_decimal`` numbers with a fraction
    or exponent, and strings that are decimal numbers, are DECIMAL when they fit 38 digits;
    with ``primitives_as_string`` numbers and booleans are STRING. A value nested close to
    Jackson's limit of 1,000 levels may exceed Python's recursion limit: ``RecursionError``.
    """
    lexer = Lexer(record.decode(errors="surrogateescape"), options)
    lexer.pos = 1 if lexer.text.startswith("\ufeff") else 0
    try:
        return _infer(lexer, lexer.next_token(), options)
    except Bad:
        return None


def _infer(lexer: Lexer, token: int | None, options: SparkJsonOptions) -> pa.DataType:
    """Spark's ``inferField`` for the value whose first token is ``token``."""
    if token is None or token == VALUE_NULL:
        return _NULL
    if token == VALUE_STRING:
        text = lexer.string()
        if not text:
            return _NULL  # Spark takes "" for a null, so that it merges with any type
        if options.prefers_decimal:
            return _string_decimal(text) or _STRING
        return _STRING
    if token == START_OBJECT:
        fields: dict[str, pa.DataType] = {}
        while (token := lexer.next_token()) is not None and token != END_OBJECT:
            name = str(lexer.ctx[2])
            found = _infer(lexer, lexer.next_token(), options)
            fields[name] = compatible_type(fields[name], found) if name in fields else found
        return pa.struct([pa.field(name, fields[name]) for name in sorted(fields)])
    if token == START_ARRAY:
        element = _NULL
        while (token := lexer.next_token()) is not None and token != END_ARRAY:
            element = compatible_type(element, _infer(lexer, token, options))
        return pa.list_(element)
    if token in (VALUE_TRUE, VALUE_FALSE):
        return _STRING if options.primitives_as_string else pa.bool_()
    if options.primitives_as_string:
        return _STRING
    if token == VALUE_INT:
        value = int(lexer.num)
        if -(1 << 63) <= value < 1 << 63:
            return _LONG
        return _number_decimal(Decimal(value)) or _DOUBLE
    if token == VALUE_FLOAT and options.prefers_decimal:
        if lexer.special is not None:
            raise Bad(BAD_VALUE, f"{lexer.num} is no decimal number (prefersDecimal)")
        return _number_decimal(Decimal(lexer.num)) or _DOUBLE
    return _DOUBLE


def _number_decimal(value: Decimal) -> pa.DataType | None:
    """DECIMAL(max(precision, scale), max(scale, 0)) of a number, as Spark infers it; a
    number with an exponent beyond its digits (``1e3``, which Spark refuses to infer) takes
    DECIMAL(digits + exponent, 0)."""
    digits, exponent = len(value.as_tuple().digits), int(value.as_tuple().exponent)
    precision = digits + exponent if exponent > 0 else max(digits, -exponent)
    return pa.decimal128(precision, max(-exponent, 0)) if precision <= MAX_PRECISION else None


def _string_decimal(text: str) -> pa.DataType | None:
    """DECIMAL(precision, scale) of a string that Java's BigDecimal reads (commas dropped), when
    Spark's DecimalType takes them (scale from 0 to the precision, at most 38 digits)."""
    digits = text.replace(",", "")
    if not BIG_DECIMAL.fullmatch(digits):
        return None
    value = Decimal(digits)
    precision, scale = len(value.as_tuple().digits), -int(value.as_tuple().exponent)
    if 0 <= scale <= precision <= MAX_PRECISION:
        return pa.decimal128(precision, scale)
    return None


def compatible_type(left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """The type holding values of both, by Spark's ``compatibleType``.

    ``null`` gives way to anything; numbers widen (BIGINT and DOUBLE to DOUBLE, DECIMALs to a
    DECIMAL holding both, or DOUBLE beyond 38 digits); STRUCTs merge their fields, ARRAYs their
    elements; any other pair becomes STRING.
    """
    if left == right:
        return left
    if pa.types.is_null(left):
        return right
    if pa.types.is_null(right):
        return left
    if left in _NUMERIC_ORDER and right in _NUMERIC_ORDER:
        return left if _NUMERIC_ORDER[left] > _NUMERIC_ORDER[right] else right
    if pa.types.is_decimal(left) or pa.types.is_decimal(right):
        return _decimals(left, right)
    if isinstance(left, pa.StructType) and isinstance(right, pa.StructType):
        fields = {f.name: f.type for f in left}
        for f in right:
            fields[f.name] = compatible_type(fields[f.name], f.type) if f.name in fields else f.type
        return pa.struct([pa.field(name, fields[name]) for name in sorted(fields)])
    if isinstance(left, pa.ListType) and isinstance(right, pa.ListType):
        return pa.list_(compatible_type(left.value_type, right.value_type))
    return _STRING


def _decimals(left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """A DECIMAL and a number: DOUBLE with a floating type, else the DECIMAL holding both."""
    if pa.types.is_floating(left) or pa.types.is_floating(right):
        return _DOUBLE
    sides = []
    for side in (left, right):
        if side in _INTEGER_DIGITS:
            sides.append((_INTEGER_DIGITS[side], 0))
        elif pa.types.is_decimal(side):
            sides.append((side.precision, side.scale))
        else:
            return _STRING
    scale = max(scale for _, scale in sides)
    whole = max(precision - scale for precision, scale in sides)
    return _DOUBLE if whole + scale > MAX_PRECISION else pa.decimal128(whole + scale, scale)


def root_struct(dtype: pa.DataType) -> pa.DataType | None:
    """What a record's type adds to the schema, as Spark's ``compatibleRootType`` merges it:
    the STRUCT of an object (or of the objects of a top-level array), ``null`` for a null or
    blank record; None for anything else, which Spark counts as a malformed record."""
    while isinstance(dtype, pa.ListType):
        dtype = dtype.value_type
    if pa.types.is_null(dtype) or isinstance(dtype, pa.StructType):
        return dtype
    return None


def canonical_type(dtype: pa.DataType, drop_field_if_all_null: bool) -> pa.DataType | None:
    """The merged type as Spark finally has it (``canonicalizeType``): ``null`` is STRING (or
    its field is left out with ``drop_field_if_all_null``), fields with an empty name and
    STRUCTs without fields are left out. None when nothing is left."""
    if isinstance(dtype, pa.ListType):
        element = canonical_type(dtype.value_type, drop_field_if_all_null)
        return None if element is None else pa.list_(element)
    if isinstance(dtype, pa.StructType):
        fields = []
        for f in dtype:
            kept = canonical_type(f.type, drop_field_if_all_null) if f.name else None
            if kept is not None:
                fields.append(pa.field(f.name, kept))
        return pa.struct(fields) if fields else None
    if pa.types.is_null(dtype):
        return None if drop_field_if_all_null else _STRING
    return dtype
