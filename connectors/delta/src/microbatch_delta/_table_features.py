"""What a Delta table made by another writer asks of the sink, read from its protocol and metadata.

The sink's fast path writes parquet files itself and commits them as they are: right for a plain
table, wrong for a table whose writers must do more. By feature:

- CHECK constraints (``delta.constraints.*``) and column invariants (``delta.invariants``): the
  rows must be checked. The batch is then written by delta-rs's own writer (``write_deltalake``
  or ``merge``), which enforces them: a row that violates one fails the batch, nothing committed;
- ``delta.appendOnly=true``: a complete-mode overwrite or a merge removes files, which such a
  table forbids: refused before any batch;
- column mapping, generated columns, identity columns and writer features this sink does not
  know: refused, naming the feature, before anything is written (writing them as plain files
  would store columns under the wrong names, or without their computed values).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import microbatch as mb

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = [
    "CHANGE_FEED_COLUMNS",
    "TableNeeds",
    "check_change_feed_columns",
    "check_new_table",
    "table_needs",
]

KNOWN_WRITER_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "timestampNtz",
        "deletionVectors",
        "domainMetadata",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "variantType",
        "variantType-preview",
    }
)
"""Writer features whose tables the sink writes correctly (with the checks below)."""

_REFUSED = {
    "columnMapping": "column mapping (columns stored under physical names)",
    "generatedColumns": "generated columns (values computed by the writer)",
    "identityColumns": "identity columns (values assigned by the writer)",
    "rowTracking": "row tracking (row ids assigned by the writer)",
}


CHANGE_FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
"""The columns the change data feed adds to a table's rows: a table with the feed may not
have them."""


def check_change_feed_columns(
    names: Sequence[str], configuration: Mapping[str, str], path: str
) -> None:
    """Refuse, as Delta does, to create a table with the change data feed on
    (``delta.enableChangeDataFeed=true`` in ``configuration``) whose columns ``names`` include
    the feed's own (``ConfigurationError``)."""
    if configuration.get("delta.enableChangeDataFeed", "").strip().lower() != "true":
        return
    clashing = [name for name in names if name.lower() in CHANGE_FEED_COLUMNS]
    if clashing:
        raise mb.ConfigurationError(
            f"[DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS] Unable to enable Change Data "
            f"Capture on the table at {path}. The table already contains reserved columns "
            f"{clashing} that will be used internally as metadata for the table's Change "
            "Data Feed. To enable Change Data Feed on the table rename/drop these columns."
        )


def check_new_table(
    names: Sequence[str], configuration: Mapping[str, str], path: str, *, removes: bool
) -> None:
    """Refuse table properties (``delta.*`` options) the sink cannot honour when it creates the
    table at ``path`` with columns ``names`` (``ConfigurationError``); ``removes`` when the
    sink's later commits remove files (complete mode, merges)."""
    check_change_feed_columns(names, configuration, path)
    on = {key: value.strip().lower() for key, value in configuration.items()}
    if removes and on.get("delta.appendOnly") == "true":
        raise mb.ConfigurationError(
            f"option 'delta.appendOnly=true' for the table at {path}: complete output mode and "
            "mode=merge remove or rewrite files, which an append-only table forbids"
        )
    if on.get("delta.columnMapping.mode", "none") != "none":
        raise mb.ConfigurationError(
            f"option 'delta.columnMapping.mode' for the table at {path}: the delta sink writes "
            "tables without column mapping; leave the option out"
        )
    constraints = sorted(key for key in configuration if key.startswith("delta.constraints."))
    if constraints:
        raise mb.ConfigurationError(
            f"option '{constraints[0]}' for the table at {path}: CHECK constraints are not "
            "table properties to set at creation; add them to the table with "
            "ALTER TABLE ... ADD CONSTRAINT (DeltaTable.alter.add_constraint)"
        )


@dataclass(frozen=True)
class TableNeeds:
    """What writing into a table needs: ``checks`` when its rows must pass constraints or
    invariants (written by delta-rs's writer then)."""

    checks: bool = False


def table_needs(table: DeltaTable, path: str, *, removes: bool) -> TableNeeds:
    """What writing into ``table`` (at ``path``) needs; ``removes`` when the sink's commits
    remove files (complete mode, merges). Raises ``UnsupportedOperationError`` naming the
    feature for a table the sink cannot write correctly."""
    protocol = table.protocol()
    configuration = table.metadata().configuration
    features = set(protocol.writer_features or ())
    refused = [text for name, text in _REFUSED.items() if name in features]
    unknown = sorted(features - KNOWN_WRITER_FEATURES - set(_REFUSED))
    if protocol.min_writer_version > 7:
        unknown.append(f"writer version {protocol.min_writer_version}")
    if configuration.get("delta.columnMapping.mode", "none").lower() != "none":
        refused.append(_REFUSED["columnMapping"])
    checks = any(key.startswith("delta.constraints.") for key in configuration)
    for field in table.schema().fields:
        metadata = field.metadata or {}
        if "delta.generationExpression" in metadata:
            refused.append(f"{_REFUSED['generatedColumns']}: column '{field.name}'")
        if any(key.startswith("delta.identity.") for key in metadata):
            refused.append(f"{_REFUSED['identityColumns']}: column '{field.name}'")
        if "delta.invariants" in metadata:
            checks = True
    refused.extend(f"the writer feature '{name}'" for name in unknown)
    if refused:
        raise mb.UnsupportedOperationError(
            f"The delta sink cannot write the Delta table at {path}: it uses "
            f"{'; '.join(dict.fromkeys(refused))}, which the sink does not support. Nothing "
            "was written; write the table with a writer that supports it."
        )
    if removes and configuration.get("delta.appendOnly", "false").lower() == "true":
        raise mb.UnsupportedOperationError(
            f"The Delta table at {path} is append-only (delta.appendOnly=true): complete output "
            "mode and mode=merge would remove or rewrite its files. Use append output mode, or "
            "unset the table property."
        )
    return TableNeeds(checks=checks)
