"""File sources in real queries: discovery speed, atomic pickup, clean-up, missing files."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from file_connector_helpers import memory_query, open_reader, start_memory_query, wait_for

import microbatch as mb
from microbatch import ReadAllAvailable
from microbatch.errors import SourceError, StreamingQueryException
from microbatch_file.sources import JsonFileSource


def lines(*ids: int) -> str:
    return "".join(json.dumps({"id": i, "text": "x" * 20}) + "\n" for i in ids)


def drop(folder: Path, name: str, *ids: int) -> Path:
    """Write a file elsewhere, then rename it into the folder (the atomic way)."""
    staging = folder.parent / f".{name}.staging"
    staging.write_text(lines(*ids))
    target = folder / name
    os.replace(staging, target)
    return target


def ids(session: mb.Session) -> list[int]:
    return sorted(session.table("events")["id"].to_pylist())


def test_json_files_stream_into_a_memory_table(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    drop(folder, "a.json", 1, 2)
    with memory_query(session, folder, tmp_path / "cp", maxFilesPerTrigger=1) as query:
        assert ids(session) == [1, 2]
        drop(folder, "b.json", 3)
        drop(folder, "c.json", 4)
        query.process_all_available()
        assert ids(session) == [1, 2, 3, 4]
        progress = query.last_progress
        assert progress is not None
        assert progress.sources[0]["description"] == f"FileStreamSource[file:{folder}]"
        assert progress.sources[0]["endOffset"] == {"logOffset": 2}


def test_the_watcher_wakes_an_idle_query_at_once(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    session.conf.set("pollingDelay", "10 seconds")
    with memory_query(session, folder, tmp_path / "cp"):
        time.sleep(0.1)  # the query now waits up to 10 s for its next poll
        drop(folder, "a.json", 7)
        waited = wait_for(lambda: ids(session) == [7], timeout=3)
        assert waited < 2


def test_a_renamed_tmp_file_is_read_once_and_whole(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    query = start_memory_query(session, folder, tmp_path / "cp")
    try:
        staging = folder / "big.json.tmp"
        with staging.open("w") as handle:
            handle.write(lines(*range(50)))
            handle.flush()
            query.process_all_available()
            assert ids(session) == []
            handle.write(lines(*range(50, 100)))
        query.process_all_available()
        assert ids(session) == []
        staging.rename(folder / "big.json")
        wait_for(lambda: len(ids(session)) == 100, timeout=5)
        time.sleep(0.1)
        query.process_all_available()
        assert ids(session) == list(range(100))
    finally:
        query.stop()


def test_min_file_age_never_reads_a_half_written_file(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    # old enough only after the checks below, however slow the machine
    query = start_memory_query(session, folder, tmp_path / "cp", minFileAge="3s")
    try:
        target = folder / "slow.json"
        with target.open("w") as handle:  # written in place, in two sessions, no rename
            handle.write(lines(*range(30)))
        time.sleep(0.3)
        query.process_all_available()
        assert ids(session) == []
        with target.open("a") as handle:
            handle.write(lines(*range(30, 60)))
        query.process_all_available()
        assert ids(session) == []
        wait_for(lambda: len(ids(session)) > 0, timeout=20)
        query.process_all_available()
        assert ids(session) == list(range(60))
    finally:
        query.stop()


def test_clean_source_archives_only_after_the_commit(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    present: list[bool] = []
    first = drop(folder, "a.json", 1)
    second = drop(folder, "b.json", 2)
    query = (
        session.read_stream.format("json")
        .schema("id BIGINT, text STRING")
        .option("cleanSource", "archive")
        .option("sourceArchiveDir", str(archive))
        .option("maxFilesPerTrigger", 1)
        .load(str(folder))
        .write_stream.foreach_batch(lambda table, _: present.append(first.exists()))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(timeout=30)
    assert present == [True, False]  # batch 0 ran with a.json in place; archived after it
    assert not first.exists() and not second.exists()
    for path in (first, second):
        assert (archive / str(path).lstrip("/")).read_text() == lines(int(path.stem == "b") + 1)


def test_clean_source_delete(session: mb.Session, folder: Path, tmp_path: Path) -> None:
    drop(folder, "a.json", 1)
    seen: list[int] = []
    query = (
        session.read_stream.format("json")
        .schema("id BIGINT, text STRING")
        .option("cleanSource", "delete")
        .load(str(folder))
        .write_stream.foreach_batch(lambda table, _: seen.extend(table["id"].to_pylist()))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(once=True)
        .start()
    )
    assert query.await_termination(timeout=30)
    assert seen == [1] and list(folder.iterdir()) == []


def test_a_file_removed_before_it_is_read(folder: Path, caplog: pytest.LogCaptureFixture) -> None:
    for ignore in (False, True):
        path = drop(folder, f"gone-{ignore}.json", 1)
        options = {"path": str(folder), "ignoreMissingFiles": ignore}
        schema = pa.schema([("id", pa.int64())])
        source = open_reader(JsonFileSource, options, schema=schema)
        end = source.latest_offset({"logOffset": -1}, ReadAllAvailable())
        path.unlink()
        splits = source.partitions({"logOffset": -1}, end)
        split_reader = source.split_reader()
        if not ignore:
            with pytest.raises(SourceError, match=r"gone-False\.json of batch 0 was removed"):
                list(split_reader.read(splits[0]))
        else:
            with caplog.at_level(logging.WARNING, logger="microbatch.file"):
                assert list(split_reader.read(splits[0])) == []
            assert "gone-True.json" in caplog.text


def test_a_failfast_error_stops_the_query(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    (folder / "bad.json").write_text('{"id": 1}\n{"id": "x"}\n')
    query = start_memory_query(session, folder, tmp_path / "cp", mode="FAILFAST")
    with pytest.raises(StreamingQueryException, match=r"bad\.json at line 2"):
        query.await_termination(timeout=30)
