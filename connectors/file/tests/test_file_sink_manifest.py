"""The manifest log: atomic entries, compaction, and consistent reads while it is compacted."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import fsspec
import pytest

from microbatch.errors import CorruptCheckpointError
from microbatch_file.manifest import METADATA_DIR, Manifest


def entry_files(batch_id: int) -> list[dict[str, object]]:
    return [
        {
            "path": f"k=a/part-{batch_id:05d}-00000-x.c000.parquet",
            "size": 10,
            "rows": 1,
            "partition": {"k": "a"},
        },
        {
            "path": f"k=b/part-{batch_id:05d}-00001-x.c000.parquet",
            "size": 20,
            "rows": 2,
            "partition": {"k": "b"},
        },
    ]


@pytest.fixture(params=["local", "memory"])
def manifest(request: pytest.FixtureRequest, tmp_path: Path) -> Manifest:
    if request.param == "local":
        return Manifest(fsspec.filesystem("file"), str(tmp_path / "out"))
    return Manifest(fsspec.filesystem("memory"), f"/manifest-{uuid.uuid4().hex}/out")


def test_commit_is_create_exclusive(manifest: Manifest) -> None:
    assert not manifest.exists()
    assert manifest.latest_batch_id() is None
    assert manifest.files() == []
    assert manifest.commit(0, entry_files(0), query_id="q1")
    assert manifest.exists()
    assert not manifest.commit(0, [{"path": "other", "size": 1, "rows": 1, "partition": {}}])
    entry = manifest.entry(0)
    assert entry is not None
    assert entry["batchId"] == 0 and entry["queryId"] == "q1"
    assert entry["files"] == entry_files(0)
    assert isinstance(entry["committedAtMs"], int)
    assert manifest.files() == [
        f"{manifest.root}/k=a/part-00000-00000-x.c000.parquet",
        f"{manifest.root}/k=b/part-00000-00001-x.c000.parquet",
    ]


def test_compaction_keeps_every_entry_and_removes_old_files(manifest: Manifest) -> None:
    # retention 0: superseded plain entries go at once; the compact before the newest stays
    manifest = Manifest(manifest.fs, manifest.root, retention=0)
    for batch_id in range(25):
        assert manifest.commit(batch_id, entry_files(batch_id))
    names = sorted(
        str(name).rsplit("/", 1)[-1] for name in manifest.fs.ls(manifest.path, detail=False)
    )
    assert names == ["19.compact", "20", "21", "22", "23", "24", "9.compact"]
    assert manifest.latest_batch_id() == 24
    assert all(manifest.has_batch(b) for b in range(25))
    assert not manifest.has_batch(25)
    assert not manifest.commit(3, entry_files(3)), "a compacted batch was committed again"
    files = manifest.files()
    assert len(files) == 50
    assert files[0].endswith("part-00000-00000-x.c000.parquet")
    assert files[-1].endswith("part-00024-00001-x.c000.parquet")
    # a new reader sees the same
    assert Manifest(manifest.fs, manifest.root).files() == files


def test_readers_see_whole_batches_while_the_writer_compacts(tmp_path: Path) -> None:
    fs = fsspec.filesystem("file")
    writer = Manifest(fs, str(tmp_path / "out"), compact_interval=3)
    done = threading.Event()
    problems: list[str] = []

    def read() -> None:
        reader = Manifest(fs, str(tmp_path / "out"), compact_interval=3)
        while not done.is_set():
            ids = [entry["batchId"] for entry in reader.entries()]
            if ids != list(range(len(ids))):
                problems.append(f"inconsistent snapshot {ids}")

    threads = [threading.Thread(target=read) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for batch_id in range(200):
            writer.commit(batch_id, entry_files(batch_id))
    finally:
        done.set()
        for thread in threads:
            thread.join()
    assert not problems, problems[:3]
    assert len(writer.files()) == 400


def test_a_corrupted_entry_is_named(tmp_path: Path) -> None:
    manifest = Manifest(fsspec.filesystem("file"), str(tmp_path / "out"))
    manifest.commit(0, entry_files(0))
    (tmp_path / "out" / METADATA_DIR / "1").write_text("{not json")
    with pytest.raises(CorruptCheckpointError, match="_microbatch_metadata/1"):
        manifest.files()
