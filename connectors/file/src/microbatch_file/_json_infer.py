"""The schema of JSON files inferred as Spark 4 infers it (:mod:`microbatch.spark_json_schema`).

Each record (a line, or a whole multiLine file) gives a type with Spark's grammar and the
options primitivesAsString and prefersDecimal; the types are merged with Spark's rules, and
dropFieldIfAllNull leaves out the columns that were always null. A malformed record (or one
that is not an object) adds the corrupt-record column in PERMISSIVE mode, is left out in
DROPMALFORMED mode and fails the inference in FAILFAST mode, as in Spark.

A file of clean JSON Lines is inferred by one ``pyarrow.json.read_json`` call instead, when
pyarrow's types are Spark's: no empty strings (Spark infers ``""`` as null), no NaN or
Infinity, no integer beyond 64 bits (Spark infers DECIMAL), and no prefersDecimal.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from microbatch.errors import SchemaError
from microbatch.json_decoder import lines_safe_for_arrow
from microbatch.spark_json_schema import (
    canonical_type,
    compatible_type,
    infer_record_type,
    root_struct,
)

from ._json_spark import JsonSettings
from ._records import split_records

__all__ = ["infer_json_schema"]

_MAX_NESTING = 1000
"""Files with more opening brackets than this on a line are not given to pyarrow's schema
inference, which crashes the process (stack overflow) on values nested tens of thousands of
levels deep."""

_MAX_DEPTH = 100
"""Records whose type nests deeper than this are left out of the inference (their values are
read as the rest of the data has them): the schema's own handling (merging, checkpoint
pinning, casts) recurses per level and would exceed Python's recursion limit."""

_BIG_INTEGER = r"[0-9]{19}"
_NOT_AN_OBJECT_START = r"\n[^{]|\r[^\n{]"


def infer_json_schema(
    files: Iterable[tuple[bytes, str]], settings: JsonSettings, mode: str, multi_line: bool
) -> pa.Schema | None:
    """The schema of ``files`` (each its content and its name for errors), None when they
    give no column."""
    merged: pa.DataType = pa.null()
    corrupt = pa.struct([pa.field(settings.corrupt_name, pa.string())])
    options = settings.options
    for data, where in files:
        if multi_line:
            records = [data] if data.strip() else []
        else:
            fast = None if settings.line_sep is not None else _arrow_type(data, settings)
            if fast is not None:
                merged = compatible_type(merged, fast)
                continue
            records = split_records(data, settings.separator)
        for number, record in enumerate(records, start=1):
            try:
                found = infer_record_type(record, options)
            except RecursionError:
                continue  # nested too deeply to infer: read as the other records have it
            root = None if found is None else root_struct(found)
            if root is None:
                if mode == "FAILFAST":
                    unit = "the document" if multi_line else f"line {number}"
                    raise SchemaError(
                        "[MALFORMED_RECORD_IN_SCHEMA_INFERENCE] Malformed records are detected "
                        f"in schema inference: {where}, {unit}, is not a JSON object (parse "
                        "mode FAILFAST). Fix the file, give the schema with .schema(...), or "
                        "set option mode to PERMISSIVE or DROPMALFORMED."
                    )
                if mode == "PERMISSIVE":
                    merged = compatible_type(merged, corrupt)
            elif _depth(root) <= _MAX_DEPTH:
                merged = compatible_type(merged, root)
    final = canonical_type(merged, settings.drop_field_if_all_null)
    if not isinstance(final, pa.StructType):
        return None
    return pa.schema(list(final))


def _arrow_type(data: bytes, settings: JsonSettings) -> pa.DataType | None:
    """The type of a file of JSON Lines by pyarrow's inference, as Spark's types, when pyarrow
    infers Spark's types (see the module docstring); else None."""
    import pyarrow.json as pajson

    options = settings.options
    if (
        options.prefers_decimal
        or data[:1] != b"{"
        or b'""' in data
        or b"NaN" in data
        or b"Infinity" in data
        or not lines_safe_for_arrow(data)
    ):
        return None
    text = pa.array([data], pa.large_binary()).cast(pa.large_string())
    for pattern in (_NOT_AN_OBJECT_START, _BIG_INTEGER):
        if pc.any(pc.match_substring_regex(text, pattern)).as_py():
            return None
    if data.count(b"[") + data.count(b"{") > _MAX_NESTING:
        lines = pc.split_pattern(text, pattern="\n").flatten()
        opened = pc.add(pc.count_substring(lines, "["), pc.count_substring(lines, "{"))
        if pc.max(opened).as_py() > _MAX_NESTING:
            return None
    try:
        table = pajson.read_json(pa.BufferReader(data))
    except (pa.ArrowInvalid, UnicodeDecodeError, ValueError):
        return None
    lines = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    if table.num_rows != lines + (0 if data.endswith((b"\n", b"\r")) else 1):
        return None  # a line held several documents: Spark infers the first only
    whole = pa.struct(list(table.schema))
    if _depth(whole) > _MAX_DEPTH:
        return None
    return _spark_type(whole, options.primitives_as_string)


def _spark_type(dtype: pa.DataType, primitives_as_string: bool) -> pa.DataType:
    """A type pyarrow inferred as Spark infers it: dates and timestamps as STRING (Spark infers
    them only with options we do not have), fields sorted by name; every number and boolean
    STRING with primitivesAsString."""
    if isinstance(dtype, pa.StructType):
        fields = sorted(dtype, key=lambda f: f.name)
        return pa.struct([f.with_type(_spark_type(f.type, primitives_as_string)) for f in fields])
    if isinstance(dtype, pa.ListType):
        return pa.list_(_spark_type(dtype.value_type, primitives_as_string))
    if pa.types.is_null(dtype) or pa.types.is_string(dtype):
        return dtype
    numeric = pa.types.is_boolean(dtype) or dtype in (pa.int64(), pa.float64())
    return dtype if numeric and not primitives_as_string else pa.string()


def _depth(dtype: pa.DataType) -> int:
    """How many levels ``dtype`` nests (1 for a flat type); iterative, for any depth."""
    deepest, stack = 0, [(dtype, 1)]
    while stack:
        current, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(current, pa.StructType):
            stack.extend((f.type, level + 1) for f in current)
        elif isinstance(current, pa.ListType | pa.LargeListType):
            stack.append((current.value_type, level + 1))
    return deepest
