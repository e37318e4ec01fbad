"""One version of a Delta table's log, read straight from its commit file.

The files a version adds or removes are cheapest to learn from ``_delta_log/<N:020d>.json``
(about 0.15 ms a version) rather than from a snapshot of the whole table. :func:`read_commit`
reads one such entry through the table's filesystem and sorts its actions into what the source
needs: the data-change ``add`` and ``remove`` files (in log order), how many files were only
rearranged (``dataChange=false``: OPTIMIZE, ZORDER), the ``metaData`` and ``protocol``
actions, and the operation and time from ``commitInfo``.

Paths in the log are URIs (RFC 2396): they are decoded here, so a :class:`LogFile`'s path is
the file's path relative to the table root (or an absolute URI, as Delta allows).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from microbatch import RetriableError, SourceError

from ._table import log_entry_name, storage_error_text

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

__all__ = [
    "COLUMN_MAPPING_KEY",
    "SUPPORTED_READER_FEATURES",
    "Commit",
    "LogFile",
    "column_mapping_mode",
    "commit_file_time_ms",
    "commit_time_ms",
    "commit_versions",
    "metadata_schema",
    "parse_commit",
    "read_commit",
    "unsupported_reader_features",
    "variant_columns",
]

log = logging.getLogger("microbatch.delta")

COLUMN_MAPPING_KEY = "delta.columnMapping.mode"
SUPPORTED_READER_FEATURES = frozenset(
    {
        "deletionVectors",  # refused per file: only files that carry one cannot be read
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "checkpointProtection",
        "variantType",  # refused per column: delta-rs declares it on every table-features table
        "variantType-preview",
    }
)
"""Reader features a table may declare and still be read (column mapping is refused with its
own message, variant columns by :func:`variant_columns`)."""


@dataclass(frozen=True)
class LogFile:
    """A data file named by an ``add`` or ``remove`` action."""

    path: str
    """Decoded: relative to the table root, ``/``-separated (or an absolute URI)."""
    size: int
    partition_values: tuple[tuple[str, str | None], ...]
    """Delta's text of each partition value, as the log spells it."""
    modification_time: int
    has_deletion_vector: bool = False


@dataclass(frozen=True)
class Commit:
    """What one version of the log holds, sorted for the streaming source."""

    version: int
    adds: tuple[LogFile, ...]
    """The ``add`` actions with ``dataChange=true``, in log order."""
    removes: tuple[LogFile, ...]
    """The ``remove`` actions with ``dataChange=true``, in log order."""
    rearranged: int
    """How many ``add``/``remove`` actions had ``dataChange=false`` (OPTIMIZE and the like)."""
    metadata: Mapping[str, Any] | None
    protocol: Mapping[str, Any] | None
    operation: str | None
    """``commitInfo.operation`` (``WRITE``, ``DELETE``, ``OPTIMIZE``...), when recorded."""
    timestamp_ms: int | None
    """``commitInfo.inCommitTimestamp`` or ``commitInfo.timestamp``, when recorded."""
    cdc_files: int = 0
    cdc_bytes: int = 0

    @property
    def operation_text(self) -> str:
        return self.operation or "unknown operation"


def _file(action: Mapping[str, Any]) -> LogFile:
    values = action.get("partitionValues") or {}
    return LogFile(
        path=unquote(str(action["path"])),
        size=int(action.get("size") or 0),
        partition_values=tuple((str(k), None if v is None else str(v)) for k, v in values.items()),
        modification_time=int(action.get("modificationTime") or 0),
        has_deletion_vector=action.get("deletionVector") is not None,
    )


def parse_commit(version: int, text: str, where: str) -> Commit:
    """The :class:`Commit` of a log entry's text (``where`` names the file in errors)."""
    adds: list[LogFile] = []
    removes: list[LogFile] = []
    rearranged = 0
    cdc_files = cdc_bytes = 0
    metadata: Mapping[str, Any] | None = None
    protocol: Mapping[str, Any] | None = None
    operation: str | None = None
    timestamp: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except json.JSONDecodeError as error:
            raise SourceError(
                f"The Delta log entry {where} is not valid JSON at line {number} ({error.msg}): "
                "the table's log is damaged"
            ) from None
        kind = "add" if "add" in action else "remove" if "remove" in action else None
        if kind is not None:
            file = action[kind]
            if file.get("dataChange", True):
                (adds if kind == "add" else removes).append(_file(file))
            else:
                rearranged += 1
        elif "cdc" in action:
            cdc_files += 1
            cdc_bytes += int(action["cdc"].get("size") or 0)
        elif "metaData" in action:
            metadata = action["metaData"]
        elif "protocol" in action:
            protocol = action["protocol"]
        elif "commitInfo" in action:
            info = action["commitInfo"] or {}
            operation = info.get("operation")
            stamp = info.get("inCommitTimestamp", info.get("timestamp"))
            timestamp = int(stamp) if stamp is not None else None
    return Commit(
        version=version,
        adds=tuple(adds),
        removes=tuple(removes),
        rearranged=rearranged,
        metadata=metadata,
        protocol=protocol,
        operation=operation,
        timestamp_ms=timestamp,
        cdc_files=cdc_files,
        cdc_bytes=cdc_bytes,
    )


