from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch.errors import UnsupportedOperationError
from microbatch_rate import RateSource

pytest.importorskip("microbatch_console")

START = 1_700_000_000.0


class SteppedClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def printed_values(text: str) -> list[int]:
    return [int(match) for match in re.findall(r"\|\s*(\d+)\|\n", text)]


def test_batch_read_of_rate_micro_batch() -> None:
    with mb.Session() as session:
        table = (
            session.read.format("rate-micro-batch")
            .options(rowsPerBatch=10, startTimestamp=2_000)
            .load()
        )
    assert sorted(table.column("value").to_pylist()) == list(range(10))
    assert table.schema == pa.schema(
        [("timestamp", pa.timestamp("us", tz="UTC")), ("value", pa.int64())]
    )
    assert set(table.column("timestamp").to_pylist()) == {datetime(1970, 1, 1, 0, 0, 2, tzinfo=UTC)}


def test_batch_read_of_rate_is_refused() -> None:
    with mb.Session() as session, pytest.raises(UnsupportedOperationError, match="streaming"):
        session.read.format("rate").load()


def test_rate_to_console_continues_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = SteppedClock()
    monkeypatch.setattr(RateSource, "clock", clock)
    with mb.Session() as session:
        writer = (
            session.read_stream.format("rate")
            .options(rowsPerSecond=2, numPartitions=1)
            .load()
            .write_stream.format("console")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
        )
        query = writer.start()
        clock.now = START + 1.2
        query.process_all_available()
        query.stop()
        first = capsys.readouterr().out
        clock.now = START + 3.5
        query = writer.start()
        query.process_all_available()
        query.stop()
        assert query.exception() is None
        second = capsys.readouterr().out
    assert "Batch: 0" in first
    assert printed_values(first) == [0, 1]
    assert "Batch: 1" in second
    assert printed_values(second) == [2, 3, 4, 5]
