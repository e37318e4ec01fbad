"""Upserts into a Delta table, one commit per batch: the sink's ``mode=merge`` and
:func:`merge_batch` for ``foreach_batch`` functions.

Both keep the **last** row of each key in batch order (Delta's MERGE refuses two source rows
that match one target row), then make one commit that carries the application transaction
(app id, batch id), so a replayed batch is recognised and skipped:

- the table exists: ``DeltaTable.merge`` updates every column of a matching row and inserts the
  rows that match none (``WHEN MATCHED UPDATE SET *  WHEN NOT MATCHED INSERT *``);
- the table does not exist yet: it is created from the rows (with ``partition_by`` and table
  properties);
- the batch has no rows: an empty commit records the transaction (Delta's sink records every
  batch, empty or not).

Keys are compared **null-safely**: a NULL key matches a NULL key, as it groups in an
aggregation (Spark's ``GROUP BY`` keeps one NULL group, and update mode re-emits its row), so
the latest row of the NULL key replaces the previous one. A hand-written Spark ``MERGE ... ON
t.k = s.k`` instead never matches a NULL key and inserts a new row each time. Key columns
without NULLs in the batch are compared with ``=``, which lets delta-rs skip the target files
whose statistics exclude the batch's keys.

Column names are quoted (``"my col"``, ``"Order"``, ``"a""b"``) in every expression handed to
delta-rs, so no name, however written, changes the predicate; names starting with
``__delta_rs_`` (delta-rs's own working columns) are refused.

``deltalake`` is imported inside the functions.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb

from ._table import DeltaTarget, target_at

if TYPE_CHECKING:
    from deltalake import CommitProperties, DeltaTable

    from ._part_writer import AddFile

__all__ = [
    "check_merge_keys",
    "commit_merge",
    "last_per_key",
    "merge_batch",
    "merge_predicate",
    "quote_identifier",
    "upsert",
]

log = logging.getLogger("microbatch.delta")

SOURCE_ALIAS = "s"
TARGET_ALIAS = "t"
RESERVED_PREFIX = "__delta_rs_"
"""delta-rs names its working columns so: a column of the batch may not."""
_ROW = "__microbatch_row"


# --- keys and expressions ---------------------------------------------------------------------


def quote_identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier for delta-rs expressions (``"a""b"`` for ``a"b``)."""
    return '"' + name.replace('"', '""') + '"'


def check_merge_keys(schema: pa.Schema, keys: Sequence[str], where: str = "mergeKeys") -> None:
    """Raise ``ConfigurationError`` (or ``SchemaError`` for a column's name or type) unless
    ``keys`` can identify the rows of ``schema`` in a merge.

    Keys must be given, distinct, columns of ``schema`` (names are case-sensitive) and of a
    type that compares by value (not a list, struct or map). ``where`` names the setting in
    messages (``"mergeKeys"``, ``"merge_batch(keys=...)"``).
    """
    if not keys:
        raise mb.ConfigurationError(f"{where} is empty: name the columns that identify a row")
    repeated = sorted({key for key in keys if list(keys).count(key) > 1})
    if repeated:
        raise mb.ConfigurationError(f"{where} names {_names(repeated)} more than once")
    for name in schema.names:
        if name.startswith(RESERVED_PREFIX):
            raise mb.SchemaError(
                f"Column '{name}' cannot be merged into a Delta table: delta-rs's MERGE keeps "
                f"working columns whose names start with '{RESERVED_PREFIX}'; rename it"
            )
    for key in keys:
        if key not in schema.names:
            near = [name for name in schema.names if name.lower() == key.lower()]
            hint = f" (did you mean '{near[0]}'? names are case-sensitive)" if near else ""
            if not near:
                close = difflib.get_close_matches(key, schema.names, n=1, cutoff=0.6)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise mb.ConfigurationError(
                f"{where} names '{key}', which is not a column of the rows{hint}; the columns "
                f"are {_names(schema.names)}"
            )
        type_ = schema.field(key).type
        if pa.types.is_nested(type_):
            raise mb.SchemaError(
                f"{where} column '{key}' has type {type_}: a merge key must be a column of "
                "plain values (numbers, strings, dates, timestamps, binaries, booleans)"
            )


