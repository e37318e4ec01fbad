"""Stateless transforms, applied to one ``pyarrow.RecordBatch`` at a time.

Every transform is a frozen dataclass with ``apply(batch) -> RecordBatch`` and a one-line
``describe()``; :class:`Pipeline` chains them. Expressions are ``pyarrow.compute`` expressions:
``pc.field("v") >= 10``, ``pc.field("a") * 2``, ``pc.multiply(pc.field("a"), 2)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import partial
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc
import pyarrow.json as pajson

from microbatch.errors import SchemaError, TransformError
from microbatch.types import as_schema, parse_type, to_ddl, type_to_ddl

__all__ = [
    "Cast",
    "Drop",
    "Filter",
    "MapBatches",
    "ParseJson",
    "Pipeline",
    "Select",
    "Transform",
    "WithColumn",
    "WithColumnRenamed",
]

_MODES = ("PERMISSIVE", "DROPMALFORMED", "FAILFAST")
_JSON = json.JSONDecoder(parse_float=Decimal)
_PARTS = 16  # a JSON block that fails to read is split in this many parts to find bad rows
_SCREEN_ROWS = 512  # ... and parts this small are checked row by row with the stdlib


@runtime_checkable
class Transform(Protocol):
    """Anything with ``apply(batch) -> RecordBatch`` and a one-line ``describe()``."""

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch: ...

    def describe(self) -> str: ...


@dataclass(frozen=True, eq=False)
class Select:
    """Keep, reorder and compute columns. Build it with :meth:`of`.

    ``columns`` holds ``(output name, expression)`` pairs; ``None`` means "the column itself".
    """

    columns: tuple[tuple[str, pc.Expression | None], ...]

    def __post_init__(self) -> None:
        names = [name for name, _ in self.columns]
        if not names:
            raise TransformError("Select needs at least one column, e.g. Select.of('id')")
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise TransformError(
                f"Select would produce the column(s) {', '.join(twice)} twice; "
                "give computed columns distinct names, e.g. Select.of(x2=pc.field('x') * 2)"
            )

    @classmethod
    def of(cls, *columns: str | pc.Expression | tuple[str, Any], **named: Any) -> Select:
        """``Select.of("id", ("v2", pc.field("v") * 2), total=pc.field("a") + pc.field("b"))``.

        A bare expression is named after its text, as Spark does.
        """
        pairs = [_select_item(item) for item in columns]
        pairs += [(name, _as_expression(value, name)) for name, value in named.items()]
        return cls(tuple(pairs))

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        for name, expression in self.columns:
            if expression is None:
                _column_index(batch, name, self.describe())
        computed = iter(
            _evaluate(batch, [e for _, e in self.columns if e is not None], self.describe())
        )
        fields, arrays = [], []
        for name, expression in self.columns:
            if expression is None:
                index = batch.schema.get_field_index(name)
                fields.append(batch.schema.field(index))
                arrays.append(batch.column(index))
            else:
                arrays.append(next(computed))
                fields.append(pa.field(name, arrays[-1].type))
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))

    def describe(self) -> str:
        items = [name if e is None else f"{e} AS {name}" for name, e in self.columns]
        return f"Select {', '.join(items)}"


@dataclass(frozen=True, eq=False)
class Filter:
    """Keep the rows where ``predicate`` is true (null counts as false); row order is kept."""

    predicate: pc.Expression

    def __post_init__(self) -> None:
        if not isinstance(self.predicate, pc.Expression):
            raise TransformError(
                f"Filter needs a pyarrow.compute.Expression, got {type(self.predicate).__name__}"
                f" {self.predicate!r}; write e.g. Filter(pc.field('value') >= 10)"
            )

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        (mask,) = _evaluate(batch, [self.predicate], self.describe())
        if not pa.types.is_boolean(mask.type):
            raise TransformError(
                f"{self.describe()}: the predicate gives {mask.type} values, not booleans; "
                "compare them, e.g. pc.field('x') > 0"
            )
        return batch.filter(mask)

    def describe(self) -> str:
        return f"Filter {self.predicate}"


@dataclass(frozen=True, eq=False)
class WithColumn:
    """Set column ``name`` (replaced in place if it exists, else appended).

    ``expression`` may be a plain value such as ``0`` or ``"eu"``; it is wrapped in ``pc.scalar``.
    """

    name: str
    expression: pc.Expression

    def __post_init__(self) -> None:
        object.__setattr__(self, "expression", _as_expression(self.expression, self.name))

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        (values,) = _evaluate(batch, [self.expression], self.describe())
        column = pa.field(self.name, values.type)
        index = batch.schema.get_field_index(self.name)
        if index >= 0:
            return batch.set_column(index, column, values)
        return batch.append_column(column, values)

    def describe(self) -> str:
        return f"WithColumn {self.name} = {self.expression}"


@dataclass(frozen=True)
class Drop:
    """Remove columns; names that do not exist are ignored (as in Spark)."""

    columns: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.columns, str):
            object.__setattr__(self, "columns", (self.columns,))

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        present = [name for name in self.columns if name in batch.schema.names]
        return batch.drop_columns(present) if present else batch

    def describe(self) -> str:
        return f"Drop {', '.join(self.columns)}"


@dataclass(frozen=True)
class WithColumnRenamed:
    """Rename column ``existing`` to ``new``; nothing happens when ``existing`` is absent."""

    existing: str
    new: str

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = batch.schema.names
        if self.existing not in names or self.existing == self.new:
            return batch
        if self.new in names:
            raise TransformError(
                f"{self.describe()}: a column '{self.new}' already exists; drop it first "
                "or choose another name"
            )
        return batch.rename_columns([self.new if n == self.existing else n for n in names])

    def describe(self) -> str:
        return f"WithColumnRenamed {self.existing} -> {self.new}"


@dataclass(frozen=True)
class Cast:
    """Cast named columns to new types. Build it with :meth:`of`."""

    columns: tuple[tuple[str, pa.DataType], ...]

    @classmethod
    def of(cls, types: Mapping[str, pa.DataType | str] | pa.Schema | str) -> Cast:
        """From ``{"id": "BIGINT", "v": pa.float32()}``, a schema or a DDL string."""
        if isinstance(types, pa.Schema | str):
            return cls(tuple((f.name, f.type) for f in as_schema(types)))
        pairs = []
        for name, target in types.items():
            if isinstance(target, str):
                target = parse_type(target)
            if not isinstance(target, pa.DataType):
                raise TransformError(
                    f"Cast: the type for column '{name}' is {target!r}; give a pyarrow "
                    "DataType or a DDL type string such as 'BIGINT'"
                )
            pairs.append((name, target))
        return cls(tuple(pairs))

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        for name, target in self.columns:
            index = _column_index(batch, name, self.describe())
            source = batch.schema.field(index)
            try:
                values = batch.column(index).cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise TransformError(
                    f"Cannot cast column '{name}' from {_type_text(source.type)} to "
                    f"{_type_text(target)}: {exc}. Clean or filter such values first, or cast "
                    "to a type that can hold them"
                ) from exc
            batch = batch.set_column(index, source.with_type(target), values)
        return batch

    def describe(self) -> str:
        return "Cast " + ", ".join(f"{name}: {_type_text(t)}" for name, t in self.columns)


@dataclass(frozen=True)
class MapBatches:
    """Apply ``function`` to each record batch; a returned Table becomes one record batch."""

    function: Callable[[pa.RecordBatch], pa.RecordBatch | pa.Table]

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        result = self.function(batch)
        if isinstance(result, pa.RecordBatch):
            return result
        if isinstance(result, pa.Table):
            batches = result.combine_chunks().to_batches()
            if not batches:
                return pa.RecordBatch.from_pylist([], schema=result.schema)
            return batches[0] if len(batches) == 1 else pa.concat_batches(batches)
        raise TransformError(
            f"{self.describe()}: the function returned {type(result).__name__}; "
            "it must return a pyarrow.RecordBatch or pyarrow.Table"
        )

    def describe(self) -> str:
        return f"MapBatches {getattr(self.function, '__qualname__', repr(self.function))}"


@dataclass(frozen=True)
class ParseJson:
    """Decode ``column`` (string or binary, one JSON object per row) into the columns of ``schema``.

    Like Spark's ``from_json(col(column).cast("string"), schema)`` expanded into top-level
    columns placed where ``column`` was (``column`` itself is kept only with ``keep_original``).
    Null, empty and blank rows give null columns. A JSON value must have the JSON type of its
    column (a number for INT, a string for STRING, an ISO-8601 string for TIMESTAMP/DATE);
    nested fields not in the schema are ignored. For a malformed row (invalid JSON, not an
    object, invalid UTF-8, or a value that does not fit its type), ``mode`` decides:
    ``PERMISSIVE`` nulls the bad values and puts the raw text in ``corrupt_column`` (if given),
    ``DROPMALFORMED`` removes the row, ``FAILFAST`` raises ``TransformError``.
    ``MAP`` columns are decoded with the stdlib ``json`` module, so they are slower.
    """

    column: str
    schema: pa.Schema
    mode: str = "PERMISSIVE"
    corrupt_column: str | None = None
    keep_original: bool = False
    _decoder: _JsonDecoder = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        schema = as_schema(self.schema)
        mode = str(self.mode).upper()
        if mode not in _MODES:
            raise TransformError(f"ParseJson: unknown mode {self.mode!r}; use one of {_MODES}")
        if self.corrupt_column is not None and mode != "PERMISSIVE":
            raise TransformError(
                f"ParseJson: corrupt_column only applies in PERMISSIVE mode, not {mode}; "
                "remove it or use mode='PERMISSIVE'"
            )
        if self.corrupt_column in schema.names:
            raise TransformError(
                f"ParseJson: corrupt_column '{self.corrupt_column}' is also a schema field; "
                "choose another name, e.g. '_corrupt_record'"
            )
        object.__setattr__(self, "schema", schema)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "_decoder", _JsonDecoder(schema))

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        index = _column_index(batch, self.column, self.describe())
        source = batch.column(index)
        lines, bad = _json_lines(source, self.column)
        if len(lines):
            columns, errors = self._decoder.decode(lines)
        else:
            columns, errors = {f.name: pa.array([], f.type) for f in self.schema}, {}
        for row, reason in errors.items():
            bad[row] = bad.get(row) or reason
        if bad and self.mode == "FAILFAST":
            row = min(bad)
            raise TransformError(
                f"ParseJson: malformed JSON in column '{self.column}' at row {row} of the batch: "
                f"{bad[row] or self._decoder.reason(_raw_text(source, row))} "
                f"(value: {_preview(source[row].as_py())}); fix the data, or use "
                "mode='PERMISSIVE' or 'DROPMALFORMED' to null or drop such rows"
            )
        if bad and self.mode == "PERMISSIVE":
            rows = sorted(bad)
            fixed, _ = self._decoder.python(lines.take(pa.array(rows)).to_pylist())
            for f, values in zip(self._decoder.fields, fixed, strict=True):
                columns[f.name] = _patch(columns[f.name], rows, values)
        parsed = [(f, columns[f.name]) for f in self._decoder.fields]
        if self.corrupt_column is not None:
            parsed.append((pa.field(self.corrupt_column, pa.string()), _corrupt(source, bad)))
        result = self._assemble(batch, index, parsed)
        if bad and self.mode == "DROPMALFORMED":
            return result.filter(pa.array([row not in bad for row in range(len(source))]))
        return result

    def _assemble(
        self, batch: pa.RecordBatch, index: int, parsed: list[tuple[pa.Field, pa.Array]]
    ) -> pa.RecordBatch:
        items = list(zip(batch.schema, batch.columns, strict=True))
        items[index : index + 1] = items[index : index + 1] * self.keep_original + parsed
        names = [f.name for f, _ in items]
        clash = sorted({name for name in names if names.count(name) > 1})
        if clash:
            raise TransformError(
                f"{self.describe()}: the output would have the column(s) {', '.join(clash)} "
                "twice; drop or rename the existing column(s) first"
            )
        return pa.RecordBatch.from_arrays(
            [a for _, a in items], schema=pa.schema([f for f, _ in items], batch.schema.metadata)
        )

    def describe(self) -> str:
        try:
            target = to_ddl(self.schema)
        except SchemaError:
            target = ", ".join(f"{f.name} {f.type}" for f in self.schema)
        return f"ParseJson {self.column} -> {target} ({self.mode})"


@dataclass(frozen=True)
class Pipeline:
    """Transforms applied in order; ``Pipeline().then(Filter(...)).then(Select.of("id"))``."""

    steps: tuple[Transform, ...] = ()

    def then(self, step: Transform) -> Pipeline:
        """A new pipeline with ``step`` added at the end."""
        if not isinstance(step, Transform):
            raise TransformError(
                f"Pipeline steps need apply(batch) and describe(); got {type(step).__name__}"
            )
        return Pipeline((*self.steps, step))

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        for step in self.steps:
            batch = step.apply(batch)
        return batch

    def output_schema(self, input_schema: pa.Schema) -> pa.Schema:
        """The schema of the output for batches of ``input_schema`` (runs on an empty batch)."""
        return self.apply(pa.RecordBatch.from_pylist([], schema=input_schema)).schema

    def explain_lines(self) -> list[str]:
        return [step.describe() for step in self.steps]

    def __iter__(self) -> Iterator[Transform]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)


# -- expressions -----------------------------------------------------------------------------
# Expressions run in a single-threaded Acero plan (table_source -> project); Filter projects its
# boolean mask and then calls RecordBatch.filter(mask), which keeps row order by construction.
# Per-batch cost measured on pyarrow 26.0.1, 2 shared cores, best of 3 runs of 3 (spread across
# runs in brackets), 1-row / 100k-row batch of int64, float64 and string columns:
#   filter  RecordBatch.filter(expression) (threaded Acero)  183 [-388] / 1435 [-2687] us
#           Acero filter node, use_threads=False              93 [-218] / 1438 [-1605] us
#           Acero project of the mask + RecordBatch.filter    97 [-165] /  997 [-1233] us  <- used
#           dataset: Scanner.from_batches / InMemoryDataset  316 / 241 us, 1400 / 1204 us
#   project Acero project, use_threads=False (3 columns)     136 [-233] /  596 [-890] us   <- used
#           threaded Acero 195 / 724 us; Scanner.from_batches 343 / 573 us; InMemoryDataset
#           275 / 539 us (cheaper for big batches by <10%, twice the cost for small ones)


def _evaluate(batch: pa.RecordBatch, expressions: list[pc.Expression], step: str) -> list[pa.Array]:
    if not expressions:
        return []
    source = acero.TableSourceNodeOptions(pa.Table.from_batches([batch]))
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("table_source", source),
            acero.Declaration("project", acero.ProjectNodeOptions(expressions)),
        ]
    )
    try:
        table = plan.to_table(use_threads=False)
    except pa.ArrowException as exc:
        raise TransformError(
            f"{step} failed on a batch with columns {_columns(batch)}: {exc}. "
            "Check the column names and types the expression uses"
        ) from exc
    return [column.combine_chunks() for column in table.columns]


def _as_expression(value: Any, name: str) -> pc.Expression:
    if isinstance(value, pc.Expression):
        return value
    try:
        return pc.scalar(value)
    except (TypeError, ValueError, pa.ArrowException) as exc:
        raise TransformError(
            f"Column '{name}': {value!r} is neither a pyarrow.compute.Expression nor a value "
            f"Arrow can hold ({exc}); use pc.field(...), pc.scalar(...) or a plain value"
        ) from exc


def _select_item(item: Any) -> tuple[str, pc.Expression | None]:
    if isinstance(item, str):
        return item, None
    if isinstance(item, pc.Expression):
        return str(item), item
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return item[0], _as_expression(item[1], item[0])
    raise TransformError(
        f"Select: cannot use {item!r}; give column names, expressions, (name, expression) "
        "pairs or name=expression keywords"
    )


def _column_index(batch: pa.RecordBatch, name: str, step: str) -> int:
    index = batch.schema.get_field_index(name)
    if index < 0:
        raise TransformError(
            f"{step}: column '{name}' not found among {_columns(batch)}; check the name "
            "(names are case-sensitive)"
        )
    return index


def _columns(batch: pa.RecordBatch) -> str:
    return "[" + ", ".join(batch.schema.names) + "]"


def _type_text(dtype: pa.DataType) -> str:
    try:
        return type_to_ddl(dtype)
    except SchemaError:
        return str(dtype)


# -- JSON ------------------------------------------------------------------------------------
class _JsonDecoder:
    """Decodes JSON object texts, one per row, into typed arrays.

    The fast path is one ``pyarrow.json.read_json`` call for all rows (the caller guarantees
    every row starts with "{" and ends with "}", so rows joined with newlines cannot merge, and
    a row holding two documents shows up in the row count). When it fails, parts of the rows
    are read again to find the failing ones (parts of up to ``_SCREEN_ROWS`` rows are checked
    with the stdlib instead); those rows are blanked and the rest is read once more.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self.fields = [f.with_nullable(True) for f in schema]
        self.converters = {f.name: _converter(f.type) for f in self.fields}
        self.arrow = pa.schema([f for f in self.fields if _arrow_reads(f)])
        read = pa.schema([f.with_type(_read_type(f.type)) for f in self.arrow])
        self.options = pajson.ParseOptions(
            explicit_schema=read, unexpected_field_behavior="ignore", newlines_in_values=True
        )

    def decode(self, lines: pa.Array) -> tuple[dict[str, pa.Array], dict[int, str | None]]:
        """Arrays by field name, aligned with ``lines``, and the bad rows (reason if known)."""
        bad: dict[int, str | None] = {}
        table = self._read(lines)[0] if len(self.arrow) else None
        if table is None and len(self.arrow):
            bad = self._isolate(lines, range(len(lines)), screen=True)
            table = self._read(pc.if_else(_mask(len(lines), bad), "{}", lines))[0]
        columns = {} if table is None else {n: table[n].combine_chunks() for n in self.arrow.names}
        rest = [f for f in self.fields if f.name not in columns]
        if rest:
            arrays, errors = self.python(lines.to_pylist(), rest)
            columns.update(zip([f.name for f in rest], arrays, strict=True))
            bad = {**errors, **{row: reason or errors.get(row) for row, reason in bad.items()}}
        return columns, bad

    def python(
        self, lines: list[str], fields: list[pa.Field] | None = None
    ) -> tuple[list[pa.Array], dict[int, str]]:
        """Decode ``lines`` with the stdlib: one array per field, and the errors by row."""
        fields = self.fields if fields is None else fields
        values: list[list[Any]] = [[] for _ in fields]
        errors: dict[int, str] = {}
        for row, line in enumerate(lines):
            document, error = _load_object(line)
            if error:
                errors[row] = error
            for out, f in zip(values, fields, strict=True):
                try:
                    out.append(self.converters[f.name](document.get(f.name)))
                except _Unreadable as exc:
                    errors.setdefault(row, f"column '{f.name}': {exc}")
                    out.append(None)
        return [_array(out, f, errors) for out, f in zip(values, fields, strict=True)], errors

    def reason(self, line: str) -> str:
        """Why ``line`` cannot be decoded."""
        return self.python([line])[1].get(0) or self._read(pa.array([line]))[1] or "unknown error"

    def _isolate(self, lines: pa.Array, rows: Sequence[int], screen: bool) -> dict[int, str | None]:
        """The rows among ``rows`` (which fail to read together) that Arrow cannot read."""
        if len(rows) == 1:
            return {rows[0]: None}
        bad: dict[int, str | None] = {}
        if screen and len(rows) <= _SCREEN_ROWS:
            _, errors = self.python(_take(lines, rows).to_pylist())
            bad = {rows[i]: reason for i, reason in errors.items()}
            rest = [row for row in rows if row not in bad]
            if rest and self._read(_take(lines, rest))[0] is None:
                bad.update(self._isolate(lines, rest, screen=False))
            return bad
        size = -(-len(rows) // _PARTS)
        for start in range(0, len(rows), size):
            part = rows[start : start + size]
            if self._read(_take(lines, part))[0] is None:
                bad.update(self._isolate(lines, part, screen))
        return bad

    def _read(self, lines: pa.Array) -> tuple[pa.Table | None, str]:
        """The table for ``lines`` or ``(None, reason)``; never a partial result."""
        one_list = pa.ListArray.from_arrays(pa.array([0, len(lines)], pa.int32()), lines)
        data = pc.binary_join(one_list, "\n")[0].as_buffer()
        longest = pc.max(pc.binary_length(lines)).as_py() or 0
        block = max(1 << 20, longest + 2)  # threads only pay off with several blocks
        options = pajson.ReadOptions(use_threads=data.size > 2 * block, block_size=block)
        try:
            table = pajson.read_json(pa.BufferReader(data), options, self.options)
            if table.num_rows != len(lines):
                return None, f"found {table.num_rows} JSON documents in {len(lines)} rows"
            return table.select(self.arrow.names).cast(self.arrow), ""
        except pa.ArrowInvalid as exc:
            return None, str(exc)


def _json_lines(source: pa.Array, name: str) -> tuple[pa.Array, dict[int, str | None]]:
    """One JSON object text per row of ``source`` ("{}" for null, blank and malformed rows),
    and the rows known to be malformed."""
    kinds = (
        pa.types.is_binary,
        pa.types.is_large_binary,
        pa.types.is_string,
        pa.types.is_large_string,
    )
    if not any(is_kind(source.type) for is_kind in kinds):
        raise TransformError(
            f"ParseJson: column '{name}' has type {source.type}; it must be string or binary "
            f"(cast it first, e.g. Cast.of({{'{name}': 'STRING'}}))"
        )
    text, bad = _utf8(source)
    shaped = _shaped(text)
    if not pc.all(shaped).as_py():
        text = pc.utf8_trim_whitespace(text)
        shaped = _shaped(text)
        odd = pc.and_(pc.invert(shaped), pc.greater(pc.binary_length(text), 0))
        bad.update(dict.fromkeys(pc.indices_nonzero(pc.fill_null(odd, False)).to_pylist()))
    return pc.if_else(pc.fill_null(shaped, False), text, "{}"), bad


def _shaped(text: pa.Array) -> pa.Array:
    return pc.and_(pc.starts_with(text, "{"), pc.ends_with(text, "}"))


def _utf8(source: pa.Array) -> tuple[pa.Array, dict[int, str | None]]:
    try:
        return source.cast(pa.string()), {}
    except pa.ArrowInvalid:
        pass
    texts: list[str | None] = []
    bad: dict[int, str | None] = {}
    for row, raw in enumerate(source.to_pylist()):
        try:
            texts.append(None if raw is None else raw.decode())
        except UnicodeDecodeError as exc:
            bad[row] = f"invalid UTF-8 at byte {exc.start}"
            texts.append("{}")
    return pa.array(texts, pa.string()), bad


def _array(values: list[Any], column: pa.Field, errors: dict[int, str]) -> pa.Array:
    try:
        return pa.array(values, column.type)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        pass
    for row, value in enumerate(values):
        try:
            pa.scalar(value, column.type)
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            errors.setdefault(row, f"column '{column.name}': {exc}")
            values[row] = None
    return pa.array(values, column.type)


def _load_object(line: str) -> tuple[dict[str, Any], str | None]:
    try:
        document = _JSON.decode(line)
    except json.JSONDecodeError as exc:
        return {}, f"invalid JSON: {exc}"
    except RecursionError:
        return {}, "invalid JSON: nested too deeply"
    if not isinstance(document, dict):
        return {}, f"expected a JSON object, got {_preview(document)}"
    return document, None


class _Unreadable(ValueError):
    """A JSON value that cannot mean its column's type."""


def _converter(dtype: pa.DataType) -> Callable[[Any], Any]:
    """A function turning a ``json.loads`` value into a Python value for ``dtype``.

    It raises ``_Unreadable`` when the JSON type does not match (the rules of ``read_json``).
    """
    if isinstance(dtype, pa.StructType):
        items = [(f.name, _converter(f.type)) for f in dtype]
        return _checked((dict,), dtype, lambda v: {n: to(v.get(n)) for n, to in items})
    if isinstance(dtype, pa.MapType):
        if not pa.types.is_string(dtype.key_type):
            raise TransformError(
                f"ParseJson: {_type_text(dtype)} cannot hold a JSON object, whose keys are "
                "strings; use MAP<STRING, ...>"
            )
        to_item = _converter(dtype.item_type)
        return _checked((dict,), dtype, lambda v: [(k, to_item(x)) for k, x in v.items()])
    if isinstance(dtype, pa.ListType | pa.LargeListType):
        to_value = _converter(dtype.value_type)
        return _checked((list,), dtype, lambda v: [to_value(x) for x in v])
    if pa.types.is_floating(dtype):
        return _checked((int, float, Decimal), dtype, float)
    if pa.types.is_decimal(dtype):
        return _checked((int, Decimal, str), dtype, Decimal)
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return _checked((str,), dtype, str.encode)
    if pa.types.is_date(dtype):
        return _checked((str,), dtype, date.fromisoformat)
    if pa.types.is_timestamp(dtype):
        return _checked((str,), dtype, partial(_timestamp, utc=dtype.tz is not None))
    kinds: tuple[type, ...] = (object,)
    if pa.types.is_boolean(dtype):
        kinds = (bool,)
    elif pa.types.is_integer(dtype):
        kinds = (int,)
    elif pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        kinds = (str,)
    return _checked(kinds, dtype, lambda v: v)


def _checked(
    kinds: tuple[type, ...], dtype: pa.DataType, convert: Callable[[Any], Any]
) -> Callable[[Any], Any]:
    def run(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)):
            try:
                return convert(value)
            except _Unreadable:
                raise
            except (ValueError, ArithmeticError):
                pass
        raise _Unreadable(f"cannot read {_preview(value)} as {_type_text(dtype)}")

    return run


