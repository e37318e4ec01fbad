"""``StreamFrame``: a source plus stateless transforms, written with :attr:`write_stream`.

Transforms are recorded, not run: each micro-batch flows through them record batch by record
batch once the query starts, so a large batch never has to sit in memory whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from . import _transforms as t
from ._transforms import Pipeline

if TYPE_CHECKING:
    from ._reader import SourceSpec
    from ._session import Session
    from ._writer import DataStreamWriter

__all__ = ["StreamFrame"]


class StreamFrame:
    """A streaming table: where its rows come from and how each batch is transformed.

    Every method returns a new frame; the original is unchanged.
    """

    is_streaming = True

    def __init__(self, session: Session, source_spec: SourceSpec, pipeline: Pipeline | None = None):
        self.session = session
        self.source_spec = source_spec
        self.pipeline = pipeline if pipeline is not None else Pipeline()

    def _then(self, step: Any) -> StreamFrame:
        frame = StreamFrame(self.session, self.source_spec, self.pipeline.then(step))
        return frame

    # -- schema ---------------------------------------------------------------------------
    @property
    def source_schema(self) -> pa.Schema:
        """The schema of the rows the source produces."""
        return self.source_spec.schema

    @property
    def schema(self) -> pa.Schema:
        """The schema of the source's rows (before transforms; see :meth:`output_schema`)."""
        return self.source_schema

    def output_schema(self) -> pa.Schema:
        """The schema of the rows after every transform."""
        return self.pipeline.output_schema(self.source_schema)

    # -- transforms -----------------------------------------------------------------------
    def select(self, *columns: str | pc.Expression, **named: pc.Expression) -> StreamFrame:
        """Keep, reorder or compute columns: ``select("a", total=mb.col("x") + mb.col("y"))``."""
        return self._then(t.Select.of(*columns, **named))

    def filter(self, predicate: pc.Expression) -> StreamFrame:
        """Keep the rows where ``predicate`` is true: ``filter(mb.col("value") >= 10)``."""
        return self._then(t.Filter(predicate))

    where = filter

    def with_column(self, name: str, expression: pc.Expression | Any) -> StreamFrame:
        """Add or replace the column ``name`` with the value of ``expression``."""
        return self._then(t.WithColumn(name, expression))

    def drop(self, *columns: str) -> StreamFrame:
        """Remove columns (names that do not exist are ignored, as in Spark)."""
        return self._then(t.Drop(tuple(columns)))

    def with_column_renamed(self, existing: str, new: str) -> StreamFrame:
        return self._then(t.WithColumnRenamed(existing, new))

    def cast(self, types: Mapping[str, pa.DataType | str] | pa.Schema) -> StreamFrame:
        """Cast columns: ``cast({"value": "STRING"})`` or a schema of the target types."""
        return self._then(t.Cast.of(types))

    def parse_json(
        self,
        column: str,
        schema: pa.Schema | str,
        *,
        mode: str = "PERMISSIVE",
        corrupt_column: str | None = None,
        keep_original: bool = False,
    ) -> StreamFrame:
        """Decode ``column`` (JSON text or bytes, one document per row) into typed columns.

        Like Spark's ``from_json(col("value").cast("string"), schema)`` expanded into columns.
        ``mode``: ``PERMISSIVE`` (bad values become null; the raw text goes to
        ``corrupt_column`` when given), ``DROPMALFORMED`` or ``FAILFAST``.
        """
        return self._then(
            t.ParseJson(
                column,
                schema,
                mode=mode,
                corrupt_column=corrupt_column,
                keep_original=keep_original,
            )
        )

    def map_batches(
        self, function: Callable[[pa.RecordBatch], pa.RecordBatch | pa.Table]
    ) -> StreamFrame:
        """Apply any Arrow-to-Arrow function to each record batch."""
        return self._then(t.MapBatches(function))

    # -- output ---------------------------------------------------------------------------
    @property
    def write_stream(self) -> DataStreamWriter:
        """A builder for the sink: ``.format(...).option(...).start()``."""
        from ._writer import DataStreamWriter

        return DataStreamWriter(self)

    def explain(self) -> None:
        """Print the source and the transforms."""
        print(f"Source: {self.source_spec.format_name}")
        for line in self.pipeline.explain_lines():
            print(f"  {line}")

    def __repr__(self) -> str:
        return f"StreamFrame[{self.source_spec.format_name}, {len(self.pipeline)} transforms]"
