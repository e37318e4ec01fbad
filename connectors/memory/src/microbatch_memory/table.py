"""The in-memory tables the memory sink writes, and where a session's tables are kept.

A session's tables live in a module-level ``weakref.WeakKeyDictionary`` keyed by the session
object, mapping a query name to its :class:`MemoryTable`. The tables therefore live exactly as
long as their session, and a query restarted under the same name in the same session finds the
table its previous run wrote.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import pyarrow as pa

from microbatch.errors import SchemaMismatchError

__all__ = ["MemoryTable", "attach_table", "memory_table", "show_schema"]


class MemoryTable:
    """The rows a memory sink has written, held in this process.

    Batches are applied at most once: a batch id at or below the highest one already applied
    is skipped, which makes a replayed batch a no-op. Reading concatenates the batches on first
    use and caches the result until the next batch is applied. Thread-safe.
    """

    def __init__(self, name: str, schema: pa.Schema, *, query_id: str = "") -> None:
        self.name = name
        self.schema = schema
        self.query_id = query_id
        """The id of the query whose batches this table holds (``WriteContext.query_id``)."""
        self._lock = threading.Lock()
        self._parts: list[pa.Table] = []
        self._batch_ids: list[int] = []
        self._cached: pa.Table | None = None

    def __repr__(self) -> str:
        return (
            f"MemoryTable(name={self.name!r}, batches={len(self.batch_ids)}, rows={self.num_rows})"
        )

    @property
    def batch_ids(self) -> list[int]:
        """The ids of the batches applied so far, in order."""
        with self._lock:
            return list(self._batch_ids)

    @property
    def last_batch_id(self) -> int | None:
        """The highest batch id applied, or ``None`` before the first batch."""
        with self._lock:
            return self._batch_ids[-1] if self._batch_ids else None

    @property
    def num_rows(self) -> int:
        """The number of rows the table holds now."""
        with self._lock:
            return sum(part.num_rows for part in self._parts)

    def to_table(self) -> pa.Table:
        """The table's current contents (an empty table of its schema before any batch)."""
        with self._lock:
            if self._cached is None:
                if not self._parts:
                    self._cached = self.schema.empty_table()
                elif len(self._parts) == 1:
                    self._cached = self._parts[0]
                else:
                    self._cached = pa.concat_tables(self._parts)
            return self._cached

    def apply(self, batch_id: int, table: pa.Table, *, replace: bool = False) -> bool:
        """Add the rows of batch ``batch_id`` (or replace the contents, ``replace=True``).

        Returns False, changing nothing, when ``batch_id`` is not above the highest batch id
        already applied.
        """
        table = self._conform(batch_id, table)
        with self._lock:
            if self._batch_ids and batch_id <= self._batch_ids[-1]:
                return False
            if replace:
                self._parts = [table] if table.num_rows else []
            elif table.num_rows:
                self._parts.append(table)
            self._batch_ids.append(batch_id)
            self._cached = None
            return True

    def _conform(self, batch_id: int, table: pa.Table) -> pa.Table:
        if table.schema.equals(self.schema):
            return table
        try:
            return table.select(self.schema.names).cast(self.schema)
        except (KeyError, ValueError, pa.ArrowException) as error:
            raise SchemaMismatchError(
                f"Batch {batch_id} for memory table '{self.name}' has schema "
                f"[{show_schema(table.schema)}], expected [{show_schema(self.schema)}]: {error}"
            ) from None


def show_schema(schema: pa.Schema) -> str:
    """``name: type, ...`` for error messages."""
    return ", ".join(f"{field.name}: {field.type}" for field in schema)


_TABLES: weakref.WeakKeyDictionary[Any, dict[str, MemoryTable]] = weakref.WeakKeyDictionary()
_TABLES_LOCK = threading.Lock()


def memory_table(session: Any, name: str) -> MemoryTable | None:
    """The memory table written under query name ``name`` in ``session``, if any."""
    with _TABLES_LOCK:
        return _TABLES.get(session, {}).get(name)


def attach_table(session: Any, name: str, schema: pa.Schema, query_id: str) -> MemoryTable:
    """The table a memory sink of query ``query_id`` writes under ``name`` in ``session``.

    The existing table is continued when it was written by the same query (a restart from the
    same checkpoint) with the same schema; otherwise a new, empty table replaces it, as a new
    query's memory sink starts empty in Spark. Without a session the table is not shared.
    """
    if session is None:
        return MemoryTable(name, schema, query_id=query_id)
    with _TABLES_LOCK:
        tables = _TABLES.setdefault(session, {})
        existing = tables.get(name)
        if (
            existing is not None
            and existing.query_id == query_id
            and existing.schema.equals(schema)
        ):
            return existing
        table = MemoryTable(name, schema, query_id=query_id)
        tables[name] = table
        return table
