"""The options of the ``jdbc`` sink, with Spark's JDBC names where Spark has one."""

from __future__ import annotations

import re

from microbatch import Option, Options, OptionSpec, Rule
from microbatch.ledger import LEDGER_TABLE

from ._connection import CONNECTION_OPTIONS

__all__ = ["ISOLATION_LEVELS", "SINK_OPTIONS"]

_LEDGER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")

ISOLATION_LEVELS = {
    "READ_UNCOMMITTED": "READ UNCOMMITTED",
    "READ_COMMITTED": "READ COMMITTED",
    "REPEATABLE_READ": "REPEATABLE READ",
    "SERIALIZABLE": "SERIALIZABLE",
}
"""Spark's ``isolationLevel`` values and SQLAlchemy's names for them."""


def _plain_ledger_name(value: str) -> str | None:
    if _LEDGER_NAME.fullmatch(value):
        return None
    return "expected a plain SQL name: letters, digits and underscores, optionally 'schema.table'"


def _keys_given_for_upsert(options: Options) -> bool:
    return options.mode != "upsert" or bool(options.get("keys"))


def _keys_only_for_upsert(options: Options) -> bool:
    return options.mode == "upsert" or not options.get("keys")


SINK_OPTIONS = OptionSpec(
    *CONNECTION_OPTIONS,
    Option(
        name="dbtable",
        required=True,
        identity=True,
        doc=(
            "The table written: 'name' or 'schema.name' (each part may be double-quoted: "
            '"My Schema"."odd.name"); never read as SQL.'
        ),
    ),
    Option(
        name="mode",
        default="append",
        choices=("append", "upsert"),
        doc=(
            "append (default): each batch inserts its rows (complete output mode: replaces "
            "the table's rows); upsert: each batch inserts or updates its rows by 'keys' "
            "(also update output mode)."
        ),
    ),
    Option(
        name="keys",
        type="list",
        doc="With mode=upsert: the columns that identify a row (comma-separated or a list).",
    ),
    Option(
        name="createTableIfMissing",
        type="bool",
        default=True,
        doc=(
            "Create the table from the batch's schema when it does not exist (as Spark does); "
            "false fails instead."
        ),
    ),
    Option(
        name="createTableColumnTypes",
        doc=(
            "Column types used instead of the mapped ones when the sink creates the table, "
            "in Spark's syntax: 'name VARCHAR(64), comments TEXT'."
        ),
    ),
    Option(
        name="truncate",
        type="bool",
        default=False,
        doc=(
            "Complete output mode: empty the table (TRUNCATE on PostgreSQL, DELETE elsewhere) "
            "instead of dropping and re-creating it (the default, as Spark's)."
        ),
    ),
    Option(
        name="batchsize",
        type="int",
        default=1000,
        minimum=1,
        doc="Rows per INSERT round trip on the generic (non-COPY) path (Spark's default 1000).",
    ),
    Option(
        name="isolationLevel",
        default="READ_COMMITTED",
        choices=tuple(ISOLATION_LEVELS),
        doc=(
            "The transaction isolation level of each batch's transaction (Spark's names; "
            "ignored by SQLite, whose transactions are serializable)."
        ),
    ),
    Option(
        name="ledgerTable",
        default=LEDGER_TABLE,
        validate=_plain_ledger_name,
        doc=(
            "The table recording which batches were applied (in the same transaction as "
            "their rows); 'name' or 'schema.name'."
        ),
    ),
    rules=(
        Rule(
            _keys_given_for_upsert,
            "mode=upsert needs 'keys': the columns that identify a row (e.g. "
            ".option('keys', 'id'))",
            names=("mode", "keys"),
        ),
        Rule(
            _keys_only_for_upsert,
            "option 'keys' only applies with mode=upsert (.option('mode', 'upsert'))",
            names=("mode", "keys"),
        ),
    ),
)
"""The sink's declared options."""
