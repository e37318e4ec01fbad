"""The options of the ``delta`` sink, with Delta Lake's own names.

``path``, ``storageOptions`` and ``storage.*`` say where the table is (see ``_table``);
``delta.*`` options are table properties, set when the sink creates the table (as Delta's
``DataFrameWriter`` does: ``.option("delta.enableChangeDataFeed", "true")``).
"""

from __future__ import annotations

from microbatch import Option, Options, OptionSpec, Rule

from ._table import PATH_OPTION, STORAGE_OPTIONS_OPTION, STORAGE_PREFIX

__all__ = ["SINK_OPTIONS", "TABLE_PROPERTY_PREFIX", "table_properties"]

TABLE_PROPERTY_PREFIX = "delta."
"""Options under this prefix are table properties of a table the sink creates."""


def table_properties(opts: Options) -> dict[str, str]:
    """The ``delta.*`` options as Delta table properties (``{"delta.appendOnly": "true"}``)."""
    return {
        f"{TABLE_PROPERTY_PREFIX}{key}": _property_text(value)
        for key, value in opts.under(TABLE_PROPERTY_PREFIX).items()
    }


def _property_text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _keys_given_for_merge(options: Options) -> bool:
    return options.mode != "merge" or bool(options.merge_keys)


def _keys_only_for_merge(options: Options) -> bool:
    return options.mode == "merge" or not options.merge_keys


def _property_keys_named(options: Options) -> bool:
    return all(key.strip() for key in options.under(TABLE_PROPERTY_PREFIX))


SINK_OPTIONS = OptionSpec(
    PATH_OPTION,
    STORAGE_OPTIONS_OPTION,
    Option(
        name="mode",
        default="append",
        choices=("append", "merge"),
        doc=(
            "append (default): each batch adds its rows (complete mode: replaces the table); "
            "merge: each batch upserts its rows by 'mergeKeys' (also update mode)."
        ),
    ),
    Option(
        name="mergeKeys",
        type="list",
        doc="With mode=merge: the columns that identify a row (comma-separated or a list).",
    ),
    Option(
        name="mergeSchema",
        type="bool",
        default=False,
        doc=(
            "Add the batch's new columns to the table's schema instead of failing (Delta's "
            "schema evolution); columns the batch lacks are always written as nulls."
        ),
    ),
    Option(
        name="overwriteSchema",
        type="bool",
        default=False,
        doc=(
            "Complete mode only: each batch's schema (and partition_by) replaces the table's, "
            "instead of failing when they differ."
        ),
    ),
    Option(
        name="userMetadata",
        doc="A text recorded as 'userMetadata' in the commitInfo of every commit the sink makes.",
    ),
    Option(
        name="maxRecordsPerFile",
        type="int",
        minimum=1,
        doc="At most this many rows in one data file (default: no limit).",
    ),
    prefixes=(STORAGE_PREFIX, TABLE_PROPERTY_PREFIX),
    rules=(
        Rule(
            _keys_only_for_merge,
            "option 'mergeKeys' only applies with mode=merge (.option('mode', 'merge'))",
            names=("mode", "mergeKeys"),
        ),
        Rule(
            _keys_given_for_merge,
            "mode=merge needs 'mergeKeys': the columns that identify a row (e.g. "
            ".option('mergeKeys', 'id'))",
            names=("mode", "mergeKeys"),
        ),
        Rule(
            _property_keys_named,
            "a 'delta.' option needs a table property name after the prefix "
            "(e.g. 'delta.appendOnly')",
        ),
    ),
)
"""The sink's declared options."""
