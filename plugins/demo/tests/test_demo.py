"""The demo job: ``microbatch demo`` (through the core's command) and ``microbatch-demo``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from microbatch._cli import main


def test_demo_streams_files_into_a_delta_table(
    row_of: Callable[[str, str], list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from deltalake import DeltaTable

    folder = tmp_path / "demo"
    arguments = ["--seconds", "1", "--files-per-second", "8", "--rows-per-file", "200"]
    assert main(["demo", *arguments, "--folder", str(folder)]) == 0
    out = capsys.readouterr().out
    files = int(row_of(out, "files generated")[1].replace(",", ""))
    generated = int(row_of(out, "rows generated")[1].replace(",", ""))
    batches = int(row_of(out, "batches")[1].replace(",", ""))
    assert files >= 2 and generated == files * 200
    assert row_of(out, "rows in the table")[1] == f"{generated:,} (every row exactly once)"
    assert len(list((folder / "incoming").glob("*.json"))) == files
    commits = sorted(os.listdir(folder / "checkpoint" / "commits"))
    assert commits
    assert f"microbatch checkpoint inspect {folder / 'checkpoint'}" in out

    # the table itself, read with delta-rs: every row, partitioned by status, one commit a batch
    table = DeltaTable(str(folder / "table"))
    assert table.to_pyarrow_table().num_rows == generated
    assert table.metadata().partition_columns == ["status"]
    assert len(table.history()) == batches == table.version() + 1
    query_id = json.loads((folder / "checkpoint" / "metadata").read_text())["id"]
    txns = []
    for entry in sorted((folder / "table" / "_delta_log").glob("*.json")):
        lines = [json.loads(line) for line in entry.read_text().splitlines() if line.strip()]
        txns += [action["txn"] for action in lines if "txn" in action]
    assert {txn["appId"] for txn in txns} == {query_id}
    assert sorted(txn["version"] for txn in txns) == [int(name) for name in commits]
    assert table.transaction_version(query_id) == int(commits[-1])

    # what the demo shows of it
    assert "Delta table history (one commit per batch)" in out
    assert f"(one commit per batch, app id = query id {query_id})" in out
    assert row_of(out, "0")[1] == "0"  # version 0 holds batch 0
