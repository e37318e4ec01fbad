"""The manifest is whole and agrees with the checkpoint; superseded files outlive readers.

A missing, misnamed or incomplete entry is a ``CorruptCheckpointError`` naming the file, for
readers of the folder and for the sink when it starts; superseded entries stay for the
retention so that a reader always finds the version it listed; temporary files of killed
writes are swept when the sink starts.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest

import microbatch as mb
from microbatch import WriteContext
from microbatch._cli import main
from microbatch.errors import CorruptCheckpointError, StreamingQueryException
from microbatch_file.manifest import METADATA_DIR, Manifest
from microbatch_file.sinks import ParquetFileSink

SCHEMA = pa.schema([("id", pa.int64()), ("kind", pa.string())])


def entry_files(batch_id: int) -> list[dict[str, object]]:
    return [{"path": f"part-{batch_id:05d}-00000-x.c000.parquet", "size": 1, "rows": 1}]


def names(manifest: Manifest) -> set[str]:
    return {str(p).rsplit("/", 1)[-1] for p in manifest.fs.ls(manifest.path, detail=False)}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def write_batches(tmp_path: Path, count: int, rows_per_batch: int = 10) -> Path:
    """``count`` batches of a json -> parquet query (one input file each) into tmp/out."""
    source, out = tmp_path / "in", tmp_path / "out"
    source.mkdir(exist_ok=True)
    first = len(list(source.iterdir()))
    for index in range(first, first + count):
        rows = [{"id": index * rows_per_batch + i, "kind": "ab"[i % 2]} for i in range(10)]
        (source / f"f{index:04d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    start_query(tmp_path).await_termination(timeout=60)
    return out


def start_query(tmp_path: Path) -> mb.StreamingQuery:
    return (
        mb.Session()
        .read_stream.format("json")
        .schema("id BIGINT, kind STRING")
        .option("maxFilesPerTrigger", 1)
        .load(str(tmp_path / "in"))
        .write_stream.format("parquet")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start(str(tmp_path / "out"))
    )


def read_ids(out: Path) -> list[int]:
    table = mb.Session().read.format("parquet").load(str(out))
    return sorted(table.column("id").to_pylist())


# ------------------------------------------------------------------ gaps, seen by everyone


def test_a_deleted_entry_is_reported_by_readers_and_by_the_sink(tmp_path: Path) -> None:
    out = write_batches(tmp_path, 5)
    assert len(read_ids(out)) == 50
    session = mb.Session()
    copy = (
        session.read_stream.format("parquet")
        .schema("id BIGINT, kind STRING")
        .load(str(out))
        .write_stream.format("memory")
        .query_name("copy")
    )
    running = copy.option("checkpointLocation", str(tmp_path / "cp-copy")).start()
    running.process_all_available()
    assert session.table("copy").num_rows == 50
    (out / METADATA_DIR / "2").unlink()
    missing = f"{METADATA_DIR}/2 is missing"
    with pytest.raises(StreamingQueryException, match=missing):
        running.await_termination(timeout=30)
    with pytest.raises(CorruptCheckpointError, match=missing):
        read_ids(out)
    with pytest.raises(CorruptCheckpointError, match=missing):
        copy.option("checkpointLocation", str(tmp_path / "cp-copy-2")).start()
    with pytest.raises(CorruptCheckpointError, match=missing):
        write_batches(tmp_path, 1)


def test_a_lost_newest_entry_is_found_against_the_commit_log(tmp_path: Path) -> None:
    out = write_batches(tmp_path, 5)
    (out / METADATA_DIR / "4").unlink()  # no reader can tell: the log looks complete
    assert len(read_ids(out)) == 40
    with pytest.raises(CorruptCheckpointError, match=f"{METADATA_DIR}/4 .batches 4 to 4. is"):
        write_batches(tmp_path, 1)
    shutil.rmtree(out / METADATA_DIR)
    with pytest.raises(CorruptCheckpointError, match=f"{METADATA_DIR}/0 .batches 0 to 4. is"):
        start_query(tmp_path)


def test_a_gap_after_the_compact_and_a_short_compact_are_reported(tmp_path: Path) -> None:
    fs = fsspec.filesystem("file")
    manifest = Manifest(fs, str(tmp_path / "out"))
    for batch_id in range(13):
        manifest.commit(batch_id, entry_files(batch_id))
    metadata = tmp_path / "out" / METADATA_DIR
    kept = (metadata / "11").read_text()
    (metadata / "11").unlink()
    with pytest.raises(CorruptCheckpointError, match=f"{METADATA_DIR}/11 is missing"):
        Manifest(fs, manifest.root).files()
    (metadata / "11").write_text(kept)
    (metadata / "3").unlink()  # covered by 9.compact: nothing is lost
    assert [e["batchId"] for e in Manifest(fs, manifest.root).entries()] == list(range(13))
    (metadata / "11").write_text((metadata / "12").read_text())
    with pytest.raises(CorruptCheckpointError, match=f"{METADATA_DIR}/11 .* holds batch 12"):
        Manifest(fs, manifest.root).files()
    compact = json.loads((metadata / "9.compact").read_text())
    del compact["entries"][4]
    (metadata / "9.compact").write_text(json.dumps(compact))
    with pytest.raises(CorruptCheckpointError, match=r"9\.compact .*no entry for batch 4"):
        Manifest(fs, manifest.root).files()


def test_a_commit_that_would_leave_a_gap_is_refused(tmp_path: Path) -> None:
    manifest = Manifest(fsspec.filesystem("file"), str(tmp_path / "out"))
    for batch_id in range(4):
        manifest.commit(batch_id, entry_files(batch_id))
    with pytest.raises(CorruptCheckpointError, match=f"{METADATA_DIR}/4 is missing"):
        manifest.commit(5, entry_files(5))
    assert manifest.latest_batch_id() == 3


def test_verify_compares_the_log_with_the_commit_log(tmp_path: Path) -> None:
    manifest = Manifest(fsspec.filesystem("file"), str(tmp_path / "out"))
    assert manifest.verify(None) is None
    with pytest.raises(CorruptCheckpointError, match=f"{METADATA_DIR}/0 "):
        manifest.verify(0)
    for batch_id in range(4):
        manifest.commit(batch_id, entry_files(batch_id))
    assert manifest.verify(None) == 3
    assert manifest.verify(3) == 3
    assert manifest.verify(2) == 3  # the sink committed batch 3, the checkpoint not yet
    with pytest.raises(CorruptCheckpointError, match="older than the output folder"):
        manifest.verify(1)
    with pytest.raises(CorruptCheckpointError, match=f"{METADATA_DIR}/4 .batches 4 to 6."):
        manifest.verify(6)


# ------------------------------------------------------------------ retention


def test_superseded_entries_stay_for_the_retention_then_go(tmp_path: Path) -> None:
    clock = Clock()
    manifest = Manifest(fsspec.filesystem("file"), str(tmp_path / "out"), clock=clock)
    for batch_id in range(10):
        manifest.commit(batch_id, entry_files(batch_id))
    assert names(manifest) == {*map(str, range(10)), "9.compact"}
    clock.now += 59
    for batch_id in range(10, 20):
        manifest.commit(batch_id, entry_files(batch_id))
    assert names(manifest) == {*map(str, range(20)), "9.compact", "19.compact"}
    clock.now += 2  # 61 s since 9.compact, 2 s since 19.compact
    for batch_id in range(20, 30):
        manifest.commit(batch_id, entry_files(batch_id))
    assert names(manifest) == {*map(str, range(10, 30)), "19.compact", "29.compact"}
    clock.now += 60
    for batch_id in range(30, 40):
        manifest.commit(batch_id, entry_files(batch_id))
    assert names(manifest) == {*map(str, range(30, 40)), "29.compact", "39.compact"}
    assert [e["batchId"] for e in Manifest(manifest.fs, manifest.root).entries()] == list(range(40))


def test_a_writer_after_a_restart_keeps_what_it_finds_for_the_retention(tmp_path: Path) -> None:
    clock = Clock()
    root = str(tmp_path / "out")
    first = Manifest(fsspec.filesystem("file"), root, clock=clock)
    for batch_id in range(15):
        first.commit(batch_id, entry_files(batch_id))
    clock.now += 3600  # a restart much later: the new writer cannot know when 9.compact came
    second = Manifest(fsspec.filesystem("file"), root, clock=clock)
    for batch_id in range(15, 20):
        second.commit(batch_id, entry_files(batch_id))
    assert {str(b) for b in range(10)} <= names(second)
    clock.now += 61
    for batch_id in range(20, 30):
        second.commit(batch_id, entry_files(batch_id))
    assert not {str(b) for b in range(10)} & names(second)


def test_a_reader_reads_the_version_it_listed_while_the_writer_compacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = fsspec.filesystem("file")
    root = str(tmp_path / "out")
    writer = Manifest(fs, root)
    for batch_id in range(15):
        writer.commit(batch_id, entry_files(batch_id))
    reader = Manifest(fs, root)
    store = reader._store
    real_read = store.read
    next_batch = [15]

    def read_racing_the_writer(name: str) -> Any:
        # between the reader's listing and its reads, the writer commits ten batches and
        # compacts (deterministically, every time the reader opens a compact)
        if name.endswith(".compact"):
            for _ in range(10):
                writer.commit(next_batch[0], entry_files(next_batch[0]))
                next_batch[0] += 1
        return real_read(name)

    monkeypatch.setattr(store, "read", read_racing_the_writer)
    assert [e["batchId"] for e in reader.entries()] == list(range(15))
    assert next_batch[0] == 25, "the reader had to list again"


# ------------------------------------------------------------------ temporary files


def make_sink(folder: str, **context: Any) -> mb.StreamWriter:
    options = ParquetFileSink.options.parse({"path": folder}, connector="parquet")
    return ParquetFileSink(options).stream_writer(
        WriteContext(schema=SCHEMA, query_id="q", **context)
    )


@pytest.mark.parametrize("where", ["local", "memory"])
def test_temporary_files_of_killed_writes_are_swept_on_start(tmp_path: Path, where: str) -> None:
    folder = str(tmp_path / "out") if where == "local" else f"memory://tmp-{uuid.uuid4().hex}/out"
    manifest = Manifest(*fsspec.core.url_to_fs(folder))
    manifest.commit(0, [])
    fs = manifest.fs
    leftovers = [f".1.{uuid.uuid4().hex}.tmp", f".9.compact.{uuid.uuid4().hex}.tmp"]
    for name in [*leftovers, ".keep"]:
        with fs.open(f"{manifest.path}/{name}", "wb") as handle:
            handle.write(b'{"version": 1')  # what a write killed half-way leaves
    make_sink(folder)
    assert names(manifest) == {"0", ".keep"}


# ------------------------------------------------------------------ moving the output


def test_an_output_folder_moved_whole_goes_on_but_an_empty_new_one_is_refused(
    tmp_path: Path,
) -> None:
    out = write_batches(tmp_path, 3)
    moved = tmp_path / "moved"
    out.rename(moved)
    assert main(["checkpoint", "forget-identity", str(tmp_path / "cp"), "--sink"]) == 0
    query = (
        mb.Session()
        .read_stream.format("json")
        .schema("id BIGINT, kind STRING")
        .load(str(tmp_path / "in"))
        .write_stream.format("parquet")
        .option("checkpointLocation", str(tmp_path / "cp"))
    )
    with pytest.raises(CorruptCheckpointError, match="a query cannot move its output folder"):
        query.trigger(available_now=True).start(str(tmp_path / "elsewhere"))
    # the refused start recorded the new path: forget it again
    assert main(["checkpoint", "forget-identity", str(tmp_path / "cp"), "--sink"]) == 0
    (tmp_path / "in" / "f9999.json").write_text('{"id": 30, "kind": "a"}\n')
    query.trigger(available_now=True).start(str(moved)).await_termination(timeout=60)
    assert read_ids(moved) == list(range(31))
