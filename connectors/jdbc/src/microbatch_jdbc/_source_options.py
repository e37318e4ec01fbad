"""The options of the ``jdbc`` source, with Spark's names and Spark's texts for refused
combinations; ``incrementalColumn`` and its companions are this connector's own (streaming).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

import microbatch as mb

from ._connection import CONNECTION_OPTIONS
from ._tables import parse_table_name

__all__ = [
    "DEFAULT_FETCHSIZE",
    "SOURCE_OPTIONS",
    "ReadPlan",
    "apply_custom_schema",
    "parse_table_name",
    "read_plan",
]

DEFAULT_FETCHSIZE = 10_000
"""Rows per fetched chunk when ``fetchsize`` is 0 (the driver's choice in Spark)."""

SOURCE_OPTIONS = mb.OptionSpec(
    *CONNECTION_OPTIONS,
    mb.Option(
        name="dbtable",
        identity=True,
        doc=(
            "The table to read: a name, schema-qualified as schema.table (double quotes keep a "
            'dot or a quote inside one part: "my.schema"."t"), always quoted through '
            "SQLAlchemy; or, as in Spark, a parenthesised subquery with an alias "
            "('(SELECT ...) AS sub'), used as written."
        ),
    ),
    mb.Option(
        name="query",
        identity=True,
        doc=(
            "A SELECT whose rows are read, used as written inside "
            "'(<query>) SPARK_GEN_SUBQ_<n>' as Spark does; not with dbtable nor "
            "partitionColumn."
        ),
    ),
    mb.Option(
        name="partitionColumn",
        doc=(
            "A numeric, date or timestamp column splitting a batch read into numPartitions "
            "ranges read in parallel (Spark's stride arithmetic: the first range is open below "
            "and holds the NULLs, the last is open above); needs lowerBound, upperBound and "
            "numPartitions."
        ),
    ),
    mb.Option(
        name="lowerBound",
        doc="With partitionColumn: where the stride starts (a number, a date or a timestamp); "
        "rows below it are read too, by the first range.",
    ),
    mb.Option(
        name="upperBound",
        doc="With partitionColumn: where the stride ends; rows above it are read too, by the "
        "last range.",
    ),
    mb.Option(
        name="numPartitions",
        type="int",
        minimum=1,
        doc="With partitionColumn: how many ranges (reduced to upperBound - lowerBound when "
        "that is smaller, as Spark does).",
    ),
    mb.Option(
        name="fetchsize",
        type="int",
        minimum=0,
        default=0,
        doc=f"Rows fetched per round trip and per Arrow record batch; 0 means {DEFAULT_FETCHSIZE}.",
    ),
    mb.Option(
        name="customSchema",
        doc=(
            "Column types to read some columns as, in Spark's DDL: 'id DECIMAL(38, 0), name "
            "STRING' (STRING, BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, "
            "DECIMAL(p, s), DATE, TIMESTAMP, TIMESTAMP_NTZ, BINARY); the other columns keep "
            "the type mapped from the database."
        ),
    ),
    mb.Option(
        name="incrementalColumn",
        identity=True,
        doc=(
            "Streaming: a strictly increasing numeric or timestamp column; each batch reads "
            "the rows whose value is above the last one read, in its order. An index on it "
            "keeps every trigger cheap. Rows committed out of order can be missed: see "
            "incrementalDelay."
        ),
    ),
    mb.Option(
        name="maxRowsPerTrigger",
        type="int",
        minimum=1,
        doc="Streaming: at most this many rows per batch (rows sharing the batch's last value "
        "come along).",
    ),
    mb.Option(
        name="startingValue",
        doc="Streaming: a new query reads the rows whose incrementalColumn value is above this "
        "one (default: every row). Only used when the checkpoint has no offsets yet.",
    ),
    mb.Option(
        name="incrementalDelay",
        type="duration",
        doc="Streaming, timestamp incrementalColumn only: read only rows whose value is older "
        "than now minus this delay (the database's clock), so that transactions committed "
        "late, within the delay, are not missed.",
    ),
)
"""Everything the ``jdbc`` source accepts."""

_PARTITIONING = ("partitionColumn", "lowerBound", "upperBound", "numPartitions")


@dataclass(frozen=True)
class ReadPlan:
    """What the options say to read: a table name, a FROM fragment, or a query."""

    table: tuple[str | None, str] | None
    """``(schema, name)`` of a named table, quoted through SQLAlchemy when read."""
    from_text: str | None
    """A FROM fragment used as written: Spark's ``(subquery) alias`` forms."""


def _given(opts: mb.Options, name: str) -> bool:
    value = opts.get(name)
    return value is not None and value != ""


def read_plan(opts: mb.Options, *, subquery_id: int = 0) -> ReadPlan:
    """Check the combinations Spark checks (with its texts) and say what to read."""
    has_table, has_query = _given(opts, "dbtable"), _given(opts, "query")
    if has_table and has_query:
        raise mb.OptionError("Both 'dbtable' and 'query' can not be specified at the same time.")
    if not has_table and not has_query:
        if opts.get("dbtable") == "":
            raise mb.OptionError("Option 'dbtable' can not be empty.")
        if opts.get("query") == "":
            raise mb.OptionError("Option `query` can not be empty.")
        raise mb.OptionError("Option 'dbtable' or 'query' is required.")
    given = [_given(opts, name) for name in _PARTITIONING]
    if any(given[:3]) and not all(given):
        raise mb.OptionError(
            "When reading JDBC data sources, users need to specify all or none for the "
            "following options: 'partitionColumn', 'lowerBound', 'upperBound', and "
            "'numPartitions'"
        )
    if has_query and given[0]:
        raise mb.OptionError(
            "Options 'query' and 'partitionColumn' can not be specified together. Please "
            "define the query using `dbtable` option instead and make sure to qualify the "
            "partition columns using the supplied subquery alias to resolve any ambiguity."
        )
    if _given(opts, "incrementalColumn") and given[0]:
        raise mb.OptionError(
            "Options 'incrementalColumn' and 'partitionColumn' can not be specified together: "
            "a stream reads each batch's rows in incrementalColumn order"
        )
    if has_query:
        query = str(opts.query).strip().rstrip(";")
        return ReadPlan(None, f"({query}) SPARK_GEN_SUBQ_{subquery_id}")
    dbtable = str(opts.dbtable).strip()
    if dbtable.startswith("("):
        return ReadPlan(None, dbtable)
    return ReadPlan(parse_table_name(dbtable), None)


_SPARK_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "varchar": pa.string(),
    "char": pa.string(),
    "boolean": pa.bool_(),
    "tinyint": pa.int8(),
    "byte": pa.int8(),
    "smallint": pa.int16(),
    "short": pa.int16(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "long": pa.int64(),
    "float": pa.float32(),
    "real": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", "UTC"),
    "timestamp_ltz": pa.timestamp("us", "UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "binary": pa.binary(),
}
_COLUMN = re.compile(
    r"\s*(?:`((?:[^`]|``)+)`|([^\s,`]+))\s+([a-z_]+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?"
    r"\s*(?:,|$)",
    re.IGNORECASE,
)


def apply_custom_schema(schema: pa.Schema, text: str) -> pa.Schema:
    """``schema`` with the types ``customSchema`` gives (Spark's DDL, names matched without
    regard to case); ``OptionError`` naming what is wrong."""
    wanted: dict[str, pa.DataType] = {}
    position = 0
    while position < len(text.strip()):
        match = _COLUMN.match(text, position)
        if match is None or match.end() == position:
            raise mb.OptionError(
                f"invalid value for option 'customSchema': cannot read {text[position:]!r}; "
                "expected 'name TYPE, name TYPE' such as 'id DECIMAL(38, 0), name STRING'"
            )
        name = match[1].replace("``", "`") if match[1] is not None else match[2]
        kind = match[3].lower()
        if kind in ("decimal", "numeric", "dec"):
            precision = int(match[4] or 10)
            scale = int(match[5] or 0)
            if not 0 < precision <= 38 or scale > precision:
                raise mb.OptionError(
                    f"invalid value for option 'customSchema': DECIMAL({precision}, {scale}) "
                    f"for column {name!r}; precision 1 to 38, scale at most the precision"
                )
            wanted[name.lower()] = pa.decimal128(precision, scale)
        elif kind in _SPARK_TYPES:
            wanted[name.lower()] = _SPARK_TYPES[kind]
        else:
            raise mb.OptionError(
                f"invalid value for option 'customSchema': unknown type {match[3]!r} for "
                f"column {name!r}"
            )
        position = match.end()
    unknown = sorted(set(wanted) - {field.name.lower() for field in schema})
    if unknown:
        raise mb.OptionError(
            f"invalid value for option 'customSchema': no column {', '.join(map(repr, unknown))}"
            f" in the result ({', '.join(schema.names)})"
        )
    return pa.schema(
        [pa.field(f.name, wanted.get(f.name.lower(), f.type), f.nullable) for f in schema]
    )
