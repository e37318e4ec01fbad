"""Arrow tables as text grids in the layout of Spark's ``Dataset.show()``."""

from __future__ import annotations

import datetime
import decimal
import io
import math
import struct
from typing import Any, Literal

import pyarrow as pa

__all__ = ["cell_text", "show_string"]

_ESCAPES = str.maketrans(
    {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\a": "\\a"}
)


def show_string(table: pa.Table, num_rows: int = 20, truncate: bool = True) -> str:
    """The first ``num_rows`` rows of ``table`` as an ASCII grid, then ``only showing top N
    rows`` when there are more. With ``truncate`` cells longer than 20 characters are cut and
    right-aligned, as Spark does; without it they are shown whole and left-aligned."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    shown = table.slice(0, num_rows)
    justify: Literal["right", "left"] = "right" if truncate else "left"
    grid = Table(box=box.ASCII2, padding=0, show_edge=True, highlight=False)
    for name in table.column_names:
        grid.add_column(Text(_fit(name, truncate)), justify=justify, min_width=3, no_wrap=True)
    columns = [_column_texts(shown.column(index), truncate) for index in range(shown.num_columns)]
    for row in zip(*columns, strict=True):
        grid.add_row(*(Text(cell) for cell in row))
    buffer = io.StringIO()
    console = Console(file=buffer, width=1_000_000, color_system=None, highlight=False, emoji=False)
    console.print(grid)
    text = buffer.getvalue()
    if table.num_rows > num_rows:
        text += f"only showing top {num_rows} {'row' if num_rows == 1 else 'rows'}\n"
    return text


def cell_text(value: Any, type_: pa.DataType) -> str:
    """How one value of Arrow type ``type_`` is shown, as Spark shows it (``NULL``,
    ``true``, ``[1, 2]``, ``{a -> 1}``, ``2024-01-01 12:00:00.5``)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _float_text(value, single=pa.types.is_float32(type_))
    if isinstance(value, datetime.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return text + f".{value.microsecond:06d}".rstrip("0") if value.microsecond else text
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, bytes):
        return "[" + " ".join(f"{byte:02X}" for byte in value) + "]"
    if pa.types.is_map(type_):
        pairs = (
            f"{cell_text(key, type_.key_type)} -> {cell_text(item, type_.item_type)}"
            for key, item in value
        )
        return "{" + ", ".join(pairs) + "}"
    if pa.types.is_struct(type_):
        fields = (cell_text(value.get(field.name), field.type) for field in type_)
        return "{" + ", ".join(fields) + "}"
    if isinstance(value, list):
        item_type = getattr(type_, "value_type", pa.null())
        return "[" + ", ".join(cell_text(item, item_type) for item in value) + "]"
    return str(value)


def _column_texts(column: pa.ChunkedArray, truncate: bool) -> list[str]:
    type_ = column.type
    if pa.types.is_timestamp(type_) and type_.unit == "ns":
        type_ = pa.timestamp("us", type_.tz)  # shown to the microsecond, as Spark does
        column = column.cast(type_, safe=False)
    try:
        values = column.to_pylist()
    except (ValueError, pa.ArrowException):  # e.g. nanoseconds nested in a struct
        return [_fit(str(scalar), truncate) for scalar in column]
    return [_fit(cell_text(value, type_), truncate) for value in values]


def _fit(text: str, truncate: bool) -> str:
    text = text.translate(_ESCAPES)
    if truncate and len(text) > 20:
        return text[:17] + "..."
    return text


def _float_text(value: float, *, single: bool) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if single:  # the shortest text that reads back as the same 32-bit float
        for precision in range(1, 10):
            candidate = float(f"{value:.{precision}g}")
            if struct.unpack("f", struct.pack("f", candidate))[0] == value:
                value = candidate
                break
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    exact = decimal.Decimal(repr(value))
    mantissa = "".join(str(digit) for digit in exact.as_tuple().digits).rstrip("0") or "0"
    exponent = exact.adjusted()
    sign = exact.is_signed()
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{exponent}"
