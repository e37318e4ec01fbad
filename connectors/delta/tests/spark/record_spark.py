"""Read tables written by the ``delta`` sink with PySpark + delta-spark, and record what it saw.

A development script, not a test: the tests compare with its recordings without Spark
(``tests/test_readers_delta.py``, ``tests/test_readers_spark_table.py``). Run it from the
repository root with the project's virtualenv, naming a Python that has ``pyspark`` and
``delta-spark`` (and ``pyarrow``) installed, and the delta-spark jars::

    .venv/bin/python connectors/delta/tests/spark/record_spark.py \\
        --spark-python /path/to/spark-venv/bin/python --jars JAR1,JAR2

It writes two tables with the sink (``tests/scripts/reader_table.py``: the reader table, and
the merged one), then, in a child process of ``--spark-python``, reads each with
``spark.read.format("delta")``: every row, the schema Spark sees, the history's length, and a
few filtered reads (partition column, data column ranges) that exercise Spark's file
skipping. The results go to ``recorded/rows.json`` (values made comparable across readers by
``reader_table.plain``). Spark then writes a small table of its own (``recorded/spark_table``:
two appends, partitioned by ``region``) with the rows it wrote in ``recorded/spark_table.json``,
for the source's reader test.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded"
sys.path.insert(0, str(HERE.parent / "scripts"))
import reader_table  # noqa: E402

FILTERS = {
    "region": "region = 'é=%#?'",
    "null region": "region IS NULL",
    "day": "day = DATE'2024-03-01'",
    "id range": "id BETWEEN 40 AND 43",
    "timestamp": "ts > TIMESTAMP'2024-02-29 00:00:30'",
    "decimal null": "amount IS NULL",
    "local timestamp": "local_ts < TIMESTAMP_NTZ'1999-12-31 23:20:00'",
    "long string": "note >= 'row 5'",
}
"""Filters Spark runs on the reader table; the ids it returns are recorded."""


# -- the Spark side (run by --spark-python) -------------------------------------------------
def spark_session(jars: str) -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[1]")
        .appName("microbatch-delta-recording")
        .config("spark.jars", jars)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )


def spark_rows(frame: Any) -> list[dict[str, Any]]:
    """Collected rows as plain data; Spark's ``timestamp`` (UTC session, TZ=UTC) made aware."""
    rows = []
    for row in frame.collect():
        record = row.asDict(recursive=True)
        if isinstance(record.get("ts"), dt.datetime):
            record["ts"] = record["ts"].replace(tzinfo=dt.UTC)
        rows.append(record)
    return reader_table.plain_rows(rows)


def spark_read(spark: Any, path: str, filters: dict[str, str]) -> dict[str, Any]:
    from delta.tables import DeltaTable

    frame = spark.read.format("delta").load(path)
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0].asDict()
    history = DeltaTable.forPath(spark, path).history().collect()
    return {
        "rows": spark_rows(frame),
        "schema": {field.name: field.dataType.simpleString() for field in frame.schema.fields},
        "partition_columns": list(detail["partitionColumns"]),
        "num_files": detail["numFiles"],
        "num_commits": len(history),
        "operations": [h["operation"] for h in sorted(history, key=lambda h: h["version"])],
        "filtered_ids": {
            name: sorted(r["id"] for r in frame.filter(text).select("id").collect())
            for name, text in filters.items()
        },
    }


def spark_write(spark: Any, path: str) -> list[dict[str, Any]]:
    """Two appends of a small table partitioned by region; the rows written, in order."""
    rows = [reader_table._row(i) for i in range(12)]
    schema = (
        "id BIGINT, region STRING, day DATE, ts TIMESTAMP, local_ts TIMESTAMP_NTZ, "
        "amount DECIMAL(12,2), ratio DOUBLE, flag BOOLEAN, small INT, note STRING, "
        "device STRUCT<name: STRING, scores: ARRAY<INT>>, tags ARRAY<STRING>"
    )
    for part in (rows[:7], rows[7:]):
        frame = spark.createDataFrame(
            [tuple(r[n] for n in reader_table.SCHEMA.names) for r in part], schema
        )
        frame.coalesce(1).write.format("delta").mode("append").partitionBy("region").save(path)
    return reader_table.plain_rows(rows)


def spark_main(work: str, jars: str, out: str) -> None:
    import delta
    import pyspark

    spark = spark_session(jars)
    spark.sparkContext.setLogLevel("ERROR")
    result = {
        "pyspark": pyspark.__version__,
        "delta_spark": getattr(delta, "__version__", None) or _dist_version("delta-spark"),
        "tables": {
            "reader": spark_read(spark, f"{work}/reader", FILTERS),
            "merged": spark_read(spark, f"{work}/merged", {}),
        },
    }
    result["spark_table"] = spark_write(spark, f"{work}/spark_table")
    Path(out).write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    spark.stop()


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


# -- the project side -------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spark-python", required=True, help="a Python with pyspark, delta-spark")
    parser.add_argument(
        "--jars", required=True, help="delta-spark and delta-storage jars, comma-separated"
    )
    parser.add_argument("--spark-side", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.spark_side:
        spark_main(args.spark_side[0], args.jars, args.spark_side[1])
        return
    work = Path(tempfile.mkdtemp(prefix="delta-spark-"))
    reader_table.write_table(work / "reader", work / "reader-checkpoint")
    reader_table.write_merged_table(work / "merged", work / "merged-checkpoint")
    out = work / "spark.json"
    subprocess.run(
        [
            args.spark_python,
            __file__,
            "--spark-python",
            args.spark_python,
            "--jars",
            args.jars,
            "--spark-side",
            str(work),
            str(out),
        ],
        check=True,
        env={**os.environ, "TZ": "UTC"},
    )
    result = json.loads(out.read_text(encoding="utf-8"))
    RECORDED.mkdir(exist_ok=True)
    written = result.pop("spark_table")
    (RECORDED / "rows.json").write_text(
        json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (RECORDED / "spark_table.json").write_text(
        json.dumps({"rows": written}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    target = RECORDED / "spark_table"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(work / "spark_table", target, ignore=shutil.ignore_patterns("*.crc", ".*.crc"))
    versions = f"pyspark {result['pyspark']}, delta-spark {result['delta_spark']}"
    print(f"recorded into {RECORDED} ({versions})")


if __name__ == "__main__":
    main()
