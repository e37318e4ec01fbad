"""Spark 4's CSV values: one record's tokens as a schema's values, as Spark converts them
(Java's number parsing, Scala's ``toBoolean``, Spark's decimal rules), and why Spark finds a
record malformed. The vectorised conversion of whole columns (:mod:`._csv_columns`) leaves
the values it cannot decide exactly to :func:`convert`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from ._spark_csv import SparkCsvOptions

__all__ = ["SPACES", "DatetimeParser", "convert"]

DatetimeParser = Callable[[pa.DataType, str], Any]
"""``parse_datetime(dtype, text)``: Spark's value of ``text`` for a date or timestamp column,
or ``None`` when Spark cannot read it."""

SPACES = "".join(map(chr, range(33)))
"""What Java's ``String.trim`` removes: every character up to U+0020."""

_INT_BITS = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}
_JAVA_FLOAT = re.compile(
    r"([+-]?)(?:(NaN|Infinity)|(?:((?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|0[xX]([0-9a-fA-F]*)\.?([0-9a-fA-F]*)[pP]([+-]?\d+))[fFdD]?)",
    re.ASCII,
)
_JAVA_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")  # any script's digits


def convert(
    tokens: list[str | None],
    schema: pa.Schema,
    options: SparkCsvOptions,
    parse_datetime: DatetimeParser,
) -> tuple[dict[str, Any], str | None]:
    """One record's values for ``schema`` (its columns by position, without the corrupt
    record column) and why Spark finds the record malformed, or ``None``.

    A malformed record keeps Spark's partial values, as ``PERMISSIVE`` returns them: missing
    tokens and values that cannot be read are null, extra tokens are dropped. Raises
    ``TypeError`` for a column type Spark's CSV reader does not have.
    """
    reason = None
    if len(tokens) != len(schema):
        reason = f"the record has {len(tokens)} value(s), the schema {len(schema)} column(s)"
        tokens = (list(tokens) + [None] * len(schema))[: len(schema)]
    row: dict[str, Any] = {}
    for field, token in zip(schema, tokens, strict=True):
        row[field.name] = None
        if token is not None and token != options.null_value:
            try:
                row[field.name] = _value(token, field.type, options, parse_datetime)
            except (ValueError, ArithmeticError) as error:
                reason = reason or f"column {field.name}: {error}"
    return row, reason


def _value(text: str, dtype: pa.DataType, o: SparkCsvOptions, parse: DatetimeParser) -> Any:
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return text
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return text.encode("utf-8", errors="surrogatepass")
    if dtype in _INT_BITS:  # Java's Integer.parseInt and kin: decimal digits of any script
        body = text[1:] if text[:1] in ("+", "-") else text
        digits = [unicodedata.decimal(c, None) if c <= "\uffff" else None for c in body]
        if not digits or None in digits:
            raise ValueError(f"{text!r} is not an integer")
        value = int("".join(map(str, digits))) * (-1 if text[0] == "-" else 1)
        if not -(1 << (_INT_BITS[dtype] - 1)) <= value < 1 << (_INT_BITS[dtype] - 1):
            raise ValueError(f"{text!r} is out of range for {dtype}")
        return value
    if pa.types.is_floating(dtype):
        specials = {o.nan_value: "nan", o.positive_inf: "inf", o.negative_inf: "-inf"}
        if text in specials:
            return float(specials[text])
        return _java_float(text, single=dtype == pa.float32())
    if pa.types.is_boolean(dtype):  # Scala's toBoolean: Java's equalsIgnoreCase
        for word in ("true", "false"):
            if len(text) == len(word) and all(map(_same_letter, text, word)):
                return word == "true"
        raise ValueError(f"{text!r} is not true or false")
    if pa.types.is_decimal(dtype):
        return _java_decimal(text, dtype.precision, dtype.scale)
    if pa.types.is_date(dtype) or pa.types.is_timestamp(dtype):
        value = parse(dtype, text)
        if value is None:
            raise ValueError(f"{text!r} is not a valid {dtype}")
        return value
    raise TypeError(f"Spark's CSV reader has no columns of type {dtype}")


def _same_letter(a: str, b: str) -> bool:
    upper_a, upper_b = a.upper(), b.upper()
    if len(upper_a) > 1 or len(upper_b) > 1:
        return a == b
    return a == b or upper_a == upper_b or upper_a.lower() == upper_b.lower()


def _java_float(text: str, *, single: bool) -> float:
    """Java's ``Double.parseDouble`` / ``Float.parseFloat``; white space around is ignored."""
    match = _JAVA_FLOAT.fullmatch(text.strip(SPACES))
    if match is None:
        raise ValueError(f"{text!r} is not a number")
    sign, word, number, whole, fraction, exponent = match.groups()
    if word:
        value = float("nan" if word == "NaN" else "inf")
    elif number is not None:
        value = _nearest_float(Fraction(Decimal(number)), single)
    elif whole or fraction:
        exact = Fraction(int(whole + fraction, 16)) * Fraction(2) ** (
            int(exponent) - 4 * len(fraction)
        )
        value = _nearest_float(exact, single)
    else:
        raise ValueError(f"{text!r} is not a number")
    return -value if sign == "-" else value


def _nearest_float(exact: Fraction, single: bool) -> float:
    """The IEEE float (32 or 64 bits) nearest to ``exact``, ties to even; ``inf`` beyond."""
    digits, min_exponent = (24, -126) if single else (53, -1022)
    if exact == 0:
        return 0.0
    exponent = exact.numerator.bit_length() - exact.denominator.bit_length()
    if Fraction(2) ** exponent > exact:
        exponent -= 1
    quantum = Fraction(2) ** (max(exponent, min_exponent) - digits + 1)
    rounded = round(exact / quantum) * quantum
    return float("inf") if rounded >= Fraction(2) ** (2 - min_exponent) else float(rounded)


def _java_decimal(text: str, precision: int, scale: int) -> Decimal:
    """Spark's decimal (US locale): commas dropped, Java's ``BigDecimal`` syntax, rounded
    half up to ``scale``; more than ``precision`` digits cannot be read."""
    plain = text.replace(",", "")
    if not _JAVA_DECIMAL.fullmatch(plain) or any(char > "\uffff" for char in plain):
        raise ValueError(f"{text!r} is not a decimal number")
    number = Decimal("".join(str(unicodedata.decimal(c, c)) for c in plain))
    too_big = ValueError(f"{text!r} does not fit DECIMAL({precision},{scale})")
    if number and number.adjusted() >= precision - scale:
        raise too_big
    context = Context(prec=precision + 2, rounding=ROUND_HALF_UP, Emin=-(10**9), Emax=10**9)
    try:
        rounded = number.quantize(Decimal(1).scaleb(-scale), context=context)
    except InvalidOperation:
        raise too_big from None
    if len(rounded.as_tuple().digits) > precision:
        raise too_big
    return rounded if rounded else abs(rounded)
