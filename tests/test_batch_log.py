"""BatchLog: atomic entries, compaction in Spark's layout, purge, and consistent reads while
another process writes and compacts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import microbatch as mb
from microbatch import BatchLog, StateStore
from microbatch.errors import CorruptCheckpointError


def entry(batch_id: int, **extra: Any) -> dict[str, Any]:
    return {"batchId": batch_id, "files": [f"f{batch_id}"], **extra}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StateStore:
    if request.param == "local":
        return StateStore(str(tmp_path / "log"))
    return StateStore(f"memory://batch-log-{uuid.uuid4().hex}/log")


def names(store: StateStore) -> list[str]:
    return sorted(store.names())


def test_is_exported() -> None:
    assert mb.BatchLog is BatchLog


def test_write_is_exclusive_and_get_reads_one(store: StateStore) -> None:
    log = BatchLog(store)
    assert log.latest_id() is None and log.ids() == [] and log.entries() == []
    assert log.write(0, entry(0))
    assert not log.write(0, entry(0, other=True)), "an entry was replaced"
    assert log.get(0) == entry(0)
    assert log.get(1) is None
    assert log.write(1, entry(1))
    assert log.write(1, entry(1, again=True), overwrite=True)
    assert log.get(1) == entry(1, again=True)
    assert log.ids() == [0, 1] and log.latest_id() == 1
    assert [e["batchId"] for e in BatchLog(store).entries()] == [0, 1]
    with pytest.raises(ValueError, match="must hold it in 'batchId'"):
        log.write(2, entry(3))


def test_a_write_after_a_gap_is_refused(store: StateStore) -> None:
    log = BatchLog(store)
    log.write(0, entry(0))
    with pytest.raises(CorruptCheckpointError, match=r"log/1 is missing .the log ends at batch 0"):
        log.write(2, entry(2))
    # an empty log may start anywhere (a log without compaction had its older entries purged)
    assert BatchLog(store.child("p")).write(7, entry(7))


def test_compaction_in_sparks_layout(store: StateStore) -> None:
    log = BatchLog(store, compact_interval=10)
    for batch_id in range(25):
        assert log.write(batch_id, entry(batch_id))
    # the compact before the newest stays until the next compaction (for readers)
    assert names(store) == ["19.compact", "20", "21", "22", "23", "24", "9.compact"]
    compact = store.read("19.compact")
    assert compact == {"version": 1, "batchId": 19, "entries": [entry(b) for b in range(20)]}
    reader = BatchLog(store, compact_interval=10)
    assert reader.entries() == [entry(b) for b in range(25)]
    assert reader.ids() == list(range(25)) and reader.latest_id() == 24
    assert reader.get(3) == entry(3) and reader.get(22) == entry(22) and reader.get(25) is None
    assert not log.write(3, entry(3)), "a compacted batch was written again"
    assert not BatchLog(store, compact_interval=10).write(3, entry(3))


def test_a_growing_interval_rewrites_a_long_log_less_often(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "log"))
    log = BatchLog(store, compact_interval=10, growing=True)
    compactions, most_plain = set(), 0
    for batch_id in range(600):
        log.write(batch_id, entry(batch_id))
        listed = store.names()
        compactions.update(name for name in listed if name.endswith(".compact"))
        most_plain = max(most_plain, sum(1 for name in listed if name.isdigit()))
    # every 10 batches up to batch 100, then every sqrt(N): 10 + about 2 * (24.5 - 10)
    assert 33 <= len(compactions) <= 45, sorted(compactions)
    assert most_plain <= 25
    assert BatchLog(store, compact_interval=10).entries() == [entry(b) for b in range(600)]


def test_superseded_entries_stay_for_the_retention(tmp_path: Path) -> None:
    clock = Clock()
    store = StateStore(str(tmp_path / "log"))
    log = BatchLog(store, compact_interval=10, retention=60, clock=clock)
    for batch_id in range(10):
        log.write(batch_id, entry(batch_id))
    assert set(names(store)) == {*map(str, range(10)), "9.compact"}
    clock.now += 59
    for batch_id in range(10, 20):
        log.write(batch_id, entry(batch_id))
    assert set(names(store)) == {*map(str, range(20)), "9.compact", "19.compact"}
    clock.now += 2
    for batch_id in range(20, 30):
        log.write(batch_id, entry(batch_id))
    assert set(names(store)) == {*map(str, range(10, 30)), "19.compact", "29.compact"}
    assert len(BatchLog(store, compact_interval=10).entries()) == 30


def test_purge_keeps_the_newest_entries_and_lists_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = StateStore(str(tmp_path / "log"))
    for batch_id in range(5):  # left by an earlier run
        store.write(str(batch_id), entry(batch_id))
    store.write("cleanup", {"through": 3})  # not the log's: left alone
    log = BatchLog(store)
    retain = 3
    log.write(5, entry(5))  # its one listing finds the entries of the earlier run
    listings = 0
    real = store.names

    def counted(*, hidden: bool = False) -> list[str]:
        nonlocal listings
        listings += 1
        return real(hidden=hidden)

    monkeypatch.setattr(store, "names", counted)
    log.purge(5 - retain)
    for batch_id in range(6, 12):
        log.write(batch_id, entry(batch_id))
        log.purge(batch_id - retain)
    assert listings == 0, "purge listed the folder again"
    monkeypatch.undo()
    assert names(store) == ["10", "11", "8", "9", "cleanup"]
    assert log.ids() == [8, 9, 10, 11]
    assert [e["batchId"] for e in log.entries()] == [8, 9, 10, 11]


def test_damaged_files_are_named_with_what_is_wrong(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "log"))
    log = BatchLog(store, compact_interval=5, label="Manifest", advice="Restore the folder.")
    for batch_id in range(7):
        log.write(batch_id, entry(batch_id))
    folder = tmp_path / "log"
    (folder / "6").write_text('{"batchId": 6, "files": [')  # cut short
    with pytest.raises(
        CorruptCheckpointError,
        match=r"Manifest file .*log/6 is not a valid entry "
        r"\(it is not valid JSON\)\. Restore the folder\.",
    ):
        log.entries()
    (folder / "6").write_text(json.dumps(entry(5)))
    with pytest.raises(CorruptCheckpointError, match=r"log/6 .*\(it holds batch 5\)"):
        log.get(6)
    (folder / "6").write_text(json.dumps(entry(6)))
    (folder / "06").write_text(json.dumps(entry(6)))
    with pytest.raises(CorruptCheckpointError, match=r"log/06 is not named by its batch id \(6\)"):
        log.ids()
    (folder / "06").unlink()
    compact = json.loads((folder / "4.compact").read_text())
    del compact["entries"][2]
    (folder / "4.compact").write_text(json.dumps(compact))
    with pytest.raises(CorruptCheckpointError, match=r"4\.compact .*no entry for batch 2"):
        BatchLog(store, compact_interval=5).entries()
    checked = BatchLog(store, validate=lambda e: None if "size" in e else "it has no 'size'")
    with pytest.raises(CorruptCheckpointError, match=r"log/6 .*\(it has no 'size'\)"):
        checked.get(6)


def test_a_gap_is_reported_as_the_missing_file(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "log"))
    log = BatchLog(store)
    for batch_id in range(4):
        log.write(batch_id, entry(batch_id))
    (tmp_path / "log" / "2").unlink()
    with pytest.raises(CorruptCheckpointError, match=r"log/2 is missing .later batches"):
        log.entries()


WRITER = textwrap.dedent(
    """
    import sys
    from microbatch import BatchLog, StateStore

    folder, interval, retention, first = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), 0
    log = BatchLog(StateStore(folder), compact_interval=interval, retention=retention)
    first = (log.latest_id() or -1) + 1
    payload = "x" * 20000  # large enough that a kill may land inside a write
    for batch_id in range(first, first + 100000):
        log.write(batch_id, {"batchId": batch_id, "payload": payload})
        if batch_id == first:
            print("started", flush=True)
    """
)


def start_writer(tmp_path: Path, folder: Path, interval: int, retention: float) -> Any:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    process = subprocess.Popen(
        [sys.executable, str(script), str(folder), str(interval), str(retention)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "started"
    return process


def test_a_killed_writer_never_leaves_a_half_written_entry(tmp_path: Path) -> None:
    folder = tmp_path / "log"
    for round_ in range(3):
        process = start_writer(tmp_path, folder, interval=7, retention=0)
        time.sleep(0.2 + 0.1 * round_)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        log = BatchLog(StateStore(str(folder)), compact_interval=7)
        entries = log.entries()
        assert [e["batchId"] for e in entries] == list(range(len(entries)))
        assert all(len(e["payload"]) == 20000 for e in entries[-8:])
        log.sweep_temporary()
        assert not [name for name in os.listdir(folder) if name.endswith(".tmp")]


def test_readers_see_one_consistent_version_while_another_process_compacts(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "log"
    process = start_writer(tmp_path, folder, interval=3, retention=0.05)
    try:
        reader = BatchLog(StateStore(str(folder)), compact_interval=3)
        reads, newest = 0, -1
        # at least 2 s, and until the writer (a process starting up) got somewhere
        started = time.monotonic()
        while time.monotonic() - started < 2 or (
            (reads <= 5 or newest <= 20) and time.monotonic() - started < 60
        ):
            ids = [e["batchId"] for e in reader.entries()]
            assert ids == list(range(len(ids))), "an inconsistent version"
            assert len(ids) - 1 >= newest, "a read went back in time"
            newest = len(ids) - 1
            probe = newest // 2
            found = reader.get(probe)
            assert found is not None and found["batchId"] == probe
            reads += 1
        assert reads > 5 and newest > 20
    finally:
        process.kill()
        process.wait()
