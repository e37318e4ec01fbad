"""The demo job: ``microbatch demo`` (through the core's command) and ``microbatch-demo``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from microbatch._cli import main


def test_demo_streams_files_into_a_parquet_table(
    row_of: Callable[[str, str], list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "demo"
    arguments = ["--seconds", "1", "--files-per-second", "8", "--rows-per-file", "200"]
    assert main(["demo", *arguments, "--folder", str(folder)]) == 0
    out = capsys.readouterr().out
    files = int(row_of(out, "files generated")[1].replace(",", ""))
    generated = int(row_of(out, "rows generated")[1].replace(",", ""))
    assert files >= 2 and generated == files * 200
    assert row_of(out, "rows in the table")[1] == f"{generated:,} (every row exactly once)"
    assert len(list((folder / "incoming").glob("*.json"))) == files
    assert sorted(os.listdir(folder / "checkpoint" / "commits"))
    assert f"microbatch checkpoint inspect {folder / 'checkpoint'}" in out
