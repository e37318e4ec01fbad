"""A store the connector cannot reach, or a path that is no table: at start a clear error that
names the table (no terminal colour codes), mid-batch a ``RetriableError`` (the engine runs the
batch again, exactly once). The unreachable store is a real S3 endpoint on a loopback port
nobody listens on; a folder that cannot be written mid-run is made immutable (``chattr +i``,
which binds root too), so these tests skip where that is not possible."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import microbatch as mb
from microbatch_delta._commit import DeltaStreamWriter, SinkSettings
from microbatch_delta._part_writer import DeltaPartWriter
from microbatch_delta._scan import Scanner
from microbatch_delta._table import target_at
from microbatch_delta._verdicts import Policy

sys.path.insert(0, str(Path(__file__).parent))
from _delta_sink_testing import SCHEMA, make_writer, read_ids, rows, run_batch, write

UNREACHABLE = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
    "AWS_ALLOW_HTTP": "true",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "max_retries": "0",
    "retry_timeout": "1s",
    "timeout": "2s",
    "connect_timeout": "1s",
}
S3_PATH = "s3://bucket/table"
START_TEXT = (
    "could not open the Delta table at s3://bucket/table: .*Connection refused.*; check the "
    "path and storage options"
)


@pytest.fixture(scope="module")
def session() -> mb.Session:
    return mb.Session(conf={"maxBatchRetries": 10, "batchRetryBackoff": "100 milliseconds"})


def storage_options() -> dict[str, str]:
    return {f"storage.{key}": value for key, value in UNREACHABLE.items()}


def rate(session: mb.Session) -> mb.StreamFrame:
    return (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", 10)
        .option("numPartitions", 2)
        .load()
    )


def test_a_sink_on_an_unreachable_store_fails_at_start_naming_the_table(
    session: mb.Session, tmp_path: Path
) -> None:
    writer = rate(session).write_stream.format("delta").options(**storage_options())
    writer = writer.option("checkpointLocation", str(tmp_path / "checkpoint"))
    with pytest.raises(mb.SinkError, match=START_TEXT) as caught:
        writer.trigger(available_now=True).start(S3_PATH)
    assert "\x1b" not in str(caught.value)


def test_a_source_on_an_unreachable_store_fails_at_load_naming_the_table(
    session: mb.Session,
) -> None:
    reader = session.read_stream.format("delta").options(**storage_options())
    with pytest.raises(mb.SourceError, match=START_TEXT) as caught:
        reader.load(S3_PATH)
    assert "\x1b" not in str(caught.value)


def test_a_path_that_is_a_file_is_no_table(session: mb.Session, tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("a,b\n1,2\n")
    text = f"{path} is not a Delta table: it is a file"
    with pytest.raises(mb.SourceError, match=text):
        session.read_stream.format("delta").load(str(path))
    with pytest.raises(mb.SourceError, match=text):
        session.read.format("delta").load(str(path))
    writer = rate(session).write_stream.format("delta")
    writer = writer.option("checkpointLocation", str(tmp_path / "checkpoint"))
    with pytest.raises(mb.SinkError, match=text):
        writer.trigger(available_now=True).start(str(path))


def test_mid_batch_an_unreachable_store_is_retriable() -> None:
    target = target_at(S3_PATH, UNREACHABLE)
    writer = DeltaStreamWriter(target, SCHEMA, "query-1", SinkSettings())  # after start()
    with pytest.raises(mb.RetriableError, match="could not open the Delta table at s3://"):
        writer.part_writer()  # the table read again
    with pytest.raises(mb.RetriableError, match="could not open the Delta table at s3://"):
        writer.commit([], 0)
    part = DeltaPartWriter(target, SCHEMA)
    batch = rows([1, 2])
    with pytest.raises(mb.RetriableError, match="could not write part 0 of batch 3") as caught:
        part.write(
            pa.RecordBatchReader.from_batches(SCHEMA, batch.to_batches()),
            mb.PartContext(batch_id=3, part_index=0, num_parts=1, query_id="query-1"),
        )
    assert "\x1b" not in str(caught.value)


def test_a_running_source_that_cannot_reach_its_store_is_retriable() -> None:
    scanner = Scanner(target_at(S3_PATH, UNREACHABLE), SCHEMA, (), Policy(), latest_version=0)
    with pytest.raises(mb.RetriableError, match="could not open the Delta table at s3://"):
        scanner.latest_version()  # how far the stream may go, asked at each trigger


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    """Folders to make immutable with ``chattr +i``; made mutable again at the end."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not available")
    folders: list[Path] = []
    yield folders
    for folder in folders:
        subprocess.run(["chattr", "-i", str(folder)], check=False)


def freeze(folders: list[Path], folder: Path) -> None:
    done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, check=False)
    probe = folder / ".probe"
    try:
        probe.touch()
    except OSError:
        folders.append(folder)
        return
    probe.unlink()
    if done.returncode == 0:
        subprocess.run(["chattr", "-i", str(folder)], check=False)
    pytest.skip("cannot make a folder unwritable here (chattr +i needs root on ext2/3/4)")


def thaw(folder: Path) -> None:
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_commit_that_fails_in_the_store_is_retriable_and_lands_once(
    tmp_path: Path, immutable: list[Path]
) -> None:
    path = tmp_path / "table"
    writer = make_writer(path)
    run_batch(writer, 0, rows([1, 2]))
    messages = write(writer, 1, rows([3]))
    freeze(immutable, path / "_delta_log")
    with pytest.raises(mb.RetriableError, match=f"could not commit batch 1 to .*{path}") as caught:
        writer.commit(messages, 1)
    assert "\x1b" not in str(caught.value)
    writer.abort(messages, 1)
    thaw(path / "_delta_log")
    run_batch(writer, 1, rows([3]))  # the engine's retry
    run_batch(writer, 1, rows([3]))  # a replay after it: skipped
    assert read_ids(path) == [1, 2, 3]
    assert sorted(p.name for p in path.glob("*.parquet")) == sorted(
        p.name for p in path.glob("part-*.parquet")
    )
    assert len(list(path.glob("*.parquet"))) == 2  # the aborted part's file is gone


@pytest.mark.parametrize("frozen", ["table folder", "log folder"])
def test_a_running_query_rides_out_a_store_failure_exactly_once(
    session: mb.Session, tmp_path: Path, immutable: list[Path], frozen: str
) -> None:
    path, checkpoint = tmp_path / "table", tmp_path / "checkpoint"

    def run() -> mb.StreamingQuery:
        writer = rate(session).write_stream.format("delta")
        query = writer.option("checkpointLocation", str(checkpoint)).trigger(available_now=True)
        return query.start(str(path))

    first = run()
    assert first.await_termination(timeout=60)
    assert first.exception() is None
    folder = path if frozen == "table folder" else path / "_delta_log"
    freeze(immutable, folder)
    timer = threading.Timer(0.6, thaw, (folder,))
    timer.start()
    try:
        query = run()  # its batch fails until the folder can be written again
        assert query.await_termination(timeout=60)
    finally:
        timer.join()
    assert query.exception() is None
    values = DeltaTable(str(path)).to_pyarrow_table().column("value").to_pylist()
    assert sorted(values) == list(range(20))
