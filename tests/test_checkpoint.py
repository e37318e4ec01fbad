from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from microbatch._checkpoint import BatchEntry, Checkpoint, SourceRange
from microbatch.errors import (
    CheckpointError,
    CheckpointInUseError,
    CheckpointMismatchError,
    CorruptCheckpointError,
)
from microbatch.state import StateStore


def entry(batch_id: int) -> BatchEntry:
    return BatchEntry(
        batch_id, (SourceRange({"offset": batch_id}, {"offset": batch_id + 1}),), 1000 + batch_id
    )


def with_offsets(location: str, *batch_ids: int) -> Checkpoint:
    """A checkpoint opened at ``location`` with the offsets of ``batch_ids`` logged."""
    checkpoint = Checkpoint(location)
    checkpoint.open(source="rate", sink="memory")
    for batch_id in batch_ids:
        checkpoint.write_offsets(entry(batch_id))
    return checkpoint


@pytest.fixture(params=["local", "memory"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return f"memory://checkpoints/{uuid.uuid4().hex}"
    return str(tmp_path / "cp")


def test_new_checkpoint_gets_an_id_that_survives_reopening(location: str) -> None:
    first = Checkpoint(location).open(source="rate", sink="memory")
    second = Checkpoint(location).open(source="rate", sink="memory")
    assert first["id"] == second["id"]
    assert first["source"] == "rate"


def test_offsets_and_commits_round_trip(location: str) -> None:
    checkpoint = Checkpoint(location)
    checkpoint.open(source="rate", sink="memory")
    assert checkpoint.latest_offsets() is None
    checkpoint.write_offsets(entry(0))
    checkpoint.write_commit(0, 10)
    checkpoint.write_offsets(entry(1))
    reopened = Checkpoint(location)
    latest = reopened.latest_offsets()
    assert latest == entry(1)
    assert reopened.is_committed(0) and not reopened.is_committed(1)


def test_a_second_writer_of_the_same_batch_is_refused(location: str) -> None:
    with_offsets(location, 0)
    with pytest.raises(CheckpointInUseError, match="already has offsets/0"):
        Checkpoint(location).write_offsets(entry(0))


def test_retention_keeps_the_newest_entries(location: str) -> None:
    checkpoint = Checkpoint(location, retain=3)  # as Spark: ids 2-5 remain after 0-5
    checkpoint.open(source="rate", sink="memory")
    for batch_id in range(6):
        checkpoint.write_offsets(entry(batch_id))
        checkpoint.write_commit(batch_id, 1)
    assert checkpoint.batch_ids(checkpoint.offsets) == [2, 3, 4, 5]
    assert checkpoint.batch_ids(checkpoint.commits) == [2, 3, 4, 5]


def test_other_source_is_refused(location: str) -> None:
    Checkpoint(location).open(source="rate", sink="memory")
    with pytest.raises(CheckpointMismatchError, match="reading from 'rate', not 'socket'"):
        Checkpoint(location).open(source="socket", sink="memory")


def test_logs_without_metadata_are_refused(tmp_path: Path) -> None:
    location = str(tmp_path / "cp")
    with_offsets(location, 0)
    os.remove(tmp_path / "cp" / "metadata")
    with pytest.raises(CheckpointError, match="the metadata file is missing"):
        Checkpoint(location).open(source="rate", sink="memory")


def test_corrupted_files_are_named(tmp_path: Path) -> None:
    location = str(tmp_path / "cp")
    with_offsets(location, 0)
    (tmp_path / "cp" / "offsets" / "0").write_text('{"batchId": 0, "sta')
    with pytest.raises(
        CorruptCheckpointError, match=r"offsets/0 is not a valid entry \(it is not valid JSON\)"
    ):
        Checkpoint(location).latest_offsets()
    (tmp_path / "cp" / "offsets" / "0").write_text('{"batchId": 0}')
    with pytest.raises(CorruptCheckpointError, match=r"offsets/0 is not a valid offset log entry"):
        Checkpoint(location).latest_offsets()


def test_a_gap_in_the_offset_log_is_refused(tmp_path: Path) -> None:
    with_offsets(str(tmp_path / "cp"), 0, 1, 2)
    os.remove(tmp_path / "cp" / "offsets" / "1")
    with pytest.raises(CorruptCheckpointError, match="lacks offsets/1 before offsets/2"):
        Checkpoint(str(tmp_path / "cp")).latest_offsets()


def test_lock_is_exclusive_within_a_process(location: str) -> None:
    first = Checkpoint(location)
    first.acquire("run-1")
    with pytest.raises(CheckpointInUseError, match="another active query of this process"):
        Checkpoint(location).acquire("run-2")
    first.release()
    second = Checkpoint(location)
    second.acquire("run-3")
    second.release()


def test_lock_of_a_live_process_is_respected_and_a_dead_one_taken_over(tmp_path: Path) -> None:
    location = str(tmp_path / "cp")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from microbatch._checkpoint import Checkpoint; "
            f"Checkpoint({location!r}).acquire('other'); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(CheckpointInUseError, match=f"process {holder.pid}"):
            Checkpoint(location).acquire("mine")
    finally:
        holder.kill()
        holder.wait()
    checkpoint = Checkpoint(location)
    checkpoint.acquire("mine")  # the killed holder's lock is stale
    lock = json.loads((tmp_path / "cp" / "lock").read_text())
    assert lock["runId"] == "mine"
    checkpoint.release()


def test_state_store_writes_atomically_and_exclusively(location: str) -> None:
    store = StateStore(location).child("sources/0")
    assert store.read("x") is None
    store.write("x", {"a": 1})
    store.write("x", {"a": 2})
    assert store.read("x") == {"a": 2}
    assert store.create("y", [1]) is True
    assert store.create("y", [2]) is False
    assert store.read("y") == [1]
    assert sorted(store.names()) == ["x", "y"]
    store.delete("x")
    store.delete("x")
    assert store.names() == ["y"]


def test_lock_sees_through_other_spellings_of_the_same_folder(tmp_path: Path) -> None:
    first = Checkpoint(str(tmp_path / "cp"))
    first.acquire("run-1")
    for spelling in (f"file://{tmp_path}/cp", f"{tmp_path}/cp/.", f"{tmp_path}/x/../cp"):
        with pytest.raises(CheckpointInUseError):
            Checkpoint(spelling).acquire("run-2")
    first.release()


def test_release_removes_only_its_own_lock(tmp_path: Path) -> None:
    location = str(tmp_path / "cp")
    first = Checkpoint(location)
    first.acquire("run-1")
    first.release()
    second = Checkpoint(location)
    second.acquire("run-2")
    first.release()  # a late second release of the first run must not free the second's lock
    assert json.loads((tmp_path / "cp" / "lock").read_text())["runId"] == "run-2"
    second.release()
    assert not (tmp_path / "cp" / "lock").exists()
