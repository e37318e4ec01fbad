"""What a Delta source stream does with one version of the table, with Delta's texts.

:func:`classify` decides from the options (:class:`Policy`) whether a version's files are read
(appends; the files a rewrite adds, with ``ignoreChanges``), skipped (only rearranged files,
``dataChange=false``; deletes with ``ignoreDeletes``; any removal with ``skipChangeCommits``),
or stop the stream: a version that removes data (DELTA_SOURCE_IGNORE_DELETE,
DELTA_SOURCE_TABLE_IGNORE_CHANGES), changes the schema beyond what the stream reads
(DELTA_SCHEMA_CHANGED_WITH_VERSION), turns on column mapping, needs reader features this
source lacks, or adds files with deletion vectors. Messages also name the operation from the
version's ``commitInfo``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pyarrow as pa

from microbatch import SourceError

from ._log import Commit, LogFile, column_mapping_mode, metadata_schema, unsupported_reader_features

__all__ = [
    "SKIP_KINDS",
    "Policy",
    "Verdict",
    "classify",
    "column_mapping_error",
    "deletion_vector_error",
    "feature_error",
    "log_skip",
    "metadata_error",
    "not_a_table",
    "readable_with",
    "schema_changed_error",
]

log = logging.getLogger("microbatch.delta")


@dataclass(frozen=True)
class Policy:
    """What the options say about versions that remove data."""

    ignore_deletes: bool = False
    ignore_changes: bool = False
    skip_change_commits: bool = False
    change_feed: bool = False
    fail_on_data_loss: bool = True


@dataclass(frozen=True)
class Verdict:
    files: tuple[LogFile, ...] = ()
    kind: str = "data"
    """``data``, ``empty``, ``rearranged``, ``deletes-skipped``, ``changes-skipped``,
    ``changes-reemitted``, ``changes`` (change feed)."""
    error: SourceError | None = None


SKIP_KINDS = {
    "rearranged": "numSkippedRearrangeCommits",
    "deletes-skipped": "numSkippedDeleteCommits",
    "changes-skipped": "numSkippedChangeCommits",
    "changes-reemitted": "numReemittedChangeCommits",
}


def readable_with(schema: pa.Schema, read: pa.Schema) -> bool:
    """Whether data written with ``schema`` reads in the stream's ``read`` schema: each of its
    columns is in ``read`` with the same type (structs field by field) and columns only ``read``
    has are nullable (Delta's read-compatibility, without widening)."""
    return _struct_readable(list(schema), list(read))


def _struct_readable(fields: list[pa.Field], read: list[pa.Field]) -> bool:
    by_name = {f.name: f for f in read}
    names = {f.name for f in fields}
    for f in fields:
        target = by_name.get(f.name)
        if target is None or (f.nullable and not target.nullable):
            return False
        if not _type_readable(f.type, target.type):
            return False
    return all(f.nullable for f in read if f.name not in names)


def _type_readable(written: pa.DataType, read: pa.DataType) -> bool:
    if pa.types.is_struct(written) and pa.types.is_struct(read):
        return _struct_readable(list(written.fields), list(read.fields))
    if pa.types.is_list(written) and pa.types.is_list(read):
        return _type_readable(written.value_type, read.value_type)
    if pa.types.is_map(written) and pa.types.is_map(read):
        return _type_readable(written.key_type, read.key_type) and _type_readable(
            written.item_type, read.item_type
        )
    return bool(written.equals(read))


def schema_changed_error(
    version: int, read: pa.Schema, written: pa.Schema, path: str
) -> SourceError:
    """Delta's DELTA_SCHEMA_CHANGED_WITH_VERSION text."""
    return SourceError(
        f"Detected schema change in version {version} of the Delta table at {path}:\n"
        f"streaming source schema: {_show(read)}\n\n"
        f"data file schema: {_show(written)}\n\n"
        "Please try restarting the query. If this issue repeats across query restarts without "
        "making progress, you have made an incompatible schema change and need to start your "
        "query from scratch using a new checkpoint directory."
    )


def _show(schema: pa.Schema) -> str:
    return "root\n" + "\n".join(
        f"-- {f.name}: {f.type} (nullable = {str(f.nullable).lower()})" for f in schema
    )


def _first(files: tuple[LogFile, ...]) -> str:
    return files[0].path if files else "(unknown)"


def classify(
    commit: Commit,
    policy: Policy,
    read_schema: pa.Schema,
    partition_columns: tuple[str, ...],
    path: str,
) -> Verdict:
    """What the stream does with ``commit``: the files to emit and the kind, or an error."""
    error = metadata_error(commit, read_schema, partition_columns, path)
    if error is not None:
        return Verdict(error=error)
    return _classify_files(commit, policy, path)


def metadata_error(
    commit: Commit, read_schema: pa.Schema, partition_columns: tuple[str, ...], path: str
) -> SourceError | None:
    """The error for a commit whose ``protocol`` or ``metaData`` the stream cannot read on
    with ``read_schema`` (``None`` when it can)."""
    version = commit.version
    if commit.protocol is not None:
        missing = unsupported_reader_features(commit.protocol.get("readerFeatures"))
        if missing:
            return feature_error(path, missing, version)
    if commit.metadata is not None:
        mode = column_mapping_mode(commit.metadata.get("configuration"))
        if mode != "none":
            return column_mapping_error(path, mode, version)
        written = metadata_schema(commit.metadata)
        columns = tuple(commit.metadata.get("partitionColumns") or ())
        if columns != partition_columns or not readable_with(written, read_schema):
            return schema_changed_error(version, read_schema, written, path)
    return None


def _classify_files(commit: Commit, policy: Policy, path: str) -> Verdict:
    version = commit.version
    if policy.change_feed:
        return Verdict(kind="changes")
    if commit.removes:
        allow_changes = policy.ignore_changes or policy.skip_change_commits
        allow_deletes = allow_changes or policy.ignore_deletes
        operation = commit.operation_text
        if commit.adds and not allow_changes:
            return Verdict(
                error=SourceError(
                    f"Detected a data update (for example {_first(commit.removes)}) in the "
                    f"source table at version {version} (operation {operation}). This is "
                    "currently not supported. If you'd like to ignore updates, set the option "
                    "'skipChangeCommits' to 'true'. If you would like the data update to be "
                    "reflected, please restart this query with a fresh checkpoint directory. "
                    f"The source table can be found at path {path}."
                )
            )
        if not commit.adds and not allow_deletes:
            return Verdict(
                error=SourceError(
                    f"Detected deleted data (for example {_first(commit.removes)}) from "
                    f"streaming source at version {version} (operation {operation}). This is "
                    "currently not supported. If you'd like to ignore deletes, set the option "
                    "'ignoreDeletes' to 'true'. The source table can be found at path "
                    f"{path}."
                )
            )
        if policy.skip_change_commits:
            return Verdict(kind="changes-skipped")
        if commit.adds:
            return _with_files(commit, "changes-reemitted", path)
        return Verdict(kind="deletes-skipped")
    if commit.adds:
        return _with_files(commit, "data", path)
    return Verdict(kind="rearranged" if commit.rearranged else "empty")


def _with_files(commit: Commit, kind: str, path: str) -> Verdict:
    for file in commit.adds:
        if file.has_deletion_vector:
            return Verdict(error=deletion_vector_error(path, file.path, commit.version))
    return Verdict(files=commit.adds, kind=kind)


def deletion_vector_error(path: str, file: str, version: int) -> SourceError:
    return SourceError(
        f"The data file {file} of version {version} of the Delta table at {path} has a "
        "deletion vector, which the Delta source cannot apply yet (rows it marks deleted would "
        "be read). Rewrite the table's files without deletion vectors (REORG TABLE ... APPLY "
        "(PURGE)) and set delta.enableDeletionVectors=false, or read the table with a reader "
        "that applies them."
    )


def column_mapping_error(path: str, mode: str, version: int | None = None) -> SourceError:
    where = "" if version is None else f" (since version {version})"
    return SourceError(
        f"The Delta table at {path} uses column mapping (delta.columnMapping.mode={mode}"
        f"{where}), which the Delta source cannot read yet: its data files name columns by "
        "physical names. Read a copy of the table without column mapping."
    )


def feature_error(path: str, features: list[str], version: int | None = None) -> SourceError:
    where = "" if version is None else f" from version {version} on"
    return SourceError(
        f"The Delta table at {path} needs the reader features {', '.join(features)}{where}, "
        "which the Delta source does not support."
    )


def log_skip(path: str, commit: Commit, kind: str) -> None:
    operation = commit.operation_text
    if kind == "rearranged":
        log.info(
            "Delta source %s: version %d (%s) only rearranges data files (dataChange=false): "
            "skipped",
            path,
            commit.version,
            operation,
        )
    elif kind == "deletes-skipped":
        log.warning(
            "Delta source %s: version %d (%s) removes %s: skipped (ignoreDeletes); "
            "the rows it deleted stay in the stream's output",
            path,
            commit.version,
            operation,
            _files(len(commit.removes), "data file"),
        )
    elif kind == "changes-skipped":
        log.warning(
            "Delta source %s: version %d (%s) removes %s and adds %s: skipped "
            "(skipChangeCommits); its changes are not in the stream",
            path,
            commit.version,
            operation,
            _files(len(commit.removes), "data file"),
            _files(len(commit.adds), "data file"),
        )
    elif kind == "changes-reemitted":
        log.warning(
            "Delta source %s: version %d (%s) rewrites data files: %s it adds %s "
            "streamed again (ignoreChanges; unchanged rows come again, deleted rows are not "
            "reported)",
            path,
            commit.version,
            operation,
            "the file" if len(commit.adds) == 1 else f"the {len(commit.adds)} files",
            "is" if len(commit.adds) == 1 else "are",
        )


def _files(count: int, noun: str) -> str:
    """``1 data file``, ``2 data files``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def not_a_table(path: str) -> SourceError:
    return SourceError(
        f"{path} is not a Delta table: it has no _delta_log folder with a commit. Check the "
        "path (a Delta table's folder holds _delta_log/), or write the table first."
    )
