from __future__ import annotations

from pathlib import Path

import pytest

import microbatch as mb

pytest.importorskip("microbatch_rate")

RULE = "-" * 43


def test_rate_micro_batch_to_console_once_per_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mb.Session() as session:
        writer = (
            session.read_stream.format("rate-micro-batch")
            .options(rowsPerBatch=3, numPartitions=1, advanceMillisPerBatch=1500)
            .load()
            .filter(mb.col("value") != 1)
            .write_stream.format("console")
            .option("numRows", 2)
            .trigger(once=True)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
        )
        for _ in range(2):
            query = writer.start()
            assert query.await_termination(30)
            assert query.exception() is None
    assert capsys.readouterr().out == (
        f"{RULE}\nBatch: 0\n{RULE}\n"
        "+-------------------+-----+\n"
        "|          timestamp|value|\n"
        "+-------------------+-----+\n"
        "|1970-01-01 00:00:00|    0|\n"
        "|1970-01-01 00:00:00|    2|\n"
        "+-------------------+-----+\n"
        "\n"
        f"{RULE}\nBatch: 1\n{RULE}\n"
        "+--------------------+-----+\n"
        "|           timestamp|value|\n"
        "+--------------------+-----+\n"
        "|1970-01-01 00:00:...|    3|\n"
        "|1970-01-01 00:00:...|    4|\n"
        "+--------------------+-----+\n"
        "only showing top 2 rows\n"
        "\n"
    )


def test_console_runs_without_a_checkpoint_location(capsys: pytest.CaptureFixture[str]) -> None:
    with mb.Session() as session:
        query = (
            session.read_stream.format("rate-micro-batch")
            .option("rowsPerBatch", 1)
            .load()
            .write_stream.format("console")
            .output_mode("update")
            .trigger(available_now=True)
            .start()
        )
        assert query.await_termination(30)
    assert capsys.readouterr().out.startswith(f"{RULE}\nBatch: 0\n{RULE}\n+---")
