"""Whether a batch's schema fits a Delta table, and what the table's schema becomes.

Delta's rules for a write: every column of the batch must be a column of the table, with the
same type (a lossless widening, ``int32`` into ``int64``, is accepted: the rows are cast) and
no nulls where the table says NOT NULL; a nullable column of the table that the batch lacks is
written as nulls. ``mergeSchema`` adds the batch's new columns to the table instead of failing;
``overwriteSchema`` (complete mode) makes the batch's schema, and partitioning, the table's.

A batch that does not fit raises a :class:`~microbatch.errors.SchemaError` listing every
difference, field by field, naming the table: nothing has been written then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import pyarrow as pa

from microbatch.errors import SchemaError

__all__ = ["Fit", "fit_batch", "partition_mismatch", "same_type", "spark_type_name"]

Change = Literal["create", "none", "evolve", "replace"]

_WIDENINGS: dict[pa.DataType, tuple[pa.DataType, ...]] = {
    pa.int8(): (pa.int16(), pa.int32(), pa.int64()),
    pa.int16(): (pa.int32(), pa.int64()),
    pa.int32(): (pa.int64(),),
    pa.float32(): (pa.float64(),),
}
"""Batch types written into a wider table column without loss (Delta's type widening)."""


@dataclass(frozen=True)
class Fit:
    """How a batch goes into the table.

    ``schema`` is the schema the parts are written with, which is also the table's schema once
    the batch is committed; ``partition_by`` the table's partition columns then. ``change``:
    ``create`` (no table yet), ``none`` (the table's schema as it is), ``evolve`` (new columns
    added, ``mergeSchema``), ``replace`` (``overwriteSchema`` in complete mode: another schema
    or another partitioning).
    """

    schema: pa.Schema
    partition_by: tuple[str, ...]
    change: Change
    repartitions: bool = False
    """With ``replace``: the partition columns change too."""
    checks: bool = False
    """The table has CHECK constraints or invariants: delta-rs's writer must check the rows."""


def _normal(type_: pa.DataType) -> pa.DataType:
    """``type_`` with the large and view variants of strings, binaries and lists folded into
    the plain ones (Delta has one string, one binary and one array type)."""
    if pa.types.is_large_string(type_) or pa.types.is_string_view(type_):
        return pa.string()
    if pa.types.is_large_binary(type_) or pa.types.is_binary_view(type_):
        return pa.binary()
    if pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_list_view(type_):
        item = type_.value_field
        return pa.list_(item.with_type(_normal(item.type)).with_name("element"))
    if pa.types.is_map(type_):
        return pa.map_(_normal(type_.key_type), _normal(type_.item_type))
    if pa.types.is_struct(type_):
        return pa.struct([field.with_type(_normal(field.type)) for field in type_])
    return type_


def same_type(batch: pa.DataType, table: pa.DataType) -> bool:
    """True when a batch column of type ``batch`` can be written into a table column of type
    ``table``: the same Delta type, or a lossless widening."""
    batch, table = _normal(batch), _normal(table)
    if batch.equals(table, check_metadata=False):
        return True
    if pa.types.is_struct(batch) and pa.types.is_struct(table):
        return _struct_fits(batch, table)
    if pa.types.is_list(batch) and pa.types.is_list(table):
        return _child_fits(batch.value_field, table.value_field)
    if pa.types.is_map(batch) and pa.types.is_map(table):
        return _child_fits(batch.key_field, table.key_field) and _child_fits(
            batch.item_field, table.item_field
        )
    return any(table.equals(wider) for wider in _WIDENINGS.get(batch, ()))


def _child_fits(batch: pa.Field, table: pa.Field) -> bool:
    return same_type(batch.type, table.type) and (table.nullable or not batch.nullable)


def _struct_fits(batch: pa.StructType, table: pa.StructType) -> bool:
    names = [field.name for field in table]
    if [field.name for field in batch] != names:
        return False
    return all(_child_fits(batch.field(name), table.field(name)) for name in names)


def _columns(names: Sequence[str]) -> str:
    return "[" + ", ".join(f"`{name}`" for name in names) + "]"


def partition_mismatch(path: str, given: Sequence[str], table: Sequence[str]) -> str:
    """Delta's text for a write whose partition columns differ from the table's."""
    return (
        f"Partition columns do not match the partition columns of the table at {path}.\n"
        f"Given: {_columns(given)}\nTable: {_columns(table)}"
    )


def fit_batch(
    batch: pa.Schema,
    table: pa.Schema | None,
    table_partitions: Sequence[str],
    partition_by: Sequence[str],
    *,
    path: str,
    complete: bool = False,
    merge_schema: bool = False,
    overwrite_schema: bool = False,
) -> Fit:
    """How a batch of schema ``batch`` (already as Delta stores it) goes into the table of
    schema ``table`` (``None`` when there is no table yet) partitioned by
    ``table_partitions``, when the query asks for ``partition_by`` (empty: the table's).

    Raises :class:`SchemaError` with Delta's texts and a per-field diff when it does not fit.
    """
    given = tuple(partition_by)
    _check_partition_types(batch, given, path)
    if table is None:
        return Fit(batch, given, "create")
    partitions = tuple(table_partitions)
    if complete and overwrite_schema:
        wanted = given or tuple(name for name in partitions if name in batch.names)
        same = batch.equals(table, check_metadata=False) and wanted == partitions
        if same:
            return Fit(table, partitions, "none")
        return Fit(batch, wanted, "replace", repartitions=wanted != partitions)
    if given and given != partitions:
        text = partition_mismatch(path, given, partitions)
        if complete:
            text += (
                "\nTo overwrite the schema or change partitioning, set "
                '.option("overwriteSchema", "true").'
            )
        else:
            text += (
                "\nLeave out partition_by to write with the table's partitioning (Table: "
                f"{_columns(partitions)}), or write another table."
            )
        raise SchemaError(text)
    problems = _differences(batch, table, merge_schema=merge_schema)
    if problems:
        raise SchemaError(
            _mismatch_text(path, problems, complete=complete, merge_schema=merge_schema)
        )
    new = [field for field in batch if field.name not in table.names]
    if not new:
        return Fit(table, partitions, "none")
    merged = pa.schema(list(table) + [field.with_nullable(True) for field in new])
    return Fit(merged, partitions, "evolve")


def _partition_type_ok(type_: pa.DataType) -> bool:
    return (
        pa.types.is_string(type_)
        or pa.types.is_integer(type_)
        or pa.types.is_floating(type_)
        or pa.types.is_boolean(type_)
        or pa.types.is_decimal(type_)
        or pa.types.is_date(type_)
        or pa.types.is_timestamp(type_)
        or pa.types.is_binary(type_)
    )


def _check_partition_types(batch: pa.Schema, partition_by: Sequence[str], path: str) -> None:
    for name in partition_by:
        if name in batch.names and not _partition_type_ok(batch.field(name).type):
            raise SchemaError(
                f"The Delta table at {path} cannot be partitioned by column '{name}' of type "
                f"{batch.field(name).type}: partition columns must be strings, numbers, "
                "booleans, dates, timestamps or binaries"
            )


class _Problem(NamedTuple):
    """One difference between the batch and the table: ``kind`` is ``extra``, ``type``,
    ``nullable`` or ``missing``; ``batch_type``/``table_type`` are set for ``type``."""

    kind: str
    text: str
    name: str = ""
    batch_type: pa.DataType | None = None
    table_type: pa.DataType | None = None


def _differences(batch: pa.Schema, table: pa.Schema, *, merge_schema: bool) -> list[_Problem]:
    problems: list[_Problem] = []
    for field in batch:
        if field.name not in table.names:
            if not merge_schema:
                text = f"extra column '{field.name}' ({field.type}): not in the table"
                problems.append(_Problem("extra", text))
            continue
        target = table.field(field.name)
        if not same_type(field.type, target.type):
            text = (
                f"column '{field.name}': type {_type_text(field.type)} in the batch, "
                f"{_type_text(target.type)} in the table"
            )
            problems.append(_Problem("type", text, field.name, field.type, target.type))
        elif field.nullable and not target.nullable:
            text = f"column '{field.name}': nullable in the batch, NOT NULL in the table"
            problems.append(_Problem("nullable", text))
    for target in table:
        if target.name not in batch.names and not target.nullable:
            text = (
                f"missing column '{target.name}' ({target.type}): NOT NULL in the table, "
                "so every row needs a value"
            )
            problems.append(_Problem("missing", text))
    return problems


_SPARK_TYPES: dict[pa.DataType, str] = {
    pa.bool_(): "BooleanType",
    pa.int8(): "ByteType",
    pa.int16(): "ShortType",
    pa.int32(): "IntegerType",
    pa.int64(): "LongType",
    pa.float32(): "FloatType",
    pa.float64(): "DoubleType",
    pa.string(): "StringType",
    pa.binary(): "BinaryType",
    pa.date32(): "DateType",
}


def spark_type_name(type_: pa.DataType) -> str:
    """The name Spark and Delta give the Delta type of ``type_`` (``LongType`` for int64)."""
    type_ = _normal(type_)
    if type_ in _SPARK_TYPES:
        return _SPARK_TYPES[type_]
    if pa.types.is_timestamp(type_):
        return "TimestampType" if type_.tz is not None else "TimestampNTZType"
    if pa.types.is_decimal(type_):
        return f"DecimalType({type_.precision},{type_.scale})"
    if pa.types.is_struct(type_):
        return "StructType"
    if pa.types.is_list(type_):
        return "ArrayType"
    if pa.types.is_map(type_):
        return "MapType"
    return str(type_)


def _type_text(type_: pa.DataType) -> str:
    """Arrow's name of ``type_`` and, when it differs, Spark's and Delta's."""
    spark = spark_type_name(type_)
    return f"{type_} ({spark})" if spark != str(type_) else str(type_)


_OVERWRITE = 'or .option("overwriteSchema", "true") to replace the table\'s schema'


def _mismatch_text(
    path: str, problems: list[_Problem], *, complete: bool, merge_schema: bool = False
) -> str:
    """Delta's opening words, the differences and what may fix them: ``mergeSchema`` only for
    new columns (it cannot change a type), a cast for a changed type, ``overwriteSchema`` in
    complete mode."""
    listed = "\n".join(f"  - {problem.text}" for problem in problems)
    extra = any(problem.kind == "extra" for problem in problems)
    types = [problem for problem in problems if problem.kind == "type"]
    advice: list[str] = []
    if extra:
        fix = (
            'To enable schema migration, set .option("mergeSchema", "true") to add the '
            "batch's new columns"
        )
        advice.append(fix + (", " + _OVERWRITE if complete else "") + ".")
    if types:
        if merge_schema:
            merges = " ".join(
                f"Failed to merge fields '{problem.name}' and '{problem.name}'. Failed to merge "
                "incompatible data types "
                f"{spark_type_name(problem.table_type)} and {spark_type_name(problem.batch_type)}."
                for problem in types
                if problem.table_type is not None and problem.batch_type is not None
            )
            advice.append(
                f"mergeSchema adds new columns but cannot change a column's type: {merges}"
            )
        names = ", ".join(f"'{problem.name}'" for problem in types)
        fix = f"Cast {names} to the table's type in the query"
        if complete and not extra:
            fix += ", " + _OVERWRITE
        elif not complete:
            fix += (
                ", or replace the table's schema in complete output mode with .option("
                '"overwriteSchema", "true")'
            )
        advice.append(fix + ".")
    if not advice and complete:
        advice.append('To replace the table\'s schema, set .option("overwriteSchema", "true").')
    return (
        f"A schema mismatch detected when writing to the Delta table at {path}:\n{listed}\n"
        + " ".join(["Nothing was written.", *advice])
    )