def read_commit(fs: pafs.FileSystem, version: int) -> Commit | None:
    """Version ``version`` of the table whose root ``fs`` is; ``None`` when the entry does not
    exist (not committed yet, or removed by log clean-up after a checkpoint)."""
    name = log_entry_name(version)
    try:
        with fs.open_input_stream(name) as stream:
            raw = stream.read()
    except FileNotFoundError:
        return None
    except OSError as error:  # an object store away: running the batch again may cure it
        raise RetriableError(
            f"Reading the Delta log entry {name} failed: {storage_error_text(error)}"
        ) from error
    return parse_commit(version, raw.decode("utf-8"), name)


def commit_versions(fs: pafs.FileSystem) -> list[int]:
    """The versions whose commit files are in ``_delta_log/`` now, in order (a listing)."""
    import pyarrow.fs as pafs

    versions: list[int] = []
    for info in fs.get_file_info(pafs.FileSelector("_delta_log", allow_not_found=True)):
        name = info.path.rsplit("/", 1)[-1]
        stem, _, ext = name.partition(".")
        if ext == "json" and stem.isdigit() and len(stem) == 20:
            versions.append(int(stem))
    versions.sort()
    return versions


def commit_file_time_ms(fs: pafs.FileSystem, version: int) -> int | None:
    """The modification time of a version's commit file, in epoch milliseconds."""
    info = fs.get_file_info(log_entry_name(version))
    if info.mtime is None:
        return None
    return int(info.mtime.timestamp() * 1000)


def commit_time_ms(fs: pafs.FileSystem, version: int, commit: Commit | None = None) -> int:
    """When ``version`` was committed: its ``commitInfo`` time (in-commit timestamp, else
    ``timestamp``), else its commit file's modification time (``commit``: the version's
    :class:`Commit` when already read)."""
    if commit is None:
        commit = read_commit(fs, version)
    if commit is not None and commit.timestamp_ms is not None:
        return commit.timestamp_ms
    return commit_file_time_ms(fs, version) or 0


def metadata_schema(metadata: Mapping[str, Any]) -> pa.Schema:
    """The Arrow schema of a ``metaData`` action's ``schemaString``."""
    import pyarrow as pa
    from deltalake import Schema

    return pa.schema(Schema.from_json(str(metadata["schemaString"])).to_arrow())


def column_mapping_mode(configuration: Mapping[str, Any] | None) -> str:
    """The table's ``delta.columnMapping.mode`` (``none`` when unset)."""
    return str((configuration or {}).get(COLUMN_MAPPING_KEY, "none")).lower()


def variant_columns(schema_json: str) -> list[str]:
    """The (dotted) names of the ``variant`` columns of a Delta schema's JSON, at any depth."""
    found: list[str] = []

    def visit(kind: Any, name: str) -> None:
        if kind == "variant":
            found.append(name)
        elif isinstance(kind, Mapping):
            if kind.get("type") == "struct":
                for child in kind.get("fields") or ():
                    visit(
                        child.get("type"), f"{name}.{child.get('name')}" if name else child["name"]
                    )
            elif kind.get("type") == "array":
                visit(kind.get("elementType"), f"{name}.element")
            elif kind.get("type") == "map":
                visit(kind.get("keyType"), f"{name}.key")
                visit(kind.get("valueType"), f"{name}.value")

    visit(json.loads(schema_json), "")
    return found


def unsupported_reader_features(features: Any) -> list[str]:
    """The reader features in ``features`` this source cannot honour, sorted."""
    return sorted(str(f) for f in (features or ()) if str(f) not in SUPPORTED_READER_FEATURES)
