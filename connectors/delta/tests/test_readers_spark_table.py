"""The ``delta`` source reads a table that Spark wrote.

``spark/recorded/spark_table`` was written by PySpark 4.0.1 with delta-spark 4.0.0
(``spark/record_spark.py``): two appends of 7 and 5 rows partitioned by ``region``, whose
folders Spark names its own way (``region=a%20b``, ``region=é%3D%25%23%3F``,
``region=__HIVE_DEFAULT_PARTITION__``), with reader feature ``timestampNtz`` and Spark's file
statistics. The rows Spark wrote are in ``spark/recorded/spark_table.json``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
sys.path.insert(0, str(Path(__file__).parent))
import reader_table
from _delta_source_testing import run_available_now

RECORDED = Path(__file__).parent / "spark" / "recorded"


@pytest.fixture
def spark_table(tmp_path: Path) -> str:
    """A copy of the table Spark wrote (the tests never touch the recording)."""
    target = tmp_path / "spark_table"
    shutil.copytree(RECORDED / "spark_table", target)
    return str(target)


def spark_rows() -> list[dict]:
    return json.loads((RECORDED / "spark_table.json").read_text(encoding="utf-8"))["rows"]


def test_batch_read_of_a_spark_table(spark_table: str) -> None:
    table = mb.Session().read.format("delta").load(spark_table)
    assert reader_table.plain_rows(table.to_pylist()) == spark_rows()
    assert table.schema.field("local_ts").type == pa.timestamp("us")
    assert table.schema.field("amount").type == pa.decimal128(12, 2)
    first = mb.Session().read.format("delta").option("versionAsOf", 0).load(spark_table)
    assert reader_table.plain_rows(first.to_pylist()) == spark_rows()[:7]


def test_stream_of_a_spark_table(spark_table: str, tmp_path: Path) -> None:
    session = mb.Session()
    query = (
        session.read_stream.format("delta")
        .option("maxFilesPerTrigger", 2)
        .load(spark_table)
        .write_stream.format("memory")
        .query_name("from_spark")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(60)
    assert query.exception() is None
    assert reader_table.plain_rows(session.table("from_spark").to_pylist()) == spark_rows()
    batches = [p for p in query.recent_progress if p["numInputRows"]]
    assert len(batches) >= 5  # 10 files, two a batch

    # from version 0 on (each of Spark's commits read as a version) rather than the snapshot
    rows, _ = run_available_now(session, spark_table, tmp_path / "from_v0", startingVersion=0)
    assert reader_table.plain_rows(rows.to_pylist()) == spark_rows()

    # the same table read by delta-rs, the reference
    from deltalake import DeltaTable

    assert reader_table.plain_rows(DeltaTable(spark_table).to_pyarrow_table().to_pylist()) == (
        spark_rows()
    )
