"""Logs written by release 0.1 (committed fixtures, see ``fixtures/make_legacy_logs.py``) are
read whole by the current code, which then goes on writing them in its own layout."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest

import microbatch as mb
from microbatch.errors import CorruptCheckpointError
from microbatch.state import StateStore
from microbatch_file._listing import FileEntry
from microbatch_file._tracking import FileLog
from microbatch_file.manifest import METADATA_DIR, Manifest

FIXTURES = Path(__file__).parent / "fixtures" / "legacy_logs"
_spec = importlib.util.spec_from_file_location(
    "make_legacy_logs", FIXTURES.parent / "make_legacy_logs.py"
)
assert _spec is not None and _spec.loader is not None
legacy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(legacy)
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


def taken(batch: int) -> list[FileEntry]:
    return [
        FileEntry(path, size, mtime, tuple((k, v) for k, v in partition))
        for path, size, mtime, partition in EXPECTED["tracking"][batch]
    ]


def copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_a_tracking_log_of_0_1_is_read_and_moved_to_the_current_layout(tmp_path: Path) -> None:
    folder = copy(tmp_path, "tracking")
    assert "0-99.compact" in names(folder)
    log = FileLog(StateStore(str(folder)))
    log.load()
    assert log.latest_batch == 124 and log.cleaned_through == 50
    assert [log.files_of(b) for b in range(125)] == [taken(b) for b in range(125)]
    assert log.file_count == sum(len(files) for files in EXPECTED["tracking"])
    assert log.taken_as(taken(7)[1]) == (7, taken(7)[1])
    assert names(folder) == ["119.compact", "120", "121", "122", "123", "124", "cleanup"]
    for batch in range(125, 135):
        log.add_batch(batch, [FileEntry(f"/in/new{batch}.json", batch, 2e9)])
    assert "130.compact" in names(folder)  # 11 batches after 119: sqrt(131) is 11
    again = FileLog(StateStore(str(folder)))
    again.load()
    assert [again.files_of(b) for b in range(125)] == [taken(b) for b in range(125)]
    assert again.files_of(134) == [FileEntry("/in/new134.json", 134, 2e9)]


def test_an_interrupted_move_is_finished_at_the_next_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = copy(tmp_path, "tracking")
    store = StateStore(str(folder))
    real_delete = store.delete

    def crash_on_old_compacts(name: str) -> None:
        if name.endswith(".compact") and "-" in name:  # the new compact is written by now
            raise KeyboardInterrupt("killed")
        real_delete(name)

    monkeypatch.setattr(store, "delete", crash_on_old_compacts)
    with pytest.raises(KeyboardInterrupt):
        FileLog(store).load()
    assert {"119.compact", "0-99.compact"} <= set(names(folder))
    log = FileLog(StateStore(str(folder)))
    log.load()
    assert [log.files_of(b) for b in range(125)] == [taken(b) for b in range(125)]
    assert names(folder) == ["119.compact", "120", "121", "122", "123", "124", "cleanup"]


def test_a_damaged_old_compact_is_named(tmp_path: Path) -> None:
    folder = copy(tmp_path, "tracking")
    document: dict[str, Any] = json.loads((folder / "100-109.compact").read_text())
    del document["batches"][3]
    (folder / "100-109.compact").write_text(json.dumps(document))
    with pytest.raises(CorruptCheckpointError, match=r"tracking/103 is missing .100-109"):
        FileLog(StateStore(str(folder))).load()
    assert "0-99.compact" in names(folder), "the old log was changed although it is damaged"


def test_a_manifest_of_0_1_is_read_and_extended(tmp_path: Path) -> None:
    root = copy(tmp_path, "manifest")
    manifest = Manifest(fsspec.filesystem("file"), str(root))
    entries = manifest.entries()
    assert [e["batchId"] for e in entries] == list(range(25))
    assert [e["files"] for e in entries] == EXPECTED["manifest"]
    assert {e["queryId"] for e in entries} == {"legacy-query"}
    assert manifest.entry(3) == entries[3] and manifest.entry(22) == entries[22]
    assert manifest.verify(24) == 24
    assert manifest.files()[0] == f"{root}/k=a/part-00000-00000-x.c000.json"
    assert not manifest.commit(24, []), "a committed batch was committed again"
    for batch in range(25, 30):
        assert manifest.commit(batch, [])
    assert "29.compact" in names(root / METADATA_DIR)
    fresh = Manifest(fsspec.filesystem("file"), str(root))
    assert [e["batchId"] for e in fresh.entries()] == list(range(30))
    assert [e["files"] for e in fresh.entries()[:25]] == EXPECTED["manifest"]


# -- a whole query of the 0.1 code (json -> json, its checkpoint and output) -----------------


@pytest.fixture
def legacy_query() -> Iterator[Path]:
    """The committed query, copied to the fixed location it ran at (its checkpoint records
    absolute paths) with the input files' times restored; one test at a time holds it."""
    root = legacy.QUERY_ROOT
    with open(f"{root}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(FIXTURES / "query", root)
        for index in range(legacy.QUERY_BATCHES):
            os.utime(root / "in" / f"f{index:04d}.json", (legacy.query_mtime(index),) * 2)
        try:
            yield root
        finally:
            shutil.rmtree(root, ignore_errors=True)


def output_ids(root: Path) -> list[int]:
    table = mb.Session().read.format("json").schema("id BIGINT").load(str(root / "out"))
    return sorted(table.column("id").to_pylist())


def test_a_query_of_0_1_goes_on_with_no_file_read_twice_or_lost(legacy_query: Path) -> None:
    root, done = legacy_query, legacy.QUERY_BATCHES
    assert output_ids(root) == list(range(done * legacy.ROWS_PER_FILE))
    assert "0-9.compact" in names(root / "checkpoint" / "sources" / "0")
    for index in range(done, done + 10):
        legacy.put_input(root / "in", index)
    legacy.run_query(root)
    assert output_ids(root) == list(range((done + 10) * legacy.ROWS_PER_FILE))
    # the compact of the move (9) stays until the next compaction, as any superseded one
    assert names(root / "checkpoint" / "sources" / "0") == ["19.compact", "20", "21", "9.compact"]
    assert "19.compact" in names(root / "out" / METADATA_DIR)
    legacy.run_query(root)  # nothing new: nothing is read again
    assert output_ids(root) == list(range((done + 10) * legacy.ROWS_PER_FILE))
