"""The ``jdbc`` sink's writers: parts hand their rows over as Arrow, and the commit writes
every part's rows and the batch's ledger row in one database transaction.

Why at commit and not in the parts: a part's rows may only become visible together with the
ledger row, in one transaction; database transactions cannot span the parts' connections
(processes), and per-part staging tables would write every row twice. The batch's Arrow data
is held until commit (the parts' ``TableMessage``\\ s): bound the batch size with the source's
limit (``maxRowsPerTrigger``, ``maxFilesPerTrigger``...).

One batch's transaction, in order: check the ledger (a replayed batch writes nothing and is
logged); complete output mode: empty the table (``truncate``) or drop and re-create it;
create the table when missing; check the batch fits it (a per-column diff before anything is
written); write the rows (PostgreSQL binary COPY, upsert, or executemany); mark the batch in
the ledger; commit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import microbatch as mb
from microbatch.ledger import BatchLedger
from microbatch.options import scrub

from ._connection import Database, is_retriable
from ._generic_write import insert_rows, python_columns
from ._tables import (
    check_fit,
    check_not_null,
    create_table,
    reflect_table,
    shown_name,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine, Table

__all__ = ["JdbcPartWriter", "JdbcStreamWriter", "SinkSettings"]

log = logging.getLogger("microbatch.jdbc")

_TRANSACTIONAL_DDL = frozenset({"postgresql", "sqlite", "mssql"})


@dataclass(frozen=True)
class SinkSettings:
    """What the options say about writing (see ``_sink_options``)."""

    dbtable: str
    upsert_keys: tuple[str, ...] = ()
    complete: bool = False
    create_if_missing: bool = True
    column_types: tuple[tuple[str, str], ...] = ()
    truncate: bool = False
    batchsize: int = 1000
    isolation_level: str | None = "READ COMMITTED"
    ledger_table: str = "microbatch_ledger"


class JdbcPartWriter(mb.PartWriter):
    """Hands one part's rows to the commit as a :class:`microbatch.TableMessage`."""

    def write(self, data: pa.RecordBatchReader, part: mb.PartContext) -> mb.TableMessage:
        return mb.TableMessage(data.read_all())