def _timestamp(text: str, utc: bool) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=UTC if utc else None)


def _read_type(dtype: pa.DataType) -> pa.DataType:
    """The type to ask ``read_json`` for: it reads DATE only from numbers, so read text."""
    if pa.types.is_date32(dtype):
        return pa.string()
    if isinstance(dtype, pa.ListType):
        return pa.list_(dtype.value_field.with_type(_read_type(dtype.value_type)))
    if isinstance(dtype, pa.StructType):
        return pa.struct([f.with_type(_read_type(f.type)) for f in dtype])
    return dtype


def _arrow_reads(column: pa.Field) -> bool:
    """Whether ``read_json`` supports the column's type (it does not support MAP, for one)."""
    options = pajson.ParseOptions(
        explicit_schema=pa.schema([column.with_type(_read_type(column.type))])
    )
    try:
        pajson.read_json(pa.BufferReader(b"{}"), parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _take(lines: pa.Array, rows: Sequence[int]) -> pa.Array:
    if isinstance(rows, range):
        return lines.slice(rows.start, len(rows))
    return lines.take(pa.array(rows, pa.int64()))


def _mask(length: int, rows: Mapping[int, object]) -> pa.Array:
    return pa.array([row in rows for row in range(length)], pa.bool_())


def _patch(column: pa.Array, rows: list[int], values: pa.Array) -> pa.Array:
    """``column`` with ``values`` at positions ``rows``."""
    indices = list(range(len(column)))
    for offset, row in enumerate(rows):
        indices[row] = len(column) + offset
    return pa.concat_arrays([column, values]).take(pa.array(indices, pa.int64()))


def _corrupt(source: pa.Array, bad: dict[int, str | None]) -> pa.Array:
    if not bad:
        return pa.nulls(len(source), pa.string())
    texts: list[str | None] = [None] * len(source)
    for row in bad:
        texts[row] = _raw_text(source, row)
    return pa.array(texts, pa.string())


def _raw_text(source: pa.Array, row: int) -> str:
    raw = source[row].as_py()
    return raw.decode(errors="replace") if isinstance(raw, bytes) else raw


def _preview(value: Any) -> str:
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    text = json.dumps(value, default=float, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
