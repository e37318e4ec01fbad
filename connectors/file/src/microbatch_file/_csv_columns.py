"""Whole CSV columns of text converted to a schema's types with Spark 4's rules, vectorised.

Each column is converted in steps; a step takes the texts whose shape it reads exactly as Spark
does and leaves the rest (plain decimal integers first, then what Java also reads: white space
around a float, ``NaN`` and ``Infinity``, ...). The texts no step takes are marked, and their
records go to :func:`~._spark_csv_values.convert` one by one, which reads them as Spark does
(or says why Spark finds the record malformed).
"""

from __future__ import annotations

import functools
from contextlib import suppress
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ._datetimes import DatetimeOptions
from ._spark_csv import SparkCsvOptions

__all__ = ["ColumnConverter", "supported"]

_SPACE_CLASS = r"[\x00-\x20]"  # what Java's String.trim removes
_INT = r"^[+-]?[0-9]{1,18}$"  # up to 18 digits always fit a BIGINT
_NUMBER = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_DATE = r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
_NAIVE = rf"^{_DATE}[T ]{_TIME}$"
_ZONED = rf"^{_DATE}[T ]{_TIME}(?:Z|[+-](?:0[0-9]|1[0-7]):[0-5][0-9]|[+-]18:00)$"
_UTC_ZONES = frozenset({"UTC", "Z", "GMT", "Etc/UTC", "Etc/GMT", "+00:00", "-00:00"})
_TS = pa.timestamp("us", tz="UTC")
_NTZ = pa.timestamp("us")
_INT_RANGES = {
    pa.int8(): (-(1 << 7), (1 << 7) - 1),
    pa.int16(): (-(1 << 15), (1 << 15) - 1),
    pa.int32(): (-(1 << 31), (1 << 31) - 1),
    pa.int64(): None,
}


def supported(dtype: pa.DataType) -> bool:
    """Whether Spark's CSV reader has columns of ``dtype``."""
    return (
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_binary(dtype)
        or pa.types.is_large_binary(dtype)
        or dtype in _INT_RANGES
        or (pa.types.is_floating(dtype) and dtype != pa.float16())
        or pa.types.is_boolean(dtype)
        or pa.types.is_decimal(dtype)
        or dtype == pa.date32()
        or pa.types.is_timestamp(dtype)
    )


def datetime_type(dtype: pa.DataType) -> pa.DataType:
    """The type the datetime options parse a date or timestamp column as."""
    if pa.types.is_timestamp(dtype):
        return _TS if dtype.tz is not None else _NTZ
    return dtype


class _Steps:
    """One column on its way: the values decided so far and the texts still to decide."""

    def __init__(self, texts: pa.Array, dtype: pa.DataType) -> None:
        self.texts = texts
        self.dtype = dtype
        self.result: pa.Array = pa.nulls(len(texts), dtype)
        self.todo: pa.Array = pc.is_valid(texts)
        self.fresh = True

    def left(self) -> bool:
        return bool(pc.any(self.todo).as_py())

    def take(self, mask: pa.Array, values: pa.Array) -> None:
        """Rows of ``mask`` (null is false) are decided: their values are in ``values``."""
        mask = pc.and_(pc.fill_null(mask, False), self.todo)
        self.result = pc.if_else(mask, values, self.result)
        self.todo = pc.and_not(self.todo, mask)
        self.fresh = False

    def only(self, mask: pa.Array) -> pa.Array:
        """The texts where ``mask`` holds, null elsewhere."""
        return pc.if_else(pc.fill_null(mask, False), self.texts, None)