def last_per_key(rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The last row of each distinct key of ``rows``, in the order those rows had (NULL is a
    key of its own); ``rows`` itself when its keys are already distinct."""
    if rows.num_rows < 2:
        return rows
    positions = pc.indices_nonzero(pa.repeat(pa.scalar(True), rows.num_rows))
    grouped = (
        pa.table([rows.column(key) for key in keys], names=[f"k{i}" for i in range(len(keys))])
        .append_column(_ROW, positions)
        .group_by([f"k{i}" for i in range(len(keys))], use_threads=False)
        .aggregate([(_ROW, "max")])
    )
    if grouped.num_rows == rows.num_rows:
        return rows
    last = grouped.column(f"{_ROW}_max")
    return rows.take(pc.take(last, pc.sort_indices(last)))


def merge_predicate(keys: Sequence[str], rows: pa.Table) -> str:
    """The merge condition on ``keys``: null-safe for a key that is NULL in some row of
    ``rows``, ``=`` (which lets delta-rs prune target files) for the others."""
    terms = []
    for key in keys:
        target = f"{TARGET_ALIAS}.{quote_identifier(key)}"
        source = f"{SOURCE_ALIAS}.{quote_identifier(key)}"
        if rows.column(key).null_count:
            terms.append(f"{target} IS NOT DISTINCT FROM {source}")
        else:
            terms.append(f"{target} = {source}")
    if len(terms) == 1:
        return terms[0]
    # delta-rs's parser binds IS NOT DISTINCT FROM looser than AND: parenthesise each term
    return " AND ".join(f"({term})" for term in terms)


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


# --- the commit ---------------------------------------------------------------------------


def upsert(
    target: DeltaTarget,
    table: DeltaTable | None,
    rows: pa.Table,
    keys: Sequence[str],
    partition_by: Sequence[str],
    properties: CommitProperties,
    configuration: Mapping[str, str],
    *,
    merge_schema: bool = False,
    columns: Sequence[str] | None = None,
) -> None:
    """Merge ``rows`` into the table by ``keys`` in one commit carrying ``properties``.

    ``columns``: the columns the batch really has (``None``: all of ``rows``); the others are
    left as they are in a matching row, and NULL in an inserted one, never overwritten.

    ``table`` is the table as the caller opened it (``None`` when there is none yet: it is
    created from the rows, partitioned by ``partition_by``, with the table properties
    ``configuration``). The last row of each key wins. ``merge_schema`` lets the batch add
    columns to the table (its missing columns then keep their values on update and are NULL on
    insert). Errors of delta-rs (a concurrent commit among them) are raised unchanged; nothing
    is committed then.
    """
    from deltalake import write_deltalake

    if columns is not None and list(columns) != rows.schema.names:
        rows = rows.select([name for name in rows.schema.names if name in set(columns)])
    check_merge_keys(rows.schema, keys)
    given = rows.num_rows
    rows = last_per_key(rows, keys)
    if rows.num_rows < given:
        log.debug(
            "Merging into %s: %d of the batch's %d rows are replaced by a later row of their "
            "key (the last row of each key is merged)",
            target.uri,
            given - rows.num_rows,
            given,
        )
    if table is None:
        write_deltalake(
            target.uri,
            rows,
            mode="error",
            partition_by=list(partition_by) or None,
            configuration=dict(configuration) or None,
            storage_options=target.options(),
            commit_properties=properties,
        )
        return
    if rows.num_rows == 0:
        table.create_write_transaction(
            [],
            mode="append",
            schema=table.schema(),
            partition_by=table.metadata().partition_columns or None,
            commit_properties=properties,
        )
        return
    assignments = {
        quote_identifier(name): f"{SOURCE_ALIAS}.{quote_identifier(name)}"
        for name in rows.schema.names
    }
    (
        table.merge(
            rows,
            merge_predicate(keys, rows),
            source_alias=SOURCE_ALIAS,
            target_alias=TARGET_ALIAS,
            merge_schema=merge_schema,
            streamed_exec=False,  # the rows are in memory: let delta-rs prune by their keys
            commit_properties=properties,
        )
        .when_matched_update(assignments)
        .when_not_matched_insert(assignments)
        .execute()
    )


def commit_merge(
    target: DeltaTarget,
    table: DeltaTable | None,
    files: Sequence[AddFile],
    schema: pa.Schema,
    keys: tuple[str, ...],
    partition_by: tuple[str, ...],
    properties: CommitProperties,
    configuration: Mapping[str, str],
    *,
    merge_schema: bool = False,
    columns: Sequence[str] | None = None,
) -> None:
    """Commit a batch of the sink in ``mode=merge``: the staged ``files`` (written
    unpartitioned by the parts, read back as ``schema``) merged by ``keys`` in one commit, then
    the staged files deleted.

    The caller has checked that the batch is not applied yet (its transaction version) and
    that ``schema`` fits the table; ``properties`` carries the app transaction. See
    :func:`upsert` for ``table``, ``partition_by``, ``configuration``, ``merge_schema`` and
    ``columns`` (the query's columns: a table column the query lacks keeps its values).
    When the commit fails the staged files stay, for the writer's retry (the writer removes
    the batch's staging folder once the batch is committed, skipped or aborted).
    """
    from ._part_writer import delete_files, read_files

    rows = read_files(target, files, schema).read_all()
    upsert(
        target,
        table,
        rows,
        keys,
        partition_by,
        properties,
        configuration,
        merge_schema=merge_schema,
        columns=columns,
    )
    delete_files(target, files)


# --- the foreach_batch helper -----------------------------------------------------------------


def merge_batch(
    batch: Any,
    batch_id: int,
    path: str | os.PathLike[str],
    keys: str | Sequence[str],
    *,
    app_id: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    partition_by: str | Sequence[str] = (),
    configuration: Mapping[str, str] | None = None,
    merge_schema: bool = False,
    user_metadata: str | None = None,
) -> bool:
    """Upsert one batch into the Delta table at ``path`` by ``keys``, once per batch id.

    Made for ``foreach_batch`` functions (the seed pattern ``foreachBatch`` + ``MERGE``)::

        def upsert(batch, batch_id):
            merge_batch(batch, batch_id, "/data/totals", keys="user")

    ``batch`` is a ``pyarrow.Table`` (what ``foreach_batch`` passes), or any Arrow table or
    stream (a ``RecordBatchReader``, a Polars ``DataFrame``). The last row of each key wins;
    matching rows are replaced (every column the batch has), the others inserted; NULL keys
    match NULL keys. The first call creates the table, partitioned by ``partition_by`` with the
    table properties ``configuration`` (``{"delta.enableChangeDataFeed": "true"}``).

    Idempotent per ``(app_id, batch_id)``: the commit records Delta's application transaction
    (``txn`` action) with the rows, and a batch id at or below the one recorded is skipped
    before anything is written (returns ``False``; ``True`` when the batch was applied now).
    ``app_id`` defaults to the running query's id when called inside a ``foreach_batch``
    function (stable across restarts of one checkpoint); outside a query it is required. A
    query without a ``checkpointLocation`` starts again at batch 0 on every start: an explicit
    ``app_id`` would then skip its batches, so it is refused there. Give each table a call of
    its own per batch.

    ``storage_options`` go to delta-rs's object store (S3, Azure, GCS settings). With
    ``merge_schema`` the batch may add columns to the table (columns it lacks then keep their
    values on update and are NULL on insert); without it, a batch whose columns differ from the
    table's raises ``SchemaError`` naming them. ``user_metadata`` is recorded in the commit's
    ``commitInfo``. A concurrent commit that conflicts (or creates the table first) raises
    ``RetriableError``: the engine runs the batch again, and the retry skips it when the other
    commit was this very batch.
    """
    from deltalake import CommitProperties, Transaction
    from deltalake.exceptions import CommitFailedError, DeltaError

    from ._delta_schema import delta_arrow_schema, table_arrow_schema

    key_names = (keys,) if isinstance(keys, str) else tuple(keys)
    partitions = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by)
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise mb.ConfigurationError(f"merge_batch needs a batch id >= 0, got {batch_id!r}")
    app = _app_id(app_id)
    rows = _as_delta(_as_table(batch), delta_arrow_schema)
    check_merge_keys(rows.schema, key_names, "merge_batch(keys=...)")
    target = target_at(path, storage_options)
    table = target.open()
    if table is None:
        from ._table_features import check_change_feed_columns

        check_change_feed_columns(rows.schema.names, configuration or {}, target.uri)
    else:
        applied = table.transaction_version(app)
        if applied is not None and batch_id <= applied:
            log.info(
                "merge_batch: batch %d of app id %s is already in the Delta table %s (its "
                "transaction version is %d): skipped",
                batch_id,
                app,
                target.uri,
                applied,
            )
            return False
        if not merge_schema:
            _check_columns(rows.schema, table_arrow_schema(table), target.uri)
    properties = CommitProperties(
        app_transactions=[Transaction(app, batch_id)],
        custom_metadata={"userMetadata": user_metadata} if user_metadata is not None else None,
    )
    try:
        upsert(
            target,
            table,
            rows,
            key_names,
            partitions,
            properties,
            configuration or {},
            merge_schema=merge_schema,
        )
    except DeltaError as error:
        if not isinstance(error, CommitFailedError) and "already exists" not in str(error):
            raise
        if "append-only" in str(error):  # a table property: running again cannot help
            raise mb.UnsupportedOperationError(
                f"merge_batch: the Delta table {target.uri} is append-only "
                f"(delta.appendOnly=true), so a merge may not rewrite its rows: {error}"
            ) from error
        raise mb.RetriableError(
            f"merge_batch: another commit to the Delta table {target.uri} conflicted with "
            f"batch {batch_id} of app id {app} ({error}); the batch runs again"
        ) from error
    return True


def _app_id(app_id: str | None) -> str:
    from microbatch.ledger import running_query

    running = running_query()
    if app_id is None:
        if running is None or not running.query_id:
            raise mb.ConfigurationError(
                "merge_batch needs app_id=... (a name for the stream writing the table, the "
                "same on every restart) when it is not called inside a foreach_batch function, "
                "whose query id it uses by default"
            )
        return running.query_id
    if not isinstance(app_id, str) or not app_id:
        raise mb.ConfigurationError(f"merge_batch needs a non-empty string app_id, got {app_id!r}")
    if running is not None and running.checkpoint_is_temporary:
        query = f" {running.query_name!r}" if running.query_name else ""
        raise mb.ConfigurationError(
            f"merge_batch(app_id={app_id!r}) is used by query{query}, which has no "
            "checkpointLocation: its batch ids start again at 0 on every start, so batches "
            "already recorded under that app id would be skipped. Give the query a "
            "checkpointLocation, or leave app_id out (the query id is new on every start)."
        )
    return app_id


def _as_table(batch: Any) -> pa.Table:
    if isinstance(batch, pa.Table):
        return batch
    if isinstance(batch, pa.RecordBatch):
        return pa.Table.from_batches([batch])
    if isinstance(batch, pa.RecordBatchReader):
        return batch.read_all()
    if hasattr(batch, "__arrow_c_stream__"):
        return pa.table(batch)
    raise mb.ConfigurationError(
        f"merge_batch takes a pyarrow Table, RecordBatch or RecordBatchReader (or an object "
        f"with __arrow_c_stream__, such as a Polars DataFrame), got {type(batch).__name__}"
    )


def _as_delta(rows: pa.Table, delta_arrow_schema: Any) -> pa.Table:
    """``rows`` with the types a Delta table holds (timestamps to microseconds, as the sink)."""
    schema = delta_arrow_schema(rows.schema)
    if rows.schema.equals(schema, check_metadata=False):
        return rows
    columns = []
    for field, column in zip(schema, rows.columns, strict=True):
        if column.type != field.type:
            try:
                column = pc.cast(
                    column, options=pc.CastOptions(field.type, allow_time_truncate=True)
                )
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise mb.SchemaError(
                    f"merge_batch: column '{field.name}' of type {column.type} cannot be written "
                    f"to Delta as {field.type}: {error}"
                ) from None
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def _check_columns(batch: pa.Schema, table: pa.Schema, uri: str) -> None:
    new = [name for name in batch.names if name not in table.names]
    missing = [name for name in table.names if name not in batch.names]
    if not new and not missing:
        return
    parts = []
    if new:
        parts.append(f"the batch has columns the table lacks: {_names(new)}")
    if missing:
        parts.append(f"the batch lacks the table's columns {_names(missing)}")
    raise mb.SchemaError(
        f"merge_batch: the batch does not fit the Delta table {uri}: {'; '.join(parts)}. Pass "
        "merge_schema=True to add new columns (and keep the values of columns a batch lacks)."
    )
