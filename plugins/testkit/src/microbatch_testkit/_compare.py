"""Comparing schemas and tables, with failure messages that show what differs."""

from __future__ import annotations

import importlib
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

__all__ = ["describe_schema_difference", "rows_difference", "show", "show_batch"]

_SHOWN_ROWS = 10


def show(value: Any) -> str:
    """A one-line rendering of an offset or other JSON-ish value."""
    try:
        return json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def show_batch(batch: pa.RecordBatch | pa.Table, limit: int = _SHOWN_ROWS) -> str:
    """The schema and first rows of a batch, for failure messages."""
    rows = batch.slice(0, limit).to_pylist()
    more = f"\n    ... {batch.num_rows - limit} more rows" if batch.num_rows > limit else ""
    listing = "".join(f"\n    {row!r}" for row in rows)
    return f"{batch.num_rows} rows, schema {_inline(batch.schema)}{listing}{more}"


def _inline(schema: pa.Schema) -> str:
    return "{" + ", ".join(f"{field.name}: {field.type}" for field in schema) + "}"


def describe_schema_difference(expected: pa.Schema, actual: pa.Schema) -> str:
    """Field by field, how ``actual`` differs from ``expected`` (empty when they are equal).

    Uses ``microbatch.types.schema_diff`` when the installed core provides it.
    """
    if actual.equals(expected):
        return ""
    core_diff = _core_schema_diff()
    if core_diff is not None:
        found = core_diff(expected, actual)
        lines = found.splitlines() if isinstance(found, str) else [str(line) for line in found]
        if lines:
            return "\n".join(f"  {line}" for line in lines)
    return _plain_schema_diff(expected, actual)


def _core_schema_diff() -> Any:
    try:
        types = importlib.import_module("microbatch.types")
    except ImportError:
        return None
    return getattr(types, "schema_diff", None)


def _plain_schema_diff(expected: pa.Schema, actual: pa.Schema) -> str:
    lines: list[str] = []
    actual_fields = {field.name: field for field in actual}
    expected_names = [field.name for field in expected]
    for field in expected:
        other = actual_fields.get(field.name)
        if other is None:
            lines.append(f"  missing field {field.name!r} ({field.type})")
        elif not other.type.equals(field.type):
            lines.append(f"  field {field.name!r}: expected {field.type}, got {other.type}")
        elif other.nullable != field.nullable:
            lines.append(
                f"  field {field.name!r}: expected nullable={field.nullable}, "
                f"got nullable={other.nullable}"
            )
    for field in actual:
        if field.name not in expected_names:
            lines.append(f"  unexpected field {field.name!r} ({field.type})")
    if not lines and actual.names != expected.names:
        lines.append(f"  field order: expected {expected.names}, got {actual.names}")
    if not lines:
        lines.append("  schemas differ in metadata only")
    return "\n".join(lines)


def _row_key(row: dict[str, Any]) -> str:
    return repr(sorted(row.items()))


def rows_difference(
    expected: pa.Table, actual: pa.Table, *, ordered: bool, context: str = ""
) -> str:
    """How ``actual``'s rows differ from ``expected``'s (empty when they are equal).

    With ``ordered=False`` rows are compared as multisets (duplicates count).
    """
    expected_rows = expected.to_pylist()
    actual_rows = actual.to_pylist()
    prefix = f"{context}: " if context else ""
    if ordered:
        if expected_rows == actual_rows:
            return ""
        for index, (want, got) in enumerate(zip(expected_rows, actual_rows, strict=False)):
            if want != got:
                return (
                    f"{prefix}row {index} differs (of {len(expected_rows)} expected, "
                    f"{len(actual_rows)} received)\n    expected {want!r}\n    received {got!r}"
                )
        return (
            f"{prefix}expected {len(expected_rows)} rows, received {len(actual_rows)}"
            + _listing("expected, not received", expected_rows[len(actual_rows) :])
            + _listing("received, not expected", actual_rows[len(expected_rows) :])
        )
    want_count = Counter(_row_key(row) for row in expected_rows)
    got_count = Counter(_row_key(row) for row in actual_rows)
    if want_count == got_count:
        return ""
    missing = _pick(expected_rows, want_count - got_count)
    extra = _pick(actual_rows, got_count - want_count)
    return (
        f"{prefix}expected {len(expected_rows)} rows, received {len(actual_rows)} "
        "(compared in any order)"
        + _listing("expected, not received", missing)
        + _listing("received, not expected", extra)
    )


def _pick(rows: Iterable[dict[str, Any]], wanted: Counter[str]) -> list[dict[str, Any]]:
    left = Counter(wanted)
    picked: list[dict[str, Any]] = []
    for row in rows:
        key = _row_key(row)
        if left[key] > 0:
            left[key] -= 1
            picked.append(row)
    return picked


def _listing(title: str, rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    shown = "".join(f"\n    {row!r}" for row in rows[:_SHOWN_ROWS])
    more = f"\n    ... {len(rows) - _SHOWN_ROWS} more" if len(rows) > _SHOWN_ROWS else ""
    return f"\n  {title} ({len(rows)}):{shown}{more}"