@dataclass(frozen=True)
class ColumnConverter:
    """Converts columns of CSV texts (tokens, null where Spark has null) to column types."""

    options: SparkCsvOptions
    datetimes: DatetimeOptions

    def convert(
        self, texts: pa.Array, dtype: pa.DataType, *, null_values: bool = True
    ) -> tuple[pa.Array, pa.Array | None]:
        """``texts`` (an array or a chunked one) as ``dtype``, and which rows are left to
        :func:`convert` (None: none).

        ``texts`` equal to ``nullValue`` are null, as in Spark (``null_values=False``: there
        are none).
        """
        if pa.types.is_large_string(texts.type) or pa.types.is_large_binary(texts.type):
            texts = texts.cast(pa.string())
        if null_values:
            texts = self.nulls(texts)
        if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
            return texts.cast(dtype), None
        if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
            return texts.cast(dtype), None  # the text's UTF-8 bytes, as Spark reads BINARY
        whole = self._whole(texts, dtype)
        if whole is not None:
            return whole, None
        if isinstance(texts, pa.ChunkedArray):
            texts = texts.combine_chunks()
        steps = _Steps(texts, dtype)
        if dtype in _INT_RANGES:
            self._ints(steps)
        elif pa.types.is_floating(dtype):
            self._floats(steps)
        elif pa.types.is_boolean(dtype):
            lower = pc.ascii_lower(texts)
            truth = pc.equal(lower, "true")
            steps.take(pc.or_(truth, pc.equal(lower, "false")), truth)
        elif pa.types.is_decimal(dtype):
            self._decimals(steps)
        else:
            self._datetimes(steps)
        return steps.result, steps.todo if steps.left() else None

    def nulls(self, texts: pa.Array) -> pa.Array:
        """``texts`` with ``nullValue`` as null."""
        null_value = self.options.null_value
        equal = pc.fill_null(pc.equal(texts, null_value), False)
        if not pc.any(equal).as_py():
            return texts
        return pc.if_else(equal, None, texts)

    # -- the whole column at once -----------------------------------------------------------
    def _whole(self, texts: pa.Array, dtype: pa.DataType) -> pa.Array | None:
        """``texts`` read by one pyarrow cast, when that reads every text as Spark does; None
        when some text needs the steps below.

        pyarrow's integers are Java's but for a ``+`` sign (refused) and ``0x`` hexadecimal
        (taken: looked for); its floats are Java's for decimal numbers (correctly rounded)
        but for ``NaN`` and infinities in any case (refused here unless every value is
        finite); its ISO 8601 dates and timestamps are Spark's default ones, but for fewer
        forms (refused) and for zones after the minutes or beyond 18 hours (only ``Z`` after
        the seconds is taken here).
        """
        if not (
            dtype in _INT_RANGES
            or (pa.types.is_floating(dtype) and self._numbers_are_not_tokens)
            or (dtype == pa.date32() or pa.types.is_timestamp(dtype))
        ):
            return None
        kind = datetime_type(dtype)
        parser = self.datetimes.parser(kind)
        if parser is not None and parser.pattern is not None:
            return None  # a pattern: the datetime options' parser reads every text
        if kind == _TS:  # Spark takes a zone only after the seconds (and up to 18 hours)
            zoned = pc.all(pc.ends_with(texts, "Z")).as_py() is not False
            if zoned and (pc.min(pc.binary_length(texts)).as_py() or 0) < 20:
                return None
            if not zoned and self.datetimes.time_zone not in _UTC_ZONES:
                return None  # other zones, or naive texts in another time zone: the steps
            target = _TS if zoned else _NTZ  # naive texts are read in UTC
        else:
            target = dtype
        try:  # (a cast that fails may take long: it is tried on likely texts only)
            values = texts.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if dtype in _INT_RANGES:
            return None if _has_bytes(texts, b"xX") else values
        if pa.types.is_floating(dtype):
            finite = pc.is_finite(values)
            return values if pc.all(pc.fill_null(finite, True)).as_py() else None
        return _as(values, dtype)

    @functools.cached_property
    def _numbers_are_not_tokens(self) -> bool:
        """Whether no text pyarrow reads as a finite number is a token for NaN or infinity."""
        o = self.options
        tokens = pa.array([o.nan_value, o.positive_inf, o.negative_inf])
        try:
            values = tokens.cast(pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values = pa.array([_arrow_float(token) for token in tokens.to_pylist()], pa.float64())
        return not pc.any(pc.fill_null(pc.is_finite(values), False)).as_py()

    # -- steps -------------------------------------------------------------------------------
    def _ints(self, steps: _Steps) -> None:
        """Java's ``Integer.parseInt`` and kin, for ASCII digits (any script's digits, and 19
        digits, are :func:`convert`'s)."""
        plain = pc.match_substring_regex(steps.texts, _INT)
        texts = steps.only(plain)
        if pc.any(pc.fill_null(pc.starts_with(texts, "+"), False)).as_py():
            texts = pc.utf8_ltrim(texts, characters="+")
        wide = texts.cast(pa.int64())
        bounds = _INT_RANGES[steps.dtype]
        if bounds is None:
            steps.take(plain, wide)
            return
        fits = pc.and_(pc.greater_equal(wide, bounds[0]), pc.less_equal(wide, bounds[1]))
        fits = pc.fill_null(fits, False)
        steps.take(fits, pc.if_else(fits, wide, None).cast(steps.dtype))

    def _floats(self, steps: _Steps) -> None:
        """``nanValue``, ``positiveInf``, ``negativeInf``, then Java's ``Double.parseDouble``
        (``Float.parseFloat``) for decimal numbers, with white space around or not, and for
        ``NaN`` and ``Infinity``; hexadecimal numbers and ``d``/``f`` suffixes are
        :func:`convert`'s."""
        o, dtype, texts = self.options, steps.dtype, steps.texts
        specials = ((o.nan_value, "nan"), (o.positive_inf, "inf"), (o.negative_inf, "-inf"))
        for token, value in specials:
            equal = pc.equal(texts, token)
            if pc.any(pc.fill_null(equal, False)).as_py():
                steps.take(equal, pa.array([float(value)] * len(texts), dtype))
        plain = pc.match_substring_regex(texts, f"^{_NUMBER}$")
        self._cast_numbers(steps, plain, steps.only(pc.and_(plain, steps.todo)))
        if not steps.left():
            return
        rest = steps.only(steps.todo)
        spaced = pc.extract_regex(rest, rf"^{_SPACE_CLASS}*(?P<n>{_NUMBER}){_SPACE_CLASS}*$")
        numbers = pc.struct_field(spaced, "n")
        self._cast_numbers(steps, pc.is_valid(numbers), numbers)
        words = pc.extract_regex(
            steps.only(steps.todo),
            rf"^{_SPACE_CLASS}*(?P<s>[+-]?)(?P<w>NaN|Infinity){_SPACE_CLASS}*$",
        )
        word = pc.struct_field(words, "w")
        if pc.any(pc.is_valid(word)).as_py():
            negative = pc.equal(pc.struct_field(words, "s"), "-")
            infinite = pc.if_else(negative, float("-inf"), float("inf"))
            value = pc.if_else(pc.equal(word, "NaN"), float("nan"), infinite)
            steps.take(pc.is_valid(word), value.cast(dtype))

    @staticmethod
    def _cast_numbers(steps: _Steps, mask: pa.Array, numbers: pa.Array) -> None:
        """Decimal numbers (pyarrow rounds them to the nearest float as Java does)."""
        with suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError):  # else convert()'s
            steps.take(mask, numbers.cast(steps.dtype))

    def _decimals(self, steps: _Steps) -> None:
        """Plain decimal numbers that fit without rounding; commas, exponents and rounding are
        :func:`convert`'s."""
        dtype = steps.dtype
        whole, scale = dtype.precision - dtype.scale, dtype.scale
        integer = f"0*[0-9]{{1,{whole}}}" if whole > 0 else "0+"
        fraction = rf"(?:\.[0-9]{{0,{scale}}})?"
        shapes = [integer + fraction] + ([rf"0*\.[0-9]{{1,{scale}}}"] if scale else [])
        plain = pc.match_substring_regex(steps.texts, rf"^[+-]?(?:{'|'.join(shapes)})$")
        with suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError):  # else convert()'s
            steps.take(plain, steps.only(plain).cast(dtype))

    def _datetimes(self, steps: _Steps) -> None:
        """ISO 8601 text that pyarrow reads exactly as Spark's default parsing, then the
        datetime options' parser for the rest."""
        dtype, texts = steps.dtype, steps.texts
        kind = datetime_type(dtype)
        parser = self.datetimes.parser(kind)
        if parser is None:
            raise TypeError(f"{dtype} is not a date or timestamp type")
        if parser.pattern is None:
            if kind == pa.date32():
                lanes = [(f"^{_DATE}$", pa.date32())]
            elif kind == _NTZ:
                lanes = [(_NAIVE, _NTZ)]
            else:
                lanes = [(_ZONED, _TS)]
                if self.datetimes.time_zone in _UTC_ZONES:
                    lanes.append((_NAIVE, _NTZ))
            for pattern, lane_type in lanes:
                shaped = pc.match_substring_regex(steps.only(steps.todo), pattern)
                if not pc.any(pc.fill_null(shaped, False)).as_py():
                    continue
                try:
                    values = steps.only(shaped).cast(lane_type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    continue
                steps.take(shaped, _as(values, dtype))
                if not steps.left():
                    return
        rest = steps.todo
        if steps.fresh:
            values, bad = parser.parse(texts)
            steps.take(pc.invert(bad), _as(values, dtype))
            return
        values, bad = parser.parse(steps.only(rest))
        steps.take(pc.and_not(rest, bad), _as(values, dtype))


def _has_bytes(texts: pa.Array | pa.ChunkedArray, chars: bytes) -> bool:
    """Whether the character data of ``texts`` holds one of ``chars`` (ASCII)."""
    chunks = texts.chunks if isinstance(texts, pa.ChunkedArray) else [texts]
    for chunk in chunks:
        data = chunk.buffers()[2]
        if data is not None and any(char in data.to_pybytes() for char in chars):
            return True
    return False


def _arrow_float(text: str) -> float | None:
    try:
        return pa.array([text]).cast(pa.float64())[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _as(values: pa.Array, dtype: pa.DataType) -> pa.Array:
    """Parsed datetimes as the column's type (a naive timestamp read as UTC for TIMESTAMP)."""
    return values if values.type == dtype else values.cast(dtype, safe=False)
