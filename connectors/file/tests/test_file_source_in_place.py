"""Files written in place into a watched folder: taken only once whole, never half-read.

Real writers (``cp`` subprocesses, slow writer threads, a logger that reopens its file) write
into the folder of a running query; every test counts the rows exactly.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest
from file_connector_helpers import memory_query, start_memory_query, wait_for

import microbatch as mb
from microbatch_file import _watch

PAD = "x" * 60


def lines(first: int, count: int) -> str:
    return "".join(f'{{"id": {i}, "text": "{PAD}"}}\n' for i in range(first, first + count))


def drop(folder: Path, name: str, first: int, count: int) -> Path:
    """Write a file elsewhere, then rename it into the folder (the atomic way)."""
    staging = folder.parent / f".{name}.staging"
    staging.write_text(lines(first, count))
    target = folder / name
    os.replace(staging, target)
    return target


def count(session: mb.Session) -> int:
    return int(session.table("events").num_rows)


def distinct(session: mb.Session) -> int:
    return int(pc.count_distinct(session.table("events")["id"]).as_py())


def metric(query: mb.StreamingQuery, name: str) -> str:
    progress = query.last_progress
    assert progress is not None
    return str(progress.sources[0]["metrics"][name])


def reported(query: mb.StreamingQuery, name: str) -> list[str]:
    """The values of a source metric in the batches the query reported, idle ones left out."""
    return [
        str(p.sources[0]["metrics"][name])
        for p in query.recent_progress
        if p.num_input_rows and name in p.sources[0]["metrics"]
    ]


def settle_rows(
    session: mb.Session, query: mb.StreamingQuery, expected: int, ids: int | None = None
) -> None:
    """Wait until ``expected`` rows arrived, then make sure no more come; they hold ``ids``
    distinct ids (``expected`` unless given)."""
    wait_for(lambda: count(session) >= expected, timeout=60)
    time.sleep(0.2)
    query.process_all_available()
    assert count(session) == expected
    assert distinct(session) == (expected if ids is None else ids)


def test_cp_of_a_large_file_into_the_folder_loses_no_row(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    rows = 400_000  # about 34 MB
    source = tmp_path / "big.json"
    source.write_text(lines(0, rows))
    with memory_query(session, folder, tmp_path / "cp") as query:
        copies = ("one.json", "two.json", "three.json")
        for name in copies:
            subprocess.run(["cp", str(source), str(folder / name)], check=True)
        # the copies hold the same ids: the table gets every row once per copy, no more
        settle_rows(session, query, len(copies) * rows, ids=rows)
        assert metric(query, "numFilesChangedAfterRead") == "0"


def test_a_slow_chunked_writer_loses_no_row(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    chunks, per_chunk = 10, 10_000

    def write() -> None:
        with (folder / "slow.json").open("w") as handle:  # in place, held open
            for chunk in range(chunks):
                handle.write(lines(chunk * per_chunk, per_chunk))
                handle.flush()
                time.sleep(0.08)

    with memory_query(session, folder, tmp_path / "cp") as query:
        writer = threading.Thread(target=write)
        writer.start()
        while writer.is_alive():
            query.process_all_available()
            assert count(session) in (0, chunks * per_chunk)  # never part of the file
            time.sleep(0.03)
        writer.join()
        settle_rows(session, query, chunks * per_chunk)
        assert metric(query, "numFilesChangedAfterRead") == "0"


def test_a_file_written_in_place_just_before_process_all_available_is_in_it(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    with memory_query(session, folder, tmp_path / "cp") as query:
        for number in range(40):
            (folder / f"f{number:02d}.json").write_text(lines(number * 10, 10))  # in place
            query.process_all_available()
            assert count(session) == 10 * (number + 1)
        assert distinct(session) == 400


def test_a_writer_that_pauses_with_its_file_open_is_waited_for(
    session: mb.Session, folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the write timeout without a close, a file still open for writing (``/proc``)
    is still left alone."""
    monkeypatch.setattr(_watch, "WRITE_TIMEOUT", 0.2)
    with memory_query(session, folder, tmp_path / "cp") as query:
        with (folder / "paused.json").open("w") as handle:
            handle.write(lines(0, 500))
            handle.flush()
            for _ in range(8):  # four write timeouts without a write
                time.sleep(0.1)
                query.process_all_available()
                assert count(session) == 0
            handle.write(lines(500, 500))
        settle_rows(session, query, 1000)


