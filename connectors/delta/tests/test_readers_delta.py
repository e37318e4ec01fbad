"""A table written by the ``delta`` sink reads back identically with independent readers.

The table (``scripts/reader_table.py``) is partitioned by a string that needs escaping in a
folder name (space, slash, ``é=%#?``, null) and by a date, in small files, with nulls,
timestamps with and without a time zone, dates, decimals, a nested struct with a list, a list
of strings and strings with quotes and newlines. It is read with delta-rs (``DeltaTable``,
and its pyarrow dataset with filters, which prunes files by their statistics) and with Polars
(``pl.read_delta``, and ``pl.scan_delta`` with filters on partition and data columns). PySpark
4.0.1 with delta-spark 4.0.0 and DuckDB 1.5.5's ``delta_scan`` read the same tables (and a table
the sink upserted with ``mode=merge``); what they saw is recorded in ``spark/recorded`` (see
``spark/README.md``) and compared here without them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
import delta_crash_pipeline as log_helpers
import reader_table

RECORDED = Path(__file__).parent / "spark" / "recorded"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The reader table, written once by the sink for every test here."""
    root = tmp_path_factory.mktemp("readers")
    query = reader_table.write_table(root / "table", root / "checkpoint")
    return {"table": str(root / "table"), "query_id": query.id}


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A table upserted by the sink (``mode=merge``), written once for every test here."""
    root = tmp_path_factory.mktemp("readers-merged")
    query = reader_table.write_merged_table(root / "table", root / "checkpoint")
    return {"table": str(root / "table"), "query_id": query.id}


def test_merged_table_reads_back_with_delta_rs_and_polars(merged: dict[str, Any]) -> None:
    import polars as pl
    from deltalake import DeltaTable

    expected = reader_table.merged_rows()
    assert len(expected) == 30
    assert reader_table.plain_rows(DeltaTable(merged["table"]).to_pyarrow_table().to_pylist()) == (
        expected
    )
    assert reader_table.plain_rows(pl.read_delta(merged["table"]).to_arrow().to_pylist()) == (
        expected
    )
    assert log_helpers.history_problems(merged["table"], merged["query_id"], [0, 1, 2]) == []


def test_delta_rs_reads_every_row_and_type(written: dict[str, Any]) -> None:
    from deltalake import DeltaTable

    table = DeltaTable(written["table"])
    assert table.metadata().partition_columns == list(reader_table.PARTITION_BY)
    data = table.to_pyarrow_table()
    assert reader_table.plain_rows(data.to_pylist()) == reader_table.expected_rows()
    for field in reader_table.SCHEMA:
        got = data.schema.field(field.name).type
        assert got == field.type or (
            pa.types.is_string(field.type) and pa.types.is_large_string(got)
        ), (
            field.name,
            got,
        )
    # one commit per batch, each with the query's transaction
    assert log_helpers.history_problems(written["table"], written["query_id"], [0, 1]) == []


def test_partition_folders_and_log_paths(written: dict[str, Any]) -> None:
    """Every file the log adds exists where its (URI-encoded) path says, under folders whose
    partition values read back as the values written; the null region is Hive's default."""
    from deltalake import DeltaTable

    root = Path(written["table"])
    actions = pa.table(DeltaTable(written["table"]).get_add_actions(flatten=True)).to_pylist()
    assert len(actions) >= 60 // reader_table.ROWS_PER_FILE
    regions = set()
    for action in actions:
        assert (root / unquote(action["path"])).is_file(), action["path"]
        assert action["num_records"] <= reader_table.ROWS_PER_FILE
        regions.add(action["partition.region"])
    assert regions == set(reader_table.REGIONS)


def test_polars_read_delta(written: dict[str, Any]) -> None:
    import polars as pl

    frame = pl.read_delta(written["table"])
    rows = frame.to_arrow().to_pylist()
    assert reader_table.plain_rows(rows) == reader_table.expected_rows()


FILTER_CASES = [
    ("region", lambda pl: pl.col("region") == "é=%#?", lambda r: r["region"] == "é=%#?"),
    ("null region", lambda pl: pl.col("region").is_null(), lambda r: r["region"] is None),
    (
        "day",
        lambda pl: pl.col("day") == pl.date(2024, 3, 1),
        lambda r: r["day"] == "2024-03-01",
    ),
    ("id range", lambda pl: pl.col("id").is_between(40, 43), lambda r: 40 <= r["id"] <= 43),
    (
        "timestamp",
        lambda pl: pl.col("ts") > pl.datetime(2024, 2, 29, 0, 0, 30, time_zone="UTC"),
        lambda r: r["ts"] is not None and r["ts"] > "2024-02-29T00:00:30.000000Z",
    ),
    ("decimal null", lambda pl: pl.col("amount").is_null(), lambda r: r["amount"] is None),
    (
        "local timestamp",
        lambda pl: pl.col("local_ts") < pl.datetime(1999, 12, 31, 23, 20),
        lambda r: r["local_ts"] < "1999-12-31T23:20:00.000000",
    ),
    (
        "long string",
        lambda pl: pl.col("note") >= "row 5",
        lambda r: r["note"] is not None and r["note"] >= "row 5",
    ),
]
"""(name, Polars filter, the same filter on plain rows); Spark ran them too (``spark/``)."""


