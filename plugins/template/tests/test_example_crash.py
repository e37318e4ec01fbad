"""The example connectors survive a SIGKILL at every step of the write-ahead protocol: the
crash test the connector guide shows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from microbatch_example import read_jsonl_folder
from microbatch_testkit import crash

SCRIPT = Path(__file__).parent / "scripts" / "counter_to_jsonl.py"
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("value", pa.int64(), False)])


@pytest.mark.parametrize("phase", crash.PHASES)
def test_a_killed_pipeline_restarts_with_every_row_once(tmp_path: Path, phase: str) -> None:
    output = tmp_path / "out"
    scenario = crash.CrashScenario(
        SCRIPT,
        read_sink=lambda: read_jsonl_folder(output, SCHEMA),
        args=[str(tmp_path / "checkpoint"), str(output)],
    )
    table = scenario.run(phase, batch_id=2)  # killed in batch 2, then run to the end
    assert sorted(table.column("id").to_pylist()) == list(range(30))
