"""The ``jdbc`` source: batch reads as Spark's JDBC source (a table or a query, optionally
split into ranges of a partition column), and streams following a strictly increasing column.

SQLAlchemy and the drivers are imported when a query starts, never at registration.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

import microbatch as mb

from ._source_options import (
    DEFAULT_FETCHSIZE,
    SOURCE_OPTIONS,
    ReadPlan,
    apply_custom_schema,
    read_plan,
)

if TYPE_CHECKING:
    from ._connection import Database
    from ._incremental import IncrementalColumn

__all__ = ["JdbcSource"]

_log = logging.getLogger(__name__)
_SUBQUERY_IDS = itertools.count()


class JdbcSource(mb.Source):
    """SQL tables and queries through SQLAlchemy: ``session.read.format("jdbc")`` as in
    Spark, and ``read_stream`` with ``incrementalColumn``."""

    format_name = "jdbc"
    description = "SQL tables and queries through SQLAlchemy (ADBC for PostgreSQL)."
    options = SOURCE_OPTIONS
    capabilities: ClassVar[mb.SourceCapabilities] = mb.SourceCapabilities(available_now=True)

    def __init__(self, options: mb.Options, **kwargs: Any) -> None:
        super().__init__(options, **kwargs)
        self.plan: ReadPlan = read_plan(options, subquery_id=next(_SUBQUERY_IDS))
        if self.streaming and not options.get("incrementalColumn"):
            raise mb.OptionError(
                "a streaming read of the jdbc source needs option 'incrementalColumn' (a "
                "strictly increasing numeric or timestamp column); use session.read for a "
                "one-off read"
            )
        self._schema: pa.Schema | None = None

    def describe(self) -> str:
        what = self.opts.get("dbtable") or "query"
        return f"JdbcSource[{what}]"

    def _database(self) -> Database:
        from ._connection import database_from_options

        return database_from_options(self.opts)

    def _from_sql(self, database: Database) -> str:
        from ._reading import quote_table

        if self.plan.table is not None:
            return quote_table(database, *self.plan.table)
        assert self.plan.from_text is not None
        return self.plan.from_text

    def schema(self) -> pa.Schema:
        if self._schema is None:
            from ._reading import probe_schema

            database = self._database()
            try:
                found = probe_schema(database, self._from_sql(database), self.plan.table)
            except mb.MicrobatchError:
                raise
            except Exception as error:
                from ._reading import _failure

                raise _failure(database, error, "could not read the schema of") from None
            custom = self.opts.get("customSchema")
            self._schema = apply_custom_schema(found, custom) if custom else found
        return self._schema

    def stream_reader(self, context: mb.ReadContext) -> mb.StreamReader:
        database = self._database()
        from_sql = self._from_sql(database)
        fetchsize = int(self.opts.get("fetchsize") or 0) or DEFAULT_FETCHSIZE
        if context.streaming:
            from ._incremental import incremental_column
            from ._reading import quote_identifier, select_list

            column = incremental_column(
                context.schema,
                str(self.opts.incrementalColumn),
                lambda name: quote_identifier(database, name),
                delay=self.opts.get("incrementalDelay"),
            )
            columns = select_list(database, context.schema)
            return IncrementalReader(
                database, context.schema, from_sql, fetchsize, column, self.opts, columns
            )
        splits = self._splits(database, from_sql, context.schema)
        return BatchReader(database, context.schema, from_sql, fetchsize, splits)

    def _splits(self, database: Database, from_sql: str, schema: pa.Schema) -> list[str]:
        from ._partitions import column_partition, to_bound
        from ._reading import quote_identifier, select_list

        base = f"SELECT {select_list(database, schema)} FROM {from_sql}"
        if not self.opts.get("partitionColumn"):
            return [base]
        name = str(self.opts.partitionColumn)
        field = _partition_field(schema, name)
        kind = _bound_kind(field)
        clauses = column_partition(
            quote_identifier(database, field.name),
            kind,
            to_bound(self.opts.lowerBound, kind, "lowerBound"),
            to_bound(self.opts.upperBound, kind, "upperBound"),
            int(self.opts.numPartitions),
        )
        return [base if clause is None else f"{base} WHERE {clause}" for clause in clauses]


def _partition_field(schema: pa.Schema, name: str) -> pa.Field:
    for field in schema:
        if field.name == name or field.name.lower() == name.lower():
            return field
    for field in schema:  # Spark also accepts the quoted spelling
        if f'"{field.name}"' == name or f"`{field.name}`" == name:
            return field
    shown = "struct<" + ",".join(f"{f.name}:{f.type}" for f in schema) + ">"
    raise mb.OptionError(
        f"User-defined partition column {name} not found in the JDBC relation: {shown}"
    )


def _bound_kind(field: pa.Field) -> Any:
    kind = field.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return "numeric"
    if pa.types.is_date(kind):
        return "date"
    if pa.types.is_timestamp(kind):
        return "timestamptz" if kind.tz else "timestamp"
    raise mb.OptionError(
        f"Partition column type should be numeric, date, or timestamp, but {kind} found."
    )


class _Reader(mb.StreamReader):
    def __init__(
        self, database: Database, schema: pa.Schema, from_sql: str, fetchsize: int
    ) -> None:
        self.database = database
        self.schema = schema
        self.from_sql = from_sql
        self.fetchsize = fetchsize

    def split_reader(self) -> mb.SplitReader:
        from ._reading import JdbcSplitReader

        return JdbcSplitReader(self.database, self.schema, self.fetchsize)


class BatchReader(_Reader):
    """A one-off read: every split of the table or query, once."""

    def __init__(
        self, database: Database, schema: pa.Schema, from_sql: str, fetchsize: int, sqls: list[str]
    ) -> None:
        super().__init__(database, schema, from_sql, fetchsize)
        self.sqls = sqls

    def initial_offset(self) -> mb.Offset:
        return {"read": False}

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        return {"read": True}

    def partitions(self, start: mb.Offset, end: mb.Offset) -> Sequence[mb.Split]:
        from ._reading import QuerySplit

        if start == end:
            return []
        return [QuerySplit(sql, index) for index, sql in enumerate(self.sqls)]


class IncrementalReader(_Reader):
    """A stream of the rows whose ``incrementalColumn`` value is above the last one read."""

    def __init__(
        self,
        database: Database,
        schema: pa.Schema,
        from_sql: str,
        fetchsize: int,
        column: IncrementalColumn,
        opts: mb.Options,
        columns: str = "*",
    ) -> None:
        super().__init__(database, schema, from_sql, fetchsize)
        self.column = column
        self.columns = columns
        self.max_rows: int | None = opts.get("maxRowsPerTrigger")
        self.cutoff = column.cutoff(database.dialect, opts.get("incrementalDelay"))
        starting = opts.get("startingValue")
        try:
            self.starting = None if starting in (None, "") else column.to_json(starting)
        except (ValueError, ArithmeticError):
            raise mb.OptionError(
                f"invalid value for option 'startingValue': {starting!r} is not a value of "
                f"column {column.name!r} ({column.kind})"
            ) from None
        self.pinned: Any = None
        self.latest: Any = None
        self.null_rows: int | None = None
        self._engine: Any = None

    def _scalar(self, sql: str) -> Any:
        from ._reading import _failure, run_sql

        if self._engine is None:
            self._engine = self.database.engine(pool_size=1, max_overflow=0, pool_pre_ping=True)
        try:
            with self.database.connect(self._engine) as connection:
                row = run_sql(connection, sql).fetchone()
                return None if row is None else row[0]
        except mb.MicrobatchError:
            raise
        except Exception as error:
            raise _failure(self.database, error, "could not read from") from None

    def default_read_limit(self) -> mb.ReadLimit:
        if self.max_rows:
            return mb.ReadMaxRows(self.max_rows)
        return mb.ReadAllAvailable()

    def initial_offset(self) -> mb.Offset:
        from ._incremental import OFFSET_KEY

        return {OFFSET_KEY: self.starting}

    def prepare_available_now(self) -> None:
        value = self._scalar(self.column.end_query(self.from_sql, None, None, None, self.cutoff))
        self.pinned = _NOTHING if value is None else self.column.to_json(value)

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        from ._incremental import OFFSET_KEY

        last = start.get(OFFSET_KEY)
        if self.pinned is _NOTHING:
            return start
        pinned, known = self.pinned, last is not None
        if pinned is not None and known and self.column.parse(last) >= self.column.parse(pinned):
            return start
        rows = limit.max_rows if isinstance(limit, mb.ReadMaxRows) else None
        value = self._scalar(
            self.column.end_query(
                self.from_sql, last, self.pinned, rows, self.cutoff, self.database.dialect
            )
        )
        if value is None:
            return start
        end = self.column.to_json(value)
        if self.pinned is not None:
            self.latest = self.pinned
        elif rows is not None:
            latest = self._scalar(
                self.column.end_query(self.from_sql, None, None, None, self.cutoff)
            )
            self.latest = self.column.to_json(latest)
        else:
            self.latest = end
        return {OFFSET_KEY: end}

    def metrics(self) -> dict[str, Any]:
        """``rowsWithoutIncrementalValue``: rows whose column is NULL, which the stream never
        reads (counted once per run, and logged)."""
        if self.null_rows is None:
            self.null_rows = int(self._scalar(self.column.null_count_query(self.from_sql)) or 0)
            if self.null_rows:
                _log.warning(
                    "%d rows of %s have no %s value (NULL): the stream never reads them",
                    self.null_rows,
                    self.from_sql,
                    self.column.name,
                )
        return {"rowsWithoutIncrementalValue": self.null_rows}

    def report_latest_offset(self) -> mb.Offset | None:
        from ._incremental import OFFSET_KEY

        return None if self.latest is None else {OFFSET_KEY: self.latest}

    def partitions(self, start: mb.Offset, end: mb.Offset) -> Sequence[mb.Split]:
        from ._incremental import OFFSET_KEY
        from ._reading import QuerySplit

        last, upper = start.get(OFFSET_KEY), end.get(OFFSET_KEY)
        if upper is None or last == upper:
            return []
        return [QuerySplit(self.column.range_query(self.from_sql, last, upper, self.columns))]

    def stop(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()


_NOTHING = object()
"""The pinned end of an available-now run over an empty table: nothing to read."""