def test_a_file_being_written_when_the_query_starts_is_taken_whole(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    """No creation event is seen for it: it is taken once it settled or was closed."""
    handle = (folder / "early.json").open("w")
    handle.write(lines(0, 1000))
    handle.flush()
    query = start_memory_query(session, folder, tmp_path / "cp")
    try:
        for chunk in range(1, 8):
            time.sleep(0.1)
            handle.write(lines(chunk * 1000, 1000))
            handle.flush()
            assert count(session) in (0, 8000)
        handle.close()
        settle_rows(session, query, 8000)
    finally:
        handle.close()
        query.stop()


def test_a_file_renamed_into_place_is_taken_at_once(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    with memory_query(session, folder, tmp_path / "cp", settleTime="60s"):
        drop(folder, "a.json", 0, 10)
        wait_for(lambda: count(session) == 10, timeout=20)  # no settling: it arrived whole


def _reopening_logger(path: Path, sessions: range, per_session: int, pause: float) -> None:
    for number in sessions:
        with path.open("a") as handle:  # open, append, close: each session is a close
            handle.write(lines(number * per_session, per_session))
        time.sleep(pause)


def test_a_writer_that_reopens_its_file_is_warned_and_counted(
    session: mb.Session, folder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="microbatch.file")
    query = start_memory_query(session, folder, tmp_path / "cp")
    target = folder / "app.log.json"
    try:
        query.process_all_available()
        _reopening_logger(target, range(1), per_session=20, pause=0)
        wait_for(lambda: count(session) == 20)  # taken once its writer closed it
        _reopening_logger(target, range(1, 10), per_session=20, pause=0.05)
        drop(folder, "marker.json", 1000, 1)  # a batch after the last append: fresh metrics
        wait_for(lambda: 1000 in session.table("events")["id"].to_pylist())
        query.process_all_available()
        assert count(session) == 21  # the later sessions are not read...
        assert distinct(session) == 21  # ...nor the file again
        assert metric(query, "numFilesChangedAfterRead") == "1"  # ...but counted
        warnings = [r.getMessage() for r in caplog.records if "changed after" in r.getMessage()]
        assert len(warnings) == 1  # once per file, however many appends
        assert f"file:{target}" in warnings[0] and "minFileAge" in warnings[0]
    finally:
        query.stop()


def test_min_file_age_reads_a_reopening_writer_whole(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    """The remedy the warning names: minFileAge longer than the writer's pauses."""
    with memory_query(session, folder, tmp_path / "cp", minFileAge="1s") as query:
        _reopening_logger(folder / "app.log.json", range(10), per_session=20, pause=0.1)
        settle_rows(session, query, 200)


def test_a_file_changed_while_the_query_was_stopped_is_reported_at_restart(
    session: mb.Session, folder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The checkpoint's log keeps the size and time of what was read."""
    caplog.set_level(logging.WARNING, logger="microbatch.file")
    target = drop(folder, "a.json", 0, 10)
    query = start_memory_query(session, folder, tmp_path / "cp")
    query.process_all_available()
    query.stop()
    assert count(session) == 10
    with target.open("a") as handle:
        handle.write(lines(10, 5))
    query = start_memory_query(session, folder, tmp_path / "cp")
    try:
        drop(folder, "b.json", 100, 1)
        wait_for(lambda: 100 in session.table("events")["id"].to_pylist())
        # the sink holds the rows a moment before the batch's progress is published
        wait_for(lambda: reported(query, "numFilesChangedAfterRead") == ["1"])
        assert count(session) == 11
        assert any(
            f"file:{target}" in r.getMessage() and "10 bytes" not in r.getMessage()
            for r in caplog.records
            if "changed after batch 0 read it" in r.getMessage()
        )
    finally:
        query.stop()


def test_clean_source_delete_reports_a_reused_name(
    session: mb.Session, folder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="microbatch.file")
    with memory_query(session, folder, tmp_path / "cp", cleanSource="delete") as query:
        first = drop(folder, "a.json", 0, 2)
        wait_for(lambda: count(session) == 2 and not first.exists())
        drop(folder, "a.json", 10, 3)  # the same name again
        drop(folder, "b.json", 20, 1)
        wait_for(lambda: 20 in session.table("events")["id"].to_pylist())
        query.process_all_available()
        assert sorted(session.table("events")["id"].to_pylist()) == [0, 1, 20]
        assert metric(query, "numFilesSkippedForReusedName") == "1"
        assert metric(query, "numFilesChangedAfterRead") == "0"
        reused = [r.getMessage() for r in caplog.records if "cleanSource=delete" in r.getMessage()]
        assert len(reused) == 1 and f"file:{first}" in reused[0] and "new name" in reused[0]


def test_a_partition_folder_moved_in_whole_and_a_hard_link_are_taken_at_once(
    session: mb.Session, folder: Path, tmp_path: Path
) -> None:
    query = (
        session.read_stream.format("json")
        .schema("id BIGINT, text STRING, kind STRING")
        .option("settleTime", "60s")
        .load(str(folder))
        .write_stream.format("memory")
        .query_name("events")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        query.process_all_available()
        staged = tmp_path / "kind=a"
        staged.mkdir()
        (staged / "a.json").write_text(lines(0, 10))
        os.rename(staged, folder / "kind=a")  # the folder's files are reported "created"
        wait_for(lambda: count(session) == 10, timeout=20)
        original = tmp_path / "b.json"
        original.write_text(lines(10, 10))
        os.link(original, folder / "kind=a" / "b.json")
        wait_for(lambda: count(session) == 20, timeout=20)
        query.process_all_available()
        assert distinct(session) == 20
    finally:
        query.stop()
