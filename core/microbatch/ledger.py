"""``BatchLedger``: exactly-once writes into a transactional database, for any sink.

The engine re-runs a batch, with the same id and the same rows, when the query stopped after
the batch started but before its commit-log entry was written (a crash, a kill, a retry after
a :class:`~microbatch.errors.RetriableError`). A database sink applies each batch exactly once
by writing the batch's rows **and** a ledger row "batch N of query Q applied" in **one
transaction** of the target database: both commit or neither does, so no crash can fall between
them, and a replayed batch finds its ledger row and is skipped.

The idempotency key is the query id (``WriteContext.query_id``): it is written in the
checkpoint when the query first starts and is the same on every restart from that checkpoint,
while batch ids count from 0 again only with a new checkpoint, which also gets a new query id.
:meth:`BatchLedger.for_query` uses it.

A sink of your own (here a SQLite table written by a :class:`~microbatch.BatchWriter`)::

    import sqlite3
    from contextlib import closing

    import microbatch as mb

    class SqliteWriter(mb.BatchWriter):
        def __init__(self, path: str, context: mb.WriteContext) -> None:
            super().__init__(context)
            self.path = path

        def add_batch(self, table, batch_id: int) -> None:
            rows = [(row["id"], row["name"]) for row in table.to_pylist()]
            with closing(sqlite3.connect(self.path)) as connection:
                ledger = mb.BatchLedger.for_query(connection, self.context)
                ledger.apply_once(  # False, and nothing written, for a replayed batch
                    batch_id,
                    lambda c: c.executemany("INSERT INTO people VALUES (?, ?)", rows),
                )

Inside a ``foreach_batch`` function, ``BatchLedger.for_query(connection)`` keys the ledger by
the running query, or ``BatchLedger(connection, key="orders-to-db")`` by a key of your own.

The ledger is the table ``microbatch_ledger(query_key, batch_id, applied_at)`` with the primary
key ``(query_key, batch_id)``, created when missing. It works with any DB-API 2.0 connection
whose driver supports that DDL (sqlite3, psycopg, psycopg2); the parameter style is read from
the driver module's ``paramstyle``.

A query without a ``checkpointLocation`` runs on a temporary checkpoint, new on every start:
its batch ids start again at 0 and nothing it did survives a restart, so a ledger used for it
(through ``for_query(connection, context)`` or inside its ``foreach_batch`` function) raises
``ConfigurationError`` instead of taking new batches for applied ones.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from .connector import WriteContext
from .errors import ConfigurationError

__all__ = ["LEDGER_TABLE", "BatchLedger", "detect_paramstyle", "query_scope", "running_query"]

LEDGER_TABLE = "microbatch_ledger"
"""The default name of the ledger table."""

_RUNNING: contextvars.ContextVar[WriteContext | None] = contextvars.ContextVar(
    "microbatch_ledger_query", default=None
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
_PARAMSTYLES = ("qmark", "numeric", "named", "format", "pyformat")


@contextlib.contextmanager
def query_scope(context: WriteContext) -> Iterator[None]:
    """Run the block on behalf of the query writing with ``context``.

    A sink that calls user code with a batch (``foreach_batch`` does) wraps the call in it, so
    that a :class:`BatchLedger` made or used inside finds the query's id
    (:meth:`BatchLedger.for_query` without a context) and refuses a temporary checkpoint.
    """
    token = _RUNNING.set(context)
    try:
        yield
    finally:
        _RUNNING.reset(token)


def running_query() -> WriteContext | None:
    """The write context of the query whose batch the calling code is applying, or ``None``.

    Set inside :func:`query_scope`, so a helper called from a ``foreach_batch`` function can use
    the query's id as its idempotency key (``context.query_id``) and check
    ``context.checkpoint_is_temporary``.
    """
    return _RUNNING.get()


class BatchLedger:
    """The batch ids already applied to one database under one ``key``.

    ``connection`` is a DB-API 2.0 connection that is not in autocommit mode; the ledger uses
    it from one thread at a time, like the connection itself. ``key`` names the stream being
    applied: the query id (see :meth:`for_query`), or a name of your own for each query and
    checkpoint. ``table`` may be schema-qualified (``"etl.microbatch_ledger"``).
    ``paramstyle`` overrides the driver module's ``paramstyle`` (needed for connection
    wrappers that are not the driver's own class). With ``create_table=True`` the constructor
    creates the table when missing and commits: build the ledger before opening a transaction
    of your own.
    """

    def __init__(
        self,
        connection: Any,
        key: str,
        *,
        table: str = LEDGER_TABLE,
        paramstyle: str | None = None,
        create_table: bool = True,
    ) -> None:
        if not isinstance(key, str) or not key:
            raise ConfigurationError("BatchLedger needs a non-empty string key naming the stream")
        if not _IDENTIFIER.fullmatch(table):
            raise ConfigurationError(
                f"BatchLedger table name {table!r} is not a plain SQL identifier "
                "(letters, digits and underscores, optionally 'schema.table')"
            )
        self.key = key
        self._context: WriteContext | None = None
        self._require_checkpoint()
        self.connection = connection
        self.table = table
        self.paramstyle = paramstyle or detect_paramstyle(connection)
        if self.paramstyle not in _PARAMSTYLES:
            raise ConfigurationError(
                f"Unknown DB-API paramstyle {self.paramstyle!r}; expected one of "
                f"{', '.join(_PARAMSTYLES)}"
            )
        self._integrity_error = _driver_attribute(connection, "IntegrityError")
        if create_table:
            self._execute(
                f"CREATE TABLE IF NOT EXISTS {table} ("
                "query_key TEXT NOT NULL, batch_id BIGINT NOT NULL, applied_at TEXT NOT NULL, "
                "PRIMARY KEY (query_key, batch_id))"
            )
            connection.commit()

    @classmethod
    def for_query(
        cls,
        connection: Any,
        context: WriteContext | None = None,
        *,
        table: str = LEDGER_TABLE,
        paramstyle: str | None = None,
        create_table: bool = True,
    ) -> BatchLedger:
        """The ledger of one query, keyed by its query id (stable across restarts of one
        checkpoint).

        A sink's stream writer passes the ``WriteContext`` it was given; code running inside a
        ``foreach_batch`` function passes none and gets the running query's. Raises
        ``ConfigurationError`` outside a query, or for a query without a checkpoint location.
        """
        found = context if context is not None else _RUNNING.get()
        if found is None or not found.query_id:
            raise ConfigurationError(
                "BatchLedger.for_query needs the query's WriteContext: pass the one the sink's "
                "stream writer was given, or call it inside a foreach_batch function"
            )
        _refuse_temporary(found, f"BatchLedger.for_query (query id {found.query_id})")
        ledger = cls(
            connection,
            found.query_id,
            table=table,
            paramstyle=paramstyle,
            create_table=create_table,
        )
        ledger._context = found
        return ledger

    def __repr__(self) -> str:
        return f"BatchLedger(key={self.key!r}, table={self.table!r})"

    def is_applied(self, batch_id: int) -> bool:
        """True when batch ``batch_id`` was applied (its ledger row is committed or is part of
        the current transaction)."""
        rows = self._execute(
            f"SELECT 1 FROM {self.table} WHERE query_key = {{}} AND batch_id = {{}}",
            (("query_key", self.key), ("batch_id", _check_batch_id(batch_id))),
            fetch=True,
        )
        return bool(rows)

    def last_applied(self) -> int | None:
        """The highest batch id applied under this key, or ``None`` before the first."""
        rows = self._execute(
            f"SELECT MAX(batch_id) FROM {self.table} WHERE query_key = {{}}",
            (("query_key", self.key),),
            fetch=True,
        )
        value = rows[0][0] if rows else None
        return None if value is None else int(value)

    def mark_applied(self, batch_id: int) -> None:
        """Record batch ``batch_id`` as applied, inside the caller's open transaction.

        Does not commit: commit it together with the batch's own writes (check
        :meth:`is_applied` first, in the same transaction). Marking a batch id twice violates
        the table's primary key (the driver's ``IntegrityError``), which is what stops two
        concurrent writers from both applying a batch.
        """
        applied_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        self._execute(
            f"INSERT INTO {self.table} (query_key, batch_id, applied_at) VALUES ({{}}, {{}}, {{}})",
            (
                ("query_key", self.key),
                ("batch_id", _check_batch_id(batch_id)),
                ("applied_at", applied_at),
            ),
        )

    def apply_once(self, batch_id: int, function: Callable[[Any], object]) -> bool:
        """Run ``function(connection)`` and mark ``batch_id`` in one transaction, then commit.

        Returns False without calling ``function`` when the batch was already applied, True when
        it was applied now. When ``function`` or the commit fails the transaction is rolled back
        and the error raised: nothing of the batch is kept, and a replay applies it again. When
        another writer applied the same batch id meanwhile, this transaction is rolled back and
        False returned. Call it with no transaction of your own open: it commits or rolls back
        whatever the connection holds.
        """
        _check_batch_id(batch_id)
        self._require_checkpoint()
        self._require_transactions()
        if self.is_applied(batch_id):
            self.connection.rollback()  # ends the read transaction some drivers opened
            return False
        try:
            function(self.connection)
        except BaseException:
            self.connection.rollback()
            raise
        try:
            self.mark_applied(batch_id)
        except BaseException as error:
            self.connection.rollback()
            duplicate = self._integrity_error is not None and isinstance(
                error, self._integrity_error
            )
            if duplicate and self.is_applied(batch_id):
                self.connection.rollback()
                return False
            raise
        self.connection.commit()
        return True

    def reset(self) -> None:
        """Forget every batch id under this key and commit (after deleting its checkpoint)."""
        self._execute(
            f"DELETE FROM {self.table} WHERE query_key = {{}}", (("query_key", self.key),)
        )
        self.connection.commit()

    def _require_checkpoint(self) -> None:
        """Refuse use for a query whose checkpoint is temporary: its batch ids restart at 0 on
        every start, so new batches would be taken for applied ones and skipped."""
        context = self._context if self._context is not None else _RUNNING.get()
        if context is not None:
            _refuse_temporary(context, f"BatchLedger(key={self.key!r})")

    def _require_transactions(self) -> None:
        autocommit = getattr(self.connection, "autocommit", None) is True
        if type(self.connection).__module__ == "sqlite3" and getattr(
            self.connection, "autocommit", -1
        ) not in (True, False):
            # sqlite3's legacy transaction control: isolation_level None is autocommit
            autocommit = self.connection.isolation_level is None
        if autocommit:
            raise ConfigurationError(
                "BatchLedger.apply_once needs a connection that runs statements in a "
                f"transaction, but this {type(self.connection).__name__} is in autocommit mode: "
                "the batch's writes and its ledger row could not commit together. Turn "
                "autocommit off (sqlite3: keep the default isolation_level; psycopg: "
                "autocommit=False)."
            )

    def _execute(
        self,
        template: str,
        parameters: Sequence[tuple[str, Any]] = (),
        *,
        fetch: bool = False,
    ) -> list[Any]:
        sql, values = _render(template, parameters, self.paramstyle)
        cursor = self.connection.cursor()
        try:
            if parameters:
                cursor.execute(sql, values)
            else:
                cursor.execute(sql)
            return list(cursor.fetchall()) if fetch else []
        finally:
            cursor.close()


def _refuse_temporary(context: WriteContext, what: str) -> None:
    if not context.checkpoint_is_temporary:
        return
    query = f" {context.query_name!r}" if context.query_name else ""
    raise ConfigurationError(
        f"{what} is used by query{query}, which has no checkpointLocation: its batch ids start "
        "again at 0 on every start, so the ledger would take new batches for applied ones and "
        'skip their rows. Give the query a checkpointLocation (.option("checkpointLocation", '
        "...) or the session conf checkpointLocation), with a ledger key of its own."
    )


def detect_paramstyle(connection: Any) -> str:
    """The DB-API ``paramstyle`` of the driver module that defines ``connection``'s class."""
    style = _driver_attribute(connection, "paramstyle")
    if not isinstance(style, str):
        raise ConfigurationError(
            f"Cannot tell the parameter style of {type(connection).__module__}."
            f"{type(connection).__name__}: its module has no DB-API 'paramstyle'. Pass "
            "BatchLedger(..., paramstyle='qmark' | 'format' | 'pyformat' | 'named' | 'numeric'), "
            "or the driver's own connection."
        )
    return style


def _driver_attribute(connection: Any, name: str) -> Any:
    """``name`` from the innermost module of ``connection``'s class path that defines it."""
    parts = type(connection).__module__.split(".")
    for length in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:length]))
        if module is not None and hasattr(module, name):
            return getattr(module, name)
    return None


def _render(template: str, parameters: Sequence[tuple[str, Any]], style: str) -> tuple[str, Any]:
    """Fill the ``{}`` slots of ``template`` with placeholders of ``style``."""
    names = [name for name, _ in parameters]
    values = [value for _, value in parameters]
    if style == "qmark":
        marks = ["?"] * len(names)
    elif style == "numeric":
        marks = [f":{index}" for index in range(1, len(names) + 1)]
    elif style == "named":
        marks = [f":{name}" for name in names]
    elif style == "format":
        marks = ["%s"] * len(names)
    else:
        marks = [f"%({name})s" for name in names]
    sql = template.format(*marks)
    if style in ("named", "pyformat"):
        return sql, dict(zip(names, values, strict=True))
    return sql, tuple(values)


def _check_batch_id(batch_id: int) -> int:
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise ValueError(f"batch_id must be a non-negative int, got {batch_id!r}")
    return batch_id