class JdbcStreamWriter(mb.StreamWriter):
    """Applies each batch in one transaction together with its ledger row."""

    def __init__(
        self,
        database: Database,
        settings: SinkSettings,
        context: mb.WriteContext,
        secrets: Sequence[str] = (),
    ) -> None:
        self.database = database
        self.settings = settings
        self.context = context
        from sqlalchemy.engine import make_url

        in_url = make_url(database.url).password
        self._secrets = [str(value) for value in [*secrets, in_url] if value]
        self._engine: Engine | None = None
        self._ledger_ready = False
        self.where = f"{shown_name(settings.dbtable)} in {database.shown}"

    def __repr__(self) -> str:
        return f"JdbcStreamWriter({self.where})"

    def part_writer(self) -> mb.PartWriter:
        return JdbcPartWriter()

    def abort(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        """Nothing was written before commit: nothing to undo."""

    def stop(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    # -- commit ---------------------------------------------------------------------------
    def commit(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        tables = [m.table for m in messages if isinstance(m, mb.TableMessage)]
        schema = self.context.schema
        data = (
            pa.concat_tables([t.cast(schema) if t.schema != schema else t for t in tables])
            if tables
            else schema.empty_table()
        )
        try:
            applied = self._apply(data, batch_id)
        except mb.RetriableError:
            self.stop()  # the next attempt starts on new connections
            raise
        except mb.SinkError as error:
            if self.where in str(error):
                raise
            # a write path's error names the column and value: add the table and database
            raise mb.SinkError(
                f"batch {batch_id} into table {self.where} failed: "
                f"{scrub(str(error), self._secrets)}"
            ) from error
        except mb.MicrobatchError:
            raise
        except Exception as error:
            translated = self._translated(error, batch_id)
            if isinstance(translated, mb.RetriableError):
                self.stop()
            raise translated from error
        if applied:
            log.info("batch %d: %d row(s) written to %s", batch_id, data.num_rows, self.where)
        else:
            log.info(
                "batch %d was already applied to %s (found in ledger %s): nothing written",
                batch_id,
                self.where,
                self.settings.ledger_table,
            )

    def _translated(self, error: Exception, batch_id: int) -> mb.MicrobatchError:
        text = scrub(_first_line(error), self._secrets)
        if is_retriable(error):
            return mb.RetriableError(
                f"batch {batch_id} into table {self.where} failed and may succeed when run "
                f"again: {text}"
            )
        return mb.SinkError(f"batch {batch_id} into table {self.where} failed: {text}")

    def _engine_now(self) -> Engine:
        if self._engine is None:
            engine = self.database.engine()
            wanted = self.settings.isolation_level
            if wanted and engine.dialect.name != "sqlite":
                engine = engine.execution_options(isolation_level=wanted)
            self._engine = engine
        return self._engine

    def _apply(self, data: pa.Table, batch_id: int) -> bool:
        engine = self._engine_now()
        with self.database.connect(engine) as connection:
            raw = connection.connection.driver_connection
            ledger = BatchLedger.for_query(
                raw,
                self.context,
                table=self.settings.ledger_table,
                create_table=not self._ledger_ready,
            )
            self._ledger_ready = True
            try:
                with connection.begin() as transaction:
                    _begin_sqlite(connection, raw)
                    if ledger.is_applied(batch_id):
                        transaction.rollback()
                        return False
                    table = self._prepare_table(connection, data.schema)
                    check_not_null(table, data, self.where)
                    self._write(connection, table, data)
                    ledger.mark_applied(batch_id)
            except Exception as error:
                if not _duplicate(error, raw):
                    raise
                # another writer applied this batch meanwhile: its rows stand, ours rolled back
                with connection.begin():
                    if ledger.is_applied(batch_id):
                        return False
                raise
        return True

    def _prepare_table(self, connection: Connection, schema: pa.Schema) -> Table:
        settings = self.settings
        table = reflect_table(connection, settings.dbtable)
        if table is not None and settings.complete:
            if settings.truncate:
                self._empty(connection, table)
            else:
                if connection.dialect.name not in _TRANSACTIONAL_DDL:
                    raise mb.ConfigurationError(
                        f"complete output mode re-creates table {self.where}, but "
                        f"{connection.dialect.name} cannot drop and create a table inside the "
                        "batch's transaction: set .option('truncate', 'true') to empty it with "
                        "DELETE instead"
                    )
                table.drop(connection)
                table = None
        if table is None:
            if not settings.create_if_missing:
                raise mb.ConfigurationError(
                    f"table {self.where} does not exist and createTableIfMissing is false: "
                    "create it, or let the sink create it (createTableIfMissing=true)"
                )
            table = create_table(
                connection,
                settings.dbtable,
                schema,
                dict(settings.column_types),
                primary_key=settings.upsert_keys,
            )
        check_fit(table, schema, self.where)
        return table

    def _empty(self, connection: Connection, table: Table) -> None:
        from sqlalchemy import delete, text

        if connection.dialect.name == "postgresql":
            preparer = connection.dialect.identifier_preparer
            connection.execute(text(f"TRUNCATE TABLE {preparer.format_table(table)}"))
        else:
            connection.execute(delete(table))

    def _write(self, connection: Connection, table: Table, data: pa.Table) -> int:
        batches = data.to_batches()
        if self.settings.upsert_keys:
            from ._upsert import upsert_rows

            if connection.dialect.name == "postgresql":
                batches = _nested_as_json(batches)
            return upsert_rows(connection, table, batches, self.settings.upsert_keys)
        copy = _pg_copy()
        if (
            copy is not None
            and connection.dialect.name == "postgresql"
            and copy.can_copy(connection)
        ):
            try:
                written: int = copy.copy_rows(connection, table, _nested_as_json(batches))
                return written
            except copy.CopyNotSupported as error:
                log.info("%s: %s; writing with INSERT instead", self.where, error)
        return insert_rows(connection, table, batches, self.settings.batchsize)


def _nested_as_json(batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """``batches`` with list, struct and map columns as JSON text (what a json/jsonb column
    is copied from); other columns untouched."""
    if not batches or not any(pa.types.is_nested(field.type) for field in batches[0].schema):
        return batches
    converted = []
    for batch in batches:
        arrays, fields = [], []
        for field, array in zip(batch.schema, batch.columns, strict=True):
            if pa.types.is_nested(field.type):
                rows = python_columns(pa.record_batch([array], names=[field.name]))
                texts = [
                    None if row[field.name] is None else json.dumps(row[field.name], default=str)
                    for row in rows
                ]
                array = pa.array(texts, pa.string())
                field = pa.field(field.name, pa.string(), field.nullable)
            arrays.append(array)
            fields.append(field)
        converted.append(pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields)))
    return converted


def _begin_sqlite(connection: Connection, raw: Any) -> None:
    """Open SQLite's transaction now: its Python driver begins one only before INSERT, UPDATE
    and DELETE, so a DROP or CREATE TABLE ahead of the rows would commit on its own."""
    if connection.dialect.name == "sqlite" and not getattr(raw, "in_transaction", True):
        connection.exec_driver_sql("BEGIN")


def _duplicate(error: BaseException, raw: Any) -> bool:
    from sqlalchemy import exc

    if isinstance(error, exc.IntegrityError):
        return True
    integrity = getattr(__import__(type(raw).__module__.partition(".")[0]), "IntegrityError", None)
    return integrity is not None and isinstance(error, integrity)


def _pg_copy() -> Any:
    try:
        from . import _pg_copy as module
    except ImportError:
        return None
    return module


def _first_line(error: BaseException) -> str:
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__
