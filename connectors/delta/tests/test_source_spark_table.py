"""The Delta source reads a table Apache Spark wrote (recorded in ``spark/recorded``: Spark's
folder escaping of partition values, ``timestamp_ntz``, decimals, nested types) as Spark wrote
it, in a batch read and in a stream."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
sys.path.insert(0, str(Path(__file__).parent))
from _source_testing import run_available_now
from reader_table import plain

RECORDED = Path(__file__).parent / "spark" / "recorded"


@pytest.fixture
def spark_table(tmp_path: Path) -> str:
    copy = tmp_path / "spark_table"
    shutil.copytree(RECORDED / "spark_table", copy)
    return str(copy)


def _plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((plain(row) for row in rows), key=lambda row: row["id"])


def _written() -> list[dict[str, Any]]:
    return _plain(json.loads((RECORDED / "spark_table.json").read_text())["rows"])


def test_a_batch_read_gives_the_rows_spark_wrote(spark_table: str) -> None:
    table = mb.Session().read.format("delta").load(spark_table)
    assert _plain(table.to_pylist()) == _written()
    assert str(table.schema.field("local_ts").type) == "timestamp[us]"


def test_a_stream_gives_the_rows_spark_wrote_version_by_version(
    spark_table: str, tmp_path: Path
) -> None:
    session = mb.Session()
    rows, _ = run_available_now(session, spark_table, tmp_path / "cp", startingVersion=0)
    assert _plain(rows.to_pylist()) == _written()
    snapshot, _ = run_available_now(session, spark_table, tmp_path / "snapshot")
    assert _plain(snapshot.to_pylist()) == _written()
