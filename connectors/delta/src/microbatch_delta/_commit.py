"""The ``delta`` sink's stream writer: one Delta commit per batch, exactly once.

Every commit carries Delta's application transaction (app id = the query id, version = the
batch id) in the same log entry as the batch's files. Before it commits a batch, the writer
reads the table's latest version (its handle brought up to date) and the query's transaction
version: a batch at or below it is already in the table (a replay after a crash) and is
skipped. The check must come first, because delta-rs accepts an older version and moves the
stored one backwards. The batch's schema is checked against that same version (``_schema_fit``)
before anything is committed; parts written for a schema or partitioning the table no longer
has are refused with a ``RetriableError`` (the engine writes the batch again).

Commits, by case (each is one Delta commit):

- no table yet: the table is created with the batch's files, its partition columns and the
  ``delta.*`` table properties (``create_table_with_add_actions``);
- append: the parts' files are added (``create_write_transaction(mode="append")``);
- complete: every file of the table is removed and the batch's added
  (``mode="overwrite"``). delta-rs would rebase an overwrite over a commit that landed after
  the table was read, keeping that commit's files; this writer turns delta-rs's own retries off
  for it and retries from a fresh read instead, so the table holds the batch and nothing else;
- ``mergeSchema`` with new columns (append), or ``overwriteSchema`` with another partitioning
  (complete): the parts were staged under ``_microbatch_staging/<query id>/<batch id>/`` and
  are written again by ``write_deltalake`` (``schema_mode="merge"`` / ``"overwrite"``), read
  back as one stream; the staged files are deleted after the commit. A table with CHECK
  constraints or invariants takes the same path (delta-rs's writer checks the rows; a
  violation fails the batch with a ``SinkError``, nothing committed);
- ``mode=merge``: ``_merge.commit_merge`` (staged files merged by key).

Tables this path cannot write correctly (column mapping, generated or identity columns,
unknown writer features; an append-only table in complete or merge mode) are refused before
anything is written (``_table_features``).

A commit that fails because another run of the same query committed (the two runs share the
app id) stops the run: only one run may write. A conflict with any other writer is retried
from a fresh read of the table a few times, then raised as a ``RetriableError`` (the engine
runs the batch again). A store error (an ``OSError`` of delta-rs: the store away) while the
table is read or the batch committed is a ``RetriableError`` too; at ``check_table`` (the
query's start) it is a ``SinkError`` naming the table. After any failed commit, a fresh read
that holds the batch's transaction tells whose commit landed: this one's when the table names
its files or a recent ``commitInfo`` holds this ``commit()`` call's id (``COMMIT_ID_KEY``;
a staged batch's files are rewritten, an empty batch has none), and the batch counts as
committed; another run's otherwise (a ``SinkError``, as above). Log lines show no storage
option's value (``DeltaTarget.scrub``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

import microbatch as mb

from ._commit_outcome import files_of, holds_any, is_conflict, is_violation
from ._schema_fit import Fit, fit_batch
from ._table import DeltaTarget, storage_error_text

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from deltalake.transaction import CommitProperties

    from ._part_writer import AddFile

__all__ = [
    "COMMIT_ATTEMPTS",
    "COMMIT_ID_KEY",
    "DeltaStreamWriter",
    "SinkSettings",
    "commit_properties",
]

log = logging.getLogger("microbatch.delta")

COMMIT_ATTEMPTS = 5
"""How often a commit that conflicts with another writer is tried, each from a fresh read."""

COMMIT_ID_KEY = "microbatch.commitId"
"""The ``commitInfo`` key of the id of one ``commit()`` call of the sink (all its attempts)."""

_HISTORY_SEARCHED = 50
"""How many of the latest versions are searched for a commit whose answer was lost."""


def commit_properties(
    app_id: str,
    batch_id: int,
    user_metadata: str | None,
    *,
    max_commit_retries: int | None = None,
    commit_id: str | None = None,
) -> CommitProperties:
    """The properties of the commit of batch ``batch_id``: the application transaction
    ``(app_id, batch_id)`` and, when given, ``userMetadata`` in the commit's ``commitInfo``.
    ``max_commit_retries`` is delta-rs's own retry count (``None``: its default);
    ``commit_id`` goes into ``commitInfo`` as ``COMMIT_ID_KEY`` (it tells a writer's own
    commit from another run's)."""
    from deltalake.transaction import CommitProperties, Transaction

    metadata: dict[str, str] = {}
    if user_metadata is not None:
        metadata["userMetadata"] = user_metadata
    if commit_id is not None:
        metadata[COMMIT_ID_KEY] = commit_id
    return CommitProperties(
        custom_metadata=metadata or None,
        max_commit_retries=max_commit_retries,
        app_transactions=[Transaction(app_id=app_id, version=batch_id)],
    )


@dataclass(frozen=True)
class SinkSettings:
    """What the sink's options say about writing, resolved once per run."""

    partition_by: tuple[str, ...] = ()
    complete: bool = False
    merge: bool = False
    merge_keys: tuple[str, ...] = ()
    merge_schema: bool = False
    overwrite_schema: bool = False
    user_metadata: str | None = None
    max_records_per_file: int | None = None
    configuration: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Layout:
    """How the parts of a batch were written: the plan the commit must still agree with."""

    fit: Fit
    staged: bool


class DeltaStreamWriter(mb.StreamWriter):
    """Writes one query run's batches into a Delta table (see the module's docstring).

    ``schema`` is the batch's schema as Delta holds it (``delta_arrow_schema``).
    """

    def __init__(
        self,
        target: DeltaTarget,
        schema: pa.Schema,
        query_id: str,
        settings: SinkSettings,
    ) -> None:
        self._target = target
        self._schema = schema
        self._query_id = query_id
        self._settings = settings
        self._table: DeltaTable | None = None
        self._planned: _Layout | None = None  # for the next part_writer()
        self._written: _Layout | None = None  # how the last part_writer() writes
        self._commit_id: str | None = None  # of the commit() under way

    def __repr__(self) -> str:
        return f"DeltaStreamWriter({self._target.uri!r}, query_id={self._query_id!r})"

    # -- planning ---------------------------------------------------------------------------
    def fit(self, table: DeltaTable | None) -> Fit:
        """How this run's batches go into ``table`` as it is now (``SchemaError`` when they
        do not fit)."""
        from ._delta_schema import table_arrow_schema

        settings = self._settings
        schema = table_arrow_schema(table) if table is not None else None
        partitions = tuple(table.metadata().partition_columns) if table is not None else ()
        fit = fit_batch(
            self._schema,
            schema,
            partitions,
            settings.partition_by,
            path=self._target.uri,
            complete=settings.complete,
            merge_schema=settings.merge_schema,
            overwrite_schema=settings.overwrite_schema,
        )
        if table is None:
            return fit
        from ._table_features import table_needs

        needs = table_needs(table, self._target.uri, removes=settings.complete or settings.merge)
        if fit.change in ("evolve", "replace"):  # new columns: none may be the feed's own
            from ._table_features import check_change_feed_columns

            configuration = table.metadata().configuration
            check_change_feed_columns(fit.schema.names, configuration, self._target.uri)
        return dataclasses.replace(fit, checks=needs.checks)

    def _staged(self, fit: Fit) -> bool:
        if self._settings.merge or fit.checks:  # checks: delta-rs's writer writes the rows
            return True
        if self._settings.complete:
            return fit.repartitions
        return fit.change == "evolve"

    def _layout(self, table: DeltaTable | None) -> _Layout:
        fit = self.fit(table)
        return _Layout(fit, self._staged(fit))

    def check_table(self) -> None:
        """Fail now, before any batch, when the table exists and the batches cannot go into it
        (and say so when ``delta.*`` properties, which only a new table takes, differ)."""
        table = self._read(error=mb.SinkError)
        if table is None:
            from ._table_features import check_new_table

            settings = self._settings
            check_new_table(
                self._schema.names,
                settings.configuration,
                self._target.uri,
                removes=settings.complete or settings.merge,
            )
        self._planned = self._layout(table)
        if table is None or not self._settings.configuration:
            return
        current = table.metadata().configuration
        ignored = {
            key: value
            for key, value in self._settings.configuration.items()
            if current.get(key) != value
        }
        if ignored:
            log.warning(
                "The Delta table %s exists: its table properties stay as they are, and the "
                "options %s (applied only when the sink creates a table) are ignored",
                self._target.uri,
                ", ".join(f"{key}={value}" for key, value in sorted(ignored.items())),
            )

    def _read(self, *, error: type[mb.MicrobatchError] = mb.RetriableError) -> DeltaTable | None:
        """The table at its latest version (``None`` when there is none yet): one handle kept
        for the run and brought up to date (a few ms), as a new handle replays the log since
        the last checkpoint (tens of ms on a busy table). A store that cannot be reached
        raises ``error`` (a ``RetriableError`` mid-batch: the batch runs again)."""
        if self._table is None:
            self._table = self._target.open(error=error)
        else:
            self._target.refresh(self._table)
        return self._table

    # -- the contract -----------------------------------------------------------------------
    def part_writer(self) -> mb.PartWriter:
        from ._part_writer import DeltaPartWriter

        layout = self._planned or self._layout(self._read())
        self._planned = None
        self._written = layout
        return DeltaPartWriter(
            self._target,
            layout.fit.schema,
            layout.fit.partition_by,
            staging=layout.staged,
            max_records_per_file=self._settings.max_records_per_file,
        )

    def commit(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        files = files_of(messages)
        self._commit_id = uuid.uuid4().hex
        last: Exception | None = None
        for attempt in range(COMMIT_ATTEMPTS):
            if attempt:
                time.sleep(0.05 * 2**attempt)
            table = self._read()
            if self._applied(table, batch_id):
                log.info(
                    "Skipping batch %d of query %s: the Delta table %s already holds it "
                    "(application transaction version %s)",
                    batch_id,
                    self._query_id,
                    self._target.uri,
                    table.transaction_version(self._query_id) if table is not None else None,
                )
                self._discard(files, batch_id)
                return
            try:
                fit = self.fit(table)
            except mb.SchemaError:
                self._discard(files, batch_id)
                raise
            self._check_layout(fit, files, batch_id)
            try:
                self._commit_once(table, fit, files, batch_id)
            except Exception as error:
                if is_violation(error):
                    raise mb.SinkError(
                        f"batch {batch_id} has rows that violate a CHECK constraint or "
                        f"invariant of the Delta table {self._target.uri}; nothing was "
                        f"committed: {error}"
                    ) from error
                if isinstance(error, OSError):  # the store, or its answer, went away
                    if self._applied_after(error, batch_id, files):
                        return
                    raise mb.RetriableError(
                        f"could not commit batch {batch_id} to the Delta table "
                        f"{self._target.uri}: {storage_error_text(error)}; the batch runs again"
                    ) from error
                if not is_conflict(error):
                    # the batch may be in all the same: a post-commit hook (a checkpoint)
                    # failed after the commit, or another run's commit of the batch deleted
                    # the staged files this one was reading
                    if self._applied_after(error, batch_id, files):
                        return
                    raise
                last = error
                self._table = None  # read the table anew after a lost race
                fresh = self._read()
                if self._applied(fresh, batch_id):  # ours landed, or another run's (raises)
                    self._kept(fresh, batch_id, files, error)
                    return
                log.info(
                    "Batch %d of query %s conflicted with another commit to %s (attempt %d "
                    "of %d): %s",
                    batch_id,
                    self._query_id,
                    self._target.uri,
                    attempt + 1,
                    COMMIT_ATTEMPTS,
                    self._target.scrub(storage_error_text(error)),
                )
                continue
            self._drop_staging(batch_id, files)
            # the next batch's parts go in as this one's did, unless this commit changed the
            # table (a change by another writer is caught by the next commit's check)
            self._planned = _Layout(fit, self._staged(fit)) if fit.change == "none" else None
            return
        self._discard(files, batch_id)  # the engine writes the batch again
        raise mb.RetriableError(
            f"batch {batch_id} could not be committed to {self._target.uri}: other writers' "
            f"commits conflicted with it {COMMIT_ATTEMPTS} times (last: {last})"
        ) from last

    def abort(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        """Delete the parts' files, unless the batch is in the table after all (the engine
        aborts after any error of ``commit``, which may come after the commit landed): its
        files are then kept, and only staged copies are deleted."""
        from ._part_writer import STAGING_FOLDER

        files = files_of(messages, strict=False)
        try:
            self._table = None
            committed = self._applied(self._read(), batch_id)
        except Exception as error:  # cannot tell: keep the files (vacuum removes orphans)
            log.warning(
                "Keeping the files of aborted batch %d in %s: the table could not be read (%s)",
                batch_id,
                self._target.uri,
                self._target.scrub(storage_error_text(error)),
            )
            committed = True
        if committed:
            files = [file for file in files if file.path.startswith(STAGING_FOLDER + "/")]
        self._discard(files, batch_id)

    # -- helpers ----------------------------------------------------------------------------
    def _applied_after(self, error: BaseException, batch_id: int, files: Sequence[AddFile]) -> bool:
        """After a commit failed with ``error`` (a store error, or any but a lost race): True
        when this commit landed all the same; another run's commit of the batch raises a
        ``SinkError``; False when the batch is not in the table, or the table cannot be read
        (the retry's transaction check skips the batch if it did land)."""
        self._table = None
        try:
            fresh = self._read()
        except mb.RetriableError:
            return False
        if not self._applied(fresh, batch_id):
            return False
        self._kept(fresh, batch_id, files, error)
        return True

    def _kept(
        self,
        table: DeltaTable | None,
        batch_id: int,
        files: Sequence[AddFile],
        error: BaseException,
    ) -> None:
        """The batch is in ``table`` although its commit failed with ``error``: when its own
        commit landed (the table names its data files, or a recent ``commitInfo`` holds this
        ``commit()``'s id: staged files are rewritten, an empty batch has none), log it and
        drop the staged copies; when another run's did, delete the files and raise a
        ``SinkError``."""
        if not holds_any(table, files) and not self._in_history(table, batch_id, error):
            self._discard(files, batch_id)
            raise mb.SinkError(
                f"another run of query {self._query_id} committed batch {batch_id} "
                f"to {self._target.uri} concurrently: this run stops (only one run of "
                "a query may write at a time)"
            ) from error
        log.info(
            "Batch %d of query %s is in the Delta table %s: its commit landed although "
            "delta-rs reported %s",
            batch_id,
            self._query_id,
            self._target.uri,
            self._target.scrub(storage_error_text(error)),
        )
        self._drop_staging(batch_id, files)
        self._planned = None

    def _in_history(self, table: DeltaTable | None, batch_id: int, error: BaseException) -> bool:
        """True when one of the table's latest commits is one of this ``commit()`` call's (a
        store that cannot be read raises a ``RetriableError``: the batch is in the table, so
        the engine's retry skips it)."""
        if table is None or self._commit_id is None:
            return False
        try:
            history = table.history(_HISTORY_SEARCHED)
        except Exception as cause:
            raise mb.RetriableError(
                f"batch {batch_id} is in the Delta table {self._target.uri} although its "
                f"commit failed ({storage_error_text(error)}), and its history could not be "
                f"read: {storage_error_text(cause)}"
            ) from cause
        return any(info.get(COMMIT_ID_KEY) == self._commit_id for info in history)

    def _applied(self, table: DeltaTable | None, batch_id: int) -> bool:
        if table is None:
            return False
        version = table.transaction_version(self._query_id)
        return version is not None and version >= batch_id

    def _check_layout(self, fit: Fit, files: Sequence[AddFile], batch_id: int) -> None:
        """Refuse to commit parts written for another schema or partitioning than the table's
        now (another writer changed it in between): the batch is written again."""
        from ._part_writer import STAGING_FOLDER

        layout = self._written
        staged = self._staged(fit)
        if layout is None:  # parts written by another writer of this run (or a replay's)
            same = all(file.path.startswith(STAGING_FOLDER + "/") == staged for file in files)
        else:
            same = (
                layout.fit.schema.equals(fit.schema, check_metadata=False)
                and layout.fit.partition_by == fit.partition_by
                and layout.staged == staged
            )
        if not same:
            self._discard(files, batch_id)
            raise mb.RetriableError(
                f"the schema or partitioning of {self._target.uri} changed while batch "
                f"{batch_id} was written: the batch is written again"
            )

    def _properties(self, batch_id: int, *, own_retries: bool = False) -> CommitProperties:
        return commit_properties(
            self._query_id,
            batch_id,
            self._settings.user_metadata,
            max_commit_retries=0 if own_retries else None,
            commit_id=self._commit_id,
        )

    def _commit_once(
        self, table: DeltaTable | None, fit: Fit, files: Sequence[AddFile], batch_id: int
    ) -> None:
        settings = self._settings
        if settings.merge:
            from ._merge import commit_merge

            commit_merge(
                self._target,
                table,
                files,
                fit.schema,
                settings.merge_keys,
                fit.partition_by,
                self._properties(batch_id),
                settings.configuration,
                merge_schema=settings.merge_schema,
                columns=self._schema.names,
            )
            return
        if table is None:
            self._create(fit, files, batch_id)
        elif self._staged(fit):
            self._rewrite_staged(table, fit, files, batch_id)
        else:
            table.create_write_transaction(
                [file.to_action() for file in files],
                mode="overwrite" if settings.complete else "append",
                schema=fit.schema,
                partition_by=list(fit.partition_by) or None,
                commit_properties=self._properties(batch_id, own_retries=settings.complete),
            )

    def _create(self, fit: Fit, files: Sequence[AddFile], batch_id: int) -> None:
        from deltalake import Schema
        from deltalake.transaction import create_table_with_add_actions

        create_table_with_add_actions(
            self._target.uri,
            Schema.from_arrow(fit.schema),
            [file.to_action() for file in files],
            mode="error",
            partition_by=list(fit.partition_by) or None,
            configuration=dict(self._settings.configuration) or None,
            storage_options=self._target.options(),
            commit_properties=self._properties(batch_id),
        )

    def _rewrite_staged(
        self, table: DeltaTable, fit: Fit, files: Sequence[AddFile], batch_id: int
    ) -> None:
        """The staged path: the staged files, read back as one stream, written by
        ``write_deltalake`` in one commit that changes the schema (and partitioning), or that
        checks the rows against the table's constraints."""
        from deltalake import write_deltalake

        from ._part_writer import read_files

        rows = read_files(self._target, files, fit.schema)
        if self._settings.complete:
            write_deltalake(
                table,
                rows,
                mode="overwrite",
                schema_mode="overwrite" if fit.change == "replace" else None,
                partition_by=list(fit.partition_by) or None,
                commit_properties=self._properties(batch_id, own_retries=True),
            )
        else:
            write_deltalake(
                table,
                rows,
                mode="append",
                schema_mode="merge" if fit.change == "evolve" else None,
                commit_properties=self._properties(batch_id),
            )

    def _discard(self, files: Sequence[AddFile], batch_id: int) -> None:
        """Delete files no commit refers to (best effort: vacuum removes what is left)."""
        if not files:
            self._drop_staging(batch_id, files)
            return
        from ._part_writer import delete_files

        try:
            delete_files(self._target, files)
        except Exception as error:  # cleanup must not hide the reason the batch stopped
            log.warning(
                "Could not delete %d uncommitted files of batch %d in %s: %s",
                len(files),
                batch_id,
                self._target.uri,
                self._target.scrub(storage_error_text(error)),
            )
        self._drop_staging(batch_id, files)

    def _drop_staging(self, batch_id: int, files: Sequence[AddFile]) -> None:
        """Remove the batch's staging folder (files of earlier, interrupted attempts too)."""
        import pyarrow.fs as pafs

        from ._part_writer import STAGING_FOLDER

        staged = self._written is not None and self._written.staged
        if not staged and not any(file.path.startswith(STAGING_FOLDER + "/") for file in files):
            return

        folder = f"{STAGING_FOLDER}/{self._query_id}/{batch_id}"
        try:
            if self._target.is_local:  # the object-store handler leaves local folders behind
                local = os.path.join(self._target.uri, *folder.split("/"))
                shutil.rmtree(local, ignore_errors=True)
                with contextlib.suppress(OSError):  # the query's folder, once empty
                    os.rmdir(os.path.dirname(local))
                return
            filesystem = self._target.filesystem()
            if filesystem.get_file_info(folder).type != pafs.FileType.NotFound:
                filesystem.delete_dir(folder)
        except Exception as error:  # leftovers under an underscore folder are invisible
            text = self._target.scrub(storage_error_text(error))
            log.warning("Could not remove %s in %s: %s", folder, self._target.uri, text)
