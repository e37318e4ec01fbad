"""The Delta source through real queries: following a table another writer appends to,
restarts, limits, available-now."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import microbatch as mb
from microbatch_testkit._engine import wait_until

sys.path.insert(0, str(Path(__file__).parent))
from _delta_source_testing import batch_sizes, ids, run_available_now, run_frame, stream


@pytest.fixture(scope="module")
def session() -> mb.Session:
    return mb.Session()


def test_a_query_follows_a_table_another_writer_appends_to(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 10))
    query = (
        stream(session, delta_table.uri)
        .write_stream.format("memory")
        .query_name("followed")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processing_time="0 seconds")
        .start()
    )
    appends = 15

    def writer() -> None:
        for n in range(appends):
            delta_table.append(make_numbers(10 + 5 * n, 5))
            time.sleep(0.02)

    # the first batch, before the appends
    wait_until(lambda: session.table("followed").num_rows >= 10, 30, "the first batch", query)
    thread = threading.Thread(target=writer)
    thread.start()
    thread.join(timeout=60)
    expected = list(range(10 + 5 * appends))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and session.table("followed").num_rows < len(expected):
        assert query.exception() is None
        time.sleep(0.05)
    query.stop()
    assert query.exception() is None
    assert ids(session.table("followed")) == expected  # each row once
    batches = [p for p in query.recent_progress if p["numInputRows"]]
    assert len(batches) > 1  # the appends arrived while the query ran
    last = query.recent_progress[-1]["sources"][0]
    assert last["endOffset"]["reservoirVersion"] == appends + 1
    assert last["endOffset"]["index"] == -1


def test_a_restart_reads_only_versions_committed_after_the_last_batch(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "cp"
    delta_table.append(make_numbers(0, 3))
    delta_table.append(make_numbers(3, 3))
    first, query = run_available_now(session, delta_table.uri, checkpoint)
    assert ids(first) == list(range(6))
    end = query.last_progress["sources"][0]["endOffset"]
    assert (end["reservoirVersion"], end["index"], end["isStartingVersion"]) == (2, -1, False)
    delta_table.append(make_numbers(6, 3))
    delta_table.append(make_numbers(9, 3))
    second, query = run_available_now(session, delta_table.uri, checkpoint)
    assert ids(second) == list(range(6, 12))
    assert query.recent_progress[0]["sources"][0]["startOffset"] == end
    third, query = run_available_now(session, delta_table.uri, checkpoint)
    assert third.num_rows == 0 and sum(batch_sizes(query)) == 0


def test_the_first_start_is_kept_so_a_restart_before_any_batch_reads_the_same_snapshot(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 4))
    frame = stream(session, delta_table.uri)
    checkpoint = tmp_path / "cp"
    run_frame(session, frame, checkpoint)
    delta_table.append(make_numbers(4, 4))  # after the snapshot version
    rows, _ = run_available_now(session, delta_table.uri, checkpoint)
    assert ids(rows) == list(range(4, 8))


def test_max_files_per_trigger_cuts_the_snapshot_and_the_versions(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    for n in range(5):
        delta_table.append(make_numbers(10 * n, 10))
    rows, query = run_available_now(session, delta_table.uri, tmp_path / "cp", maxFilesPerTrigger=2)
    assert ids(rows) == list(range(50))
    assert batch_sizes(query) == [20, 20, 10]
    for n in range(5, 8):
        delta_table.append(make_numbers(10 * n, 10))
    rows, query = run_available_now(session, delta_table.uri, tmp_path / "cp", maxFilesPerTrigger=2)
    assert ids(rows) == list(range(50, 80))
    assert batch_sizes(query) == [20, 10]


def test_max_bytes_per_trigger_is_soft_and_takes_at_least_one_file(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    for n in range(4):
        delta_table.append(make_numbers(10 * n, 10))
    rows, query = run_available_now(session, delta_table.uri, tmp_path / "a", maxBytesPerTrigger=1)
    assert ids(rows) == list(range(40))
    assert batch_sizes(query) == [10, 10, 10, 10]  # each file is bigger than the limit
    size = delta_table_file_size(delta_table)
    # room for one and a half files: a batch takes files while below the limit (Delta's rule)
    rows, query = run_available_now(
        session, delta_table.uri, tmp_path / "b", maxBytesPerTrigger=str(size + size // 2)
    )
    assert batch_sizes(query) == [20, 20]
    _, query = run_available_now(
        session,
        delta_table.uri,
        tmp_path / "c",
        maxBytesPerTrigger="1g",
        maxFilesPerTrigger=3,
    )
    assert batch_sizes(query) == [30, 10]


def delta_table_file_size(delta_table: Any) -> int:
    import pyarrow as pa
    from deltalake import DeltaTable

    sizes = pa.table(DeltaTable(delta_table.uri).get_add_actions()).column("size_bytes")
    return int(sizes[0].as_py())


def test_available_now_stops_at_the_version_current_when_it_started(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    from microbatch_delta.source import DeltaSource

    for n in range(3):
        delta_table.append(make_numbers(10 * n, 10))
    opts = DeltaSource.options.parse(
        {"path": delta_table.uri, "maxFilesPerTrigger": 1}, connector="delta"
    )
    source = DeltaSource(opts)
    schema = source.schema()
    reader = source.stream_reader(mb.ReadContext(schema=schema, state=None))
    start = reader.initial_offset()
    reader.prepare_available_now()
    delta_table.append(make_numbers(30, 10))  # after the target was pinned
    offset, batches = start, 0
    while True:
        end = reader.latest_offset(offset, reader.default_read_limit())
        if end == offset:
            break
        batches += 1
        offset = end
    assert batches == 3
    assert offset["reservoirVersion"] == 3 and offset["index"] == -1
    assert reader.report_latest_offset() == {**offset, "reservoirVersion": 3}


def test_a_version_with_more_files_than_the_limit_is_read_over_several_batches(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    import pyarrow as pa

    delta_table.append(make_numbers(0, 1, part="p0"), partition_by=["part"])
    checkpoint = tmp_path / "cp"
    run_available_now(session, delta_table.uri, checkpoint)
    parts = pa.concat_tables([make_numbers(10 * p, 10, part=f"p{p}") for p in range(1, 4)])
    version = delta_table.append(parts, partition_by=["part"])  # one version, three files
    rows, query = run_available_now(session, delta_table.uri, checkpoint, maxFilesPerTrigger=2)
    assert ids(rows) == list(range(10, 40))
    assert batch_sizes(query) == [20, 10]
    middle = query.recent_progress[0]["sources"][0]["endOffset"]
    assert (middle["reservoirVersion"], middle["index"]) == (version, 1)
    assert middle["isStartingVersion"] is False


def test_a_checkpoint_of_another_table_at_the_same_path_is_refused(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    import shutil

    delta_table.append(make_numbers(0, 2))
    checkpoint = tmp_path / "cp"
    run_available_now(session, delta_table.uri, checkpoint)
    shutil.rmtree(delta_table.uri)
    delta_table.append(make_numbers(0, 2))  # created again: a new table id
    with pytest.raises(mb.SourceError, match="reading from an unexpected Delta table"):
        run_available_now(session, delta_table.uri, checkpoint)  # refused by start()


def test_progress_reports_the_files_and_bytes_still_to_read(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    for n in range(5):
        delta_table.append(make_numbers(10 * n, 10))
    size = delta_table_file_size(delta_table)
    _, query = run_available_now(session, delta_table.uri, tmp_path / "cp", maxFilesPerTrigger=2)
    left = [
        (
            p["sources"][0]["metrics"]["numFilesOutstanding"],
            p["sources"][0]["metrics"]["latestVersion"],
        )
        for p in query.recent_progress
    ]
    assert left == [("3", "4"), ("1", "4"), ("0", "4")]
    first = query.recent_progress[0]["sources"][0]["metrics"]
    assert int(first["numBytesOutstanding"]) == pytest.approx(3 * size, rel=0.1)
    for n in range(5, 8):
        delta_table.append(make_numbers(10 * n, 10))
    _, query = run_available_now(session, delta_table.uri, tmp_path / "cp", maxFilesPerTrigger=2)
    assert [p["sources"][0]["metrics"]["numFilesOutstanding"] for p in query.recent_progress] == [
        "1",
        "0",
    ]
