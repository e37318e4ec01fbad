"""Stateless transforms, applied to one ``pyarrow.RecordBatch`` at a time.

Every transform is a frozen dataclass with ``apply(batch) -> RecordBatch`` and a one-line
``describe()``; :class:`Pipeline` chains them. Expressions are ``pyarrow.compute`` expressions:
``pc.field("v") >= 10``, ``pc.field("a") * 2``, ``pc.multiply(pc.field("a"), 2)``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc

from microbatch._json_decode import is_text, preview, type_text
from microbatch.errors import ConfigurationError, MalformedJsonError, SchemaError, TransformError
from microbatch.json_decoder import JsonDecoder
from microbatch.types import as_schema, parse_type, to_ddl

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

log = logging.getLogger("microbatch.transforms")


class _DropCount:
    """Rows a transform dropped since it was built (splits run on several threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0

    def add(self, rows: int) -> None:
        with self._lock:
            self.total += rows


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
                    f"Cannot cast column '{name}' from {type_text(source.type)} to "
                    f"{type_text(target)}: {exc}. Clean or filter such values first, or cast "
                    "to a type that can hold them"
                ) from exc
            batch = batch.set_column(index, source.with_type(target), values)
        return batch

    def describe(self) -> str:
        return "Cast " + ", ".join(f"{name}: {type_text(t)}" for name, t in self.columns)


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
    a TIMESTAMP_NTZ string must carry no UTC offset (it is not shifted, Spark's rule) and a
    FLOAT must be within its range (not made infinite); nested fields not in the schema are
    ignored. For a malformed row (invalid JSON, not an
    object, invalid UTF-8, or a value that does not fit its type), ``mode`` decides:
    ``PERMISSIVE`` nulls the bad values and puts the raw text in ``corrupt_column`` (if given),
    ``DROPMALFORMED`` removes the row, ``FAILFAST`` raises ``TransformError`` (whose
    ``__cause__`` is a ``MalformedJsonError`` holding the structured record).
    ``MAP`` columns are decoded with the stdlib ``json`` module, so they are slower.
    Decoding is :class:`microbatch.json_decoder.JsonDecoder`'s.
    """

    column: str
    schema: pa.Schema
    mode: str = "PERMISSIVE"
    corrupt_column: str | None = None
    keep_original: bool = False
    _decoder: JsonDecoder = field(init=False, repr=False, compare=False)
    _dropped: _DropCount = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_dropped", _DropCount())
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
        try:
            decoder = JsonDecoder(schema, mode=mode, corrupt_column=self.corrupt_column)
        except ConfigurationError as error:
            raise TransformError(f"ParseJson: {error}") from None
        object.__setattr__(self, "_decoder", decoder)

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        index = _column_index(batch, self.column, self.describe())
        source = batch.column(index)
        if not is_text(source.type):
            raise TransformError(
                f"ParseJson: column '{self.column}' has type {source.type}; it must be string "
                f"or binary (cast it first, e.g. Cast.of({{'{self.column}': 'STRING'}}))"
            )
        try:
            result = self._decoder.decode_values(source)
        except MalformedJsonError as error:
            row = error.record.row
            raise TransformError(
                f"ParseJson: malformed JSON in column '{self.column}' at row {row} of the batch: "
                f"{error.record.message} (value: {preview(source[row].as_py())}); fix the data, "
                "or use mode='PERMISSIVE' or 'DROPMALFORMED' to null or drop such rows"
            ) from error
        if result.dropped and result.malformed:
            batch = batch.filter(result.kept_mask())
        table = result.table
        parsed = [(f, _one_array(table.column(i))) for i, f in enumerate(table.schema)]
        output = self._assemble(batch, index, parsed)
        if result.dropped and result.malformed:
            self._dropped.add(len(result.malformed))
            first = result.malformed[0]
            log.warning(
                "%s dropped %d malformed row(s) of a batch of %d, the first at row %d: %s",
                self.describe(),
                len(result.malformed),
                len(source),
                first.row,
                first.message,
            )
        return output

    def metrics(self) -> dict[str, int]:
        """``numRowsDroppedByParseMode``: in DROPMALFORMED mode, the rows removed since the
        query started (nothing in the other modes, which drop no row)."""
        if self.mode != "DROPMALFORMED":
            return {}
        return {"numRowsDroppedByParseMode": self._dropped.total}

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

    def metrics(self) -> dict[str, str]:
        """The counters of the steps that keep some (``metrics()``), summed by name, as
        progress records show them (strings, like source metrics)."""
        totals: dict[str, int] = {}
        for step in self.steps:
            counters = getattr(step, "metrics", None)
            if callable(counters):
                for name, value in counters().items():
                    totals[name] = totals.get(name, 0) + int(value)
        return {name: str(value) for name, value in totals.items()}

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


def _one_array(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


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