@pytest.mark.parametrize(("name", "polars_filter", "keep"), FILTER_CASES)
def test_polars_scan_delta_with_filters(
    written: dict[str, Any], name: str, polars_filter: Any, keep: Any
) -> None:
    import polars as pl

    rows = pl.scan_delta(written["table"]).filter(polars_filter(pl)).collect().to_arrow()
    expected = [row for row in reader_table.expected_rows() if keep(row)]
    assert expected, f"the filter {name} keeps no row: the test would prove nothing"
    assert reader_table.plain_rows(rows.to_pylist()) == expected


def test_file_statistics_prune_files(written: dict[str, Any]) -> None:
    """delta-rs's dataset skips files by the min/max statistics the sink wrote: a narrow id
    range keeps exactly the files whose ids overlap it, and finds every matching row."""
    from deltalake import DeltaTable

    dataset = DeltaTable(written["table"]).to_pyarrow_dataset()
    every = list(dataset.get_fragments())
    narrow = (ds.field("id") >= 40) & (ds.field("id") <= 43)
    kept = {fragment.path for fragment in dataset.get_fragments(filter=narrow)}
    # the files whose id range (read from the data itself) overlaps 40..43
    overlapping = set()
    for fragment in every:
        ids = fragment.to_table(columns=["id"]).column("id")
        if pc.min(ids).as_py() <= 43 and pc.max(ids).as_py() >= 40:
            overlapping.add(fragment.path)
    assert kept == overlapping
    assert len(kept) < len(every)
    found = dataset.to_table(filter=narrow)
    assert sorted(found.column("id").to_pylist()) == [40, 41, 42, 43]
    # null counts: a filter on a column's nulls keeps the files that have any
    nulls = dataset.to_table(filter=ds.field("ts").is_null())
    expected = [r["id"] for r in reader_table.expected_rows() if r["ts"] is None]
    assert sorted(nulls.column("id").to_pylist()) == expected
    assert pc.all(pc.is_null(nulls.column("ts"))).as_py()


SPARK_TYPES = {
    "id": "bigint",
    "region": "string",
    "day": "date",
    "ts": "timestamp",
    "local_ts": "timestamp_ntz",
    "amount": "decimal(12,2)",
    "ratio": "double",
    "flag": "boolean",
    "small": "int",
    "note": "string",
    "device": "struct<name:string,scores:array<int>>",
    "tags": "array<string>",
}
"""How Spark types the reader table's columns (the Delta types the sink declared)."""


def test_rows_match_what_spark_read(written: dict[str, Any], merged: dict[str, Any]) -> None:
    """PySpark with delta-spark read tables this sink wrote (``spark/record_spark.py``): the
    rows, types, partition columns, commits and filtered reads it saw are what the sink
    writes now."""
    from deltalake import DeltaTable

    recorded = json.loads((RECORDED / "rows.json").read_text(encoding="utf-8"))
    reader, upserted = recorded["tables"]["reader"], recorded["tables"]["merged"]
    now = reader_table.plain_rows(DeltaTable(written["table"]).to_pyarrow_table().to_pylist())
    assert reader["rows"] == now == reader_table.expected_rows()
    assert reader["schema"] == SPARK_TYPES
    assert reader["partition_columns"] == list(reader_table.PARTITION_BY)
    assert reader["num_commits"] == 2 == len(DeltaTable(written["table"]).history())
    assert reader["num_files"] == len(DeltaTable(written["table"]).file_uris())
    for name, ids in reader["filtered_ids"].items():
        keep = next(case[2] for case in FILTER_CASES if case[0] == name)
        assert ids == [row["id"] for row in now if keep(row)], name
    assert upserted["rows"] == reader_table.merged_rows()
    assert upserted["schema"] == SPARK_TYPES
    assert upserted["num_commits"] == 3


DUCKDB_TYPES = {
    "id": "BIGINT",
    "region": "VARCHAR",
    "day": "DATE",
    "ts": "TIMESTAMP WITH TIME ZONE",
    "local_ts": "TIMESTAMP",
    "amount": "DECIMAL(12,2)",
    "ratio": "DOUBLE",
    "flag": "BOOLEAN",
    "small": "INTEGER",
    "note": "VARCHAR",
    "device": 'STRUCT("name" VARCHAR, scores INTEGER[])',
    "tags": "VARCHAR[]",
}


def test_rows_match_what_duckdb_read(written: dict[str, Any]) -> None:
    """DuckDB 1.5.5's ``delta_scan`` read tables this sink wrote (``spark/record_duckdb.py``;
    the project's DuckDB cannot load the extension here): the rows, types and filtered reads
    it saw are what the sink writes now."""
    from deltalake import DeltaTable

    recorded = json.loads((RECORDED / "duckdb_rows.json").read_text(encoding="utf-8"))
    reader, upserted = recorded["tables"]["reader"], recorded["tables"]["merged"]
    now = reader_table.plain_rows(DeltaTable(written["table"]).to_pyarrow_table().to_pylist())
    assert reader["rows"] == now == reader_table.expected_rows()
    assert reader["types"] == upserted["types"] == DUCKDB_TYPES
    for name, ids in reader["filtered_ids"].items():
        keep = next(case[2] for case in FILTER_CASES if case[0] == name)
        assert ids == [row["id"] for row in now if keep(row)], name
    assert upserted["rows"] == reader_table.merged_rows()
