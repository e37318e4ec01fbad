"""Crash tests with real processes: SIGKILL at each batch phase, restart, exactly-once output."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import pyarrow.parquet as pq
import pytest

import microbatch as mb
from microbatch_file._writer_files import PART_FILE
from microbatch_file.manifest import Manifest
from microbatch_testkit import crash

SCRIPTS = Path(__file__).parent / "scripts"
RATE_SCRIPT = SCRIPTS / "rate_to_parquet.py"
JSON_SCRIPT = SCRIPTS / "json_to_parquet.py"
KINDS = ("a", "b/../../escape", None)
FILES, ROWS_PER_FILE = 10, 100
ROWS_PER_BATCH = 1000
LAST_BATCH = 3


def committed_values(output: Path, column: str = "value") -> list[int]:
    """The ``column`` of every file the manifest lists, sorted."""
    manifest = Manifest(fsspec.filesystem("file"), str(output))
    values: list[int] = []
    for path in manifest.files():
        values += pq.read_table(path, columns=[column]).column(column).to_pylist()
    return sorted(values)


def data_files_on_disk(output: Path) -> set[str]:
    return {
        str(path)
        for path in output.rglob("*")
        if path.is_file()
        and PART_FILE.match(path.name)
        and "_microbatch_metadata" not in path.parts
    }


@pytest.mark.parametrize("phase", ["offsets_written", "mid_sink", "sink_committed"])
def test_rate_to_parquet_is_exactly_once_after_sigkill(tmp_path: Path, phase: str) -> None:
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    args = [str(output), str(checkpoint), str(LAST_BATCH)]
    killed = crash.run_until_crash(RATE_SCRIPT, phase, 1, args=args)
    assert f"at {phase}:1" in killed.stderr
    manifest = Manifest(fsspec.filesystem("file"), str(output))
    assert manifest.has_batch(0)
    assert manifest.has_batch(1) == (phase == "sink_committed")
    if phase == "mid_sink":
        # the killed attempt left files of batch 1 that no entry lists
        listed = set(manifest.files())
        assert data_files_on_disk(output) - listed, "the crash left no file behind"
    assert committed_values(output) == list(
        range(ROWS_PER_BATCH * (2 if phase == "sink_committed" else 1))
    )

    crash.run_to_completion(RATE_SCRIPT, args=args)

    values = committed_values(output)
    assert len(values) >= (LAST_BATCH + 1) * ROWS_PER_BATCH
    assert values == list(range(len(values))), "rows missing or duplicated"
    assert data_files_on_disk(output) == set(manifest.files()), "files of the crash remain"


def write_input(folder: Path) -> dict[str, bytes]:
    """FILES json files of ROWS_PER_FILE rows (ids 0..999); their contents by name."""
    folder.mkdir(parents=True)
    contents: dict[str, bytes] = {}
    for index in range(FILES):
        lines = [
            json.dumps(
                {"id": index * ROWS_PER_FILE + row, "kind": KINDS[row % 3], "note": f"r{row}"}
            )
            for row in range(ROWS_PER_FILE)
        ]
        data = ("\n".join(lines) + "\n").encode()
        (folder / f"events-{index:02d}.json").write_bytes(data)
        contents[f"events-{index:02d}.json"] = data
    return contents


@pytest.mark.parametrize("phase", ["offsets_written", "mid_sink", "sink_committed"])
def test_json_files_to_parquet_is_exactly_once_and_archives_each_file_once(
    tmp_path: Path, phase: str
) -> None:
    source, output = tmp_path / "in", tmp_path / "out"
    archive, checkpoint = tmp_path / "archive", tmp_path / "checkpoint"
    contents = write_input(source)
    args = [str(source), str(output), str(checkpoint), str(archive)]

    crash.run_until_crash(JSON_SCRIPT, phase, 1, args=args)
    manifest = Manifest(fsspec.filesystem("file"), str(output))
    assert manifest.has_batch(1) == (phase == "sink_committed")
    crash.run_to_completion(JSON_SCRIPT, args=args)

    assert committed_values(output, "id") == list(range(FILES * ROWS_PER_FILE))
    assert data_files_on_disk(output) == set(manifest.files()), "files of the crash remain"
    table = mb.Session().read.format("parquet").load(str(output))
    rows = sorted(
        zip(table.column("id").to_pylist(), table.column("kind").to_pylist(), strict=True)
    )
    assert rows == [(i, KINDS[i % ROWS_PER_FILE % 3]) for i in range(FILES * ROWS_PER_FILE)]
    # every input file archived exactly once, whole, and none left in the source folder
    assert list(source.iterdir()) == []
    archived = [path for path in archive.rglob("*") if path.is_file()]
    assert sorted(path.name for path in archived) == sorted(contents)
    for path in archived:
        assert path.read_bytes() == contents[path.name]
        assert path.parent == archive / source.relative_to("/")
