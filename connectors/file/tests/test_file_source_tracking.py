"""The source's log of taken files: replays, restarts, compaction and cheap re-listing."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest
from file_connector_helpers import open_reader, read_range

import microbatch as mb
from microbatch import ReadAllAvailable, ReadMaxFiles, StateStore
from microbatch.errors import CorruptCheckpointError
from microbatch_file._stream_reader import FileStreamReader
from microbatch_file.sources import JsonFileSource

SCHEMA = pa.schema([("id", pa.int64())])


def put(folder: Path, name: str, *ids: int) -> None:
    (folder / name).write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))


def build(path: Path | str, state: StateStore | None, **options: Any) -> FileStreamReader:
    return open_reader(JsonFileSource, {"path": str(path), **options}, schema=SCHEMA, state=state)


def ids_of(source: FileStreamReader, start: int, end: int) -> list[int]:
    batches = read_range(source, {"logOffset": start}, {"logOffset": end})
    return sorted(i for b in batches for i in b["id"].to_pylist())


def test_a_taken_batch_is_replayed_with_the_same_files(folder: Path, tmp_path: Path) -> None:
    state = StateStore(str(tmp_path / "state"))
    put(folder, "a.json", 1)
    first = build(folder, state)
    end = first.latest_offset({"logOffset": -1}, ReadAllAvailable())
    assert end == {"logOffset": 0}
    put(folder, "b.json", 2)  # arrives after batch 0 was planned
    # the engine crashed before logging its offsets: the same batch comes back
    assert first.latest_offset({"logOffset": -1}, ReadAllAvailable()) == end
    second = build(folder, state)
    assert second.latest_offset({"logOffset": -1}, ReadAllAvailable()) == end
    assert ids_of(second, -1, 0) == [1]
    assert second.latest_offset(end, ReadAllAvailable()) == {"logOffset": 1}
    assert ids_of(second, 0, 1) == [2]


def test_restart_reads_nothing_twice(folder: Path, tmp_path: Path) -> None:
    seen: list[int] = []

    def run() -> None:
        session = mb.Session()
        query = (
            session.read_stream.format("json")
            .schema("id BIGINT")
            .load(str(folder))
            .write_stream.foreach_batch(lambda table, _: seen.extend(table["id"].to_pylist()))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(available_now=True)
            .start()
        )
        assert query.await_termination(timeout=30)

    put(folder, "a.json", 1, 2)
    run()
    put(folder, "b.json", 3)
    run()
    run()
    assert seen == [1, 2, 3]


def test_the_log_is_compacted(folder: Path, tmp_path: Path) -> None:
    state = StateStore(str(tmp_path / "state"))
    source = build(folder, state, maxFilesPerTrigger=1)
    offset = source.initial_offset()
    counts = []
    for index in range(125):
        put(folder, f"f{index:04d}.json", index)
        offset = source.latest_offset(offset, source.default_read_limit())
        counts.append(len(state.names()))
    assert offset == {"logOffset": 124}
    assert max(counts) <= 12, counts  # two compact files, at most 10 plain ones
    assert sorted(state.names()) == [
        "109.compact",
        "119.compact",
        "120",
        "121",
        "122",
        "123",
        "124",
    ]
    restarted = build(folder, state, maxFilesPerTrigger=1)
    assert restarted.latest_offset(offset, ReadAllAvailable()) == offset  # nothing new
    assert ids_of(restarted, 3, 5) == [4, 5]
    assert ids_of(restarted, 123, 124) == [124]


def test_a_missing_log_entry_is_reported(folder: Path, tmp_path: Path) -> None:
    state = StateStore(str(tmp_path / "state"))
    source = build(folder, state)
    put(folder, "a.json", 1)
    source.latest_offset({"logOffset": -1}, ReadAllAvailable())
    with pytest.raises(CorruptCheckpointError, match="ends at batch 0"):
        build(folder, state).latest_offset({"logOffset": 3}, ReadAllAvailable())


def test_a_backlog_is_not_listed_again_for_every_batch() -> None:
    fs = fsspec.filesystem("memory")
    root = f"/backlog-{uuid.uuid4().hex}"
    for index in range(2000):
        fs.pipe(f"{root}/f{index:05d}.json", b'{"id": %d}\n' % index)
    source = build(f"memory://{root}", None, maxFilesPerTrigger=10)
    offset = source.initial_offset()
    for _ in range(150):
        offset = source.latest_offset(offset, ReadMaxFiles(10))
    assert offset == {"logOffset": 149}
    assert source.discovery.full_listings <= 3
    assert ids_of(source, 148, 149) == list(range(1490, 1500))
